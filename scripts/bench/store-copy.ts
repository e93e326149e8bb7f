/**
 * `switchyard store copy`'s speed: a SQLite store copied into a fresh PostgreSQL database, by rows
 * per INSERT. Run: node_modules/.bin/node --no-node-snapshot scripts/bench/store-copy.ts
 *
 * Builds one SQLite store (src/store, every module's schema) holding BENCH_EVENTS (10000) events,
 * each with one delivered delivery (the event's JSON as its body), one attempt and one invocation
 * with two log lines: 4 rows per event, about 0.5 KB each, shaped like the product's. Starts a throwaway PostgreSQL
 * (test/helpers/postgres.ts, default settings) and copies the store into a new database per round
 * with copySqliteToPostgres (src/store/copy.ts), 1, 100, 200, 500 and 1000 rows per INSERT, the
 * median of BENCH_ROUNDS (3) rounds each. The time includes the reads from SQLite, the counts
 * and the sequences, not the schema's migrations.
 *
 * Then the user's path: `switchyard store copy --json` (src/main.ts, a process per round) into a fresh
 * database, timed from start to exit, with the copy's own time as it reports it.
 *
 * (The shape the copy did not take, multi-row INSERT … VALUES with a parameter per value, was
 * measured here until the synchronous PostgreSQL connection went: docs/postgres.md, "Moving up".)
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { median, setting } from './common.ts';

const ROOT = new URL('../../', import.meta.url).pathname;
import { startPostgres } from '../../test/helpers/postgres.ts';
import { connectStore, openStore } from '../../src/store/index.ts';
import { allMigrations } from '../../src/server/migrations.ts';
import { copyStore } from '../../src/store/copy.ts';
import { adminSql } from '../../test/helpers/postgres.ts';

const EVENTS = setting('BENCH_EVENTS', 10_000);
const ROUNDS = setting('BENCH_ROUNDS', 3);
const BATCHES = [1, 100, 200, 500, 1000];

const dir = mkdtempSync(join(tmpdir(), 'switchyard-bench-copy-'));
const server = await startPostgres();
try {
  const sqlite = openStore(join(dir, 'data'), { migrations: allMigrations() });
  const now = Date.now();
  const sdb = sqlite.sqlite!;
  const event = sdb.prepare('INSERT INTO events (id, type, installation_id, payload, received_at, delivery_count) VALUES (?, ?, ?, ?, ?, 1)');
  const delivery = sdb.prepare(
    `INSERT INTO webhook_deliveries (id, event_id, event_type, installation_id, url, origin, body, status, attempts, created_at, updated_at, completed_at, last_status)
     VALUES (?, ?, 'site_view', 'inst_1', 'https://hooks.example.com/in', 'https://hooks.example.com', ?, 'delivered', 1, ?, ?, ?, 200)`,
  );
  const attempt = sdb.prepare(
    `INSERT INTO webhook_attempts (delivery_seq, number, started_at, duration_ms, url, signature, status, outcome, response_excerpt)
     VALUES (?, 1, ?, ?, 'https://hooks.example.com/in', ?, 200, 'success', '{"ok":true}')`,
  );
  const invocation = sdb.prepare(
    `INSERT INTO invocations (id, integration, installation_id, event_type, event_id, status, duration_ms, cpu_ms, logs, created_at)
     VALUES (?, 'greeter', 'inst_1', 'site_view', ?, 200, ?, ?, ?, ?)`,
  );
  sdb.transaction(() => {
    for (let i = 0; i < EVENTS; i++) {
      const at = now + i;
      const payload = JSON.stringify({
        type: 'site_view',
        siteId: 'site_1',
        visitor: { anonymousId: `anon_${i}`, userAgent: 'Mozilla/5.0 (X11; Linux x86_64)' },
        url: `https://docs.example.com/page/${i}`,
      });
      event.run(`evt_${i}`, 'site_view', 'inst_1', payload, at);
      const seq = delivery.run(`dlv_${i}`, `evt_${i}`, payload, at, at, at).lastInsertRowid;
      attempt.run(seq, at, 12.5 + (i % 7), `t=${Math.floor(at / 1000)},v1=${'ab'.repeat(32)}`);
      invocation.run(
        `inv_${i}`,
        `evt_${i}`,
        3.25,
        1.5,
        JSON.stringify([
          { level: 'log', message: `handled ${i}` },
          { level: 'warn', message: 'slow upstream' },
        ]),
        new Date(at).toISOString(),
      );
    }
  })();
  const rows = EVENTS * 4;
  process.stdout.write(`${rows} rows (${EVENTS} events, deliveries, attempts, invocations), ${ROUNDS} rounds; ${server.version}\n`);
  process.stdout.write('rows/INSERT      ms   rows/s\n');
  let n = 0;
  for (const batchRows of BATCHES) {
    const times: number[] = [];
    for (let r = 0; r < ROUNDS; r++) {
      const db = `copy_${++n}`;
      adminSql(server.url, `CREATE DATABASE ${db}`);
      const url = new URL(server.url);
      url.pathname = `/${db}`;
      const scratch = mkdtempSync(join(dir, 'scratch-'));
      const target = await connectStore(scratch, { url: url.toString(), migrations: allMigrations() });
      const source = openStore(join(dir, 'data'), { readonly: true });
      try {
        times.push((await copyStore(source, target, { migrations: allMigrations(), targetName: db, batchRows })).ms);
      } finally {
        await source.close();
        await target.close();
      }
    }
    const ms = median(times);
    process.stdout.write(`${String(batchRows).padStart(11)} ${String(Math.round(ms)).padStart(7)} ${String(Math.round((rows * 1000) / ms)).padStart(8)}\n`);
  }
  // The user's path: the command itself (src/main.ts store copy), a process per round, timed from
  // its start to its exit (start-up and the target's migrations included), with the copy's own ms.
  sqlite.close();
  const config = join(dir, 'config.yaml');
  writeFileSync(config, `data_dir: ${JSON.stringify(join(dir, 'data'))}\n`);
  const whole: number[] = [];
  const copyMs: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    const db = `copy_${++n}`;
    adminSql(server.url, `CREATE DATABASE ${db}`);
    const url = new URL(server.url);
    url.pathname = `/${db}`;
    const started = performance.now();
    const run = spawnSync(
      process.execPath,
      ['--no-node-snapshot', join(ROOT, 'src/main.ts'), 'store', 'copy', '--to', url.toString(), '--config', config, '--json'],
      { encoding: 'utf8' },
    );
    whole.push(performance.now() - started);
    if (run.status !== 0) throw new Error(`store copy exited with ${run.status}: ${run.stderr}`);
    copyMs.push((JSON.parse(run.stdout) as { ms: number }).ms);
  }
  const perSecond = (ms: number) => Math.round((rows * 1000) / ms);
  process.stdout.write(
    `switchyard store copy (the command, default batches): ${Math.round(median(whole))} ms start to exit, ${perSecond(median(whole))} rows/s; ` +
      `the copy itself ${Math.round(median(copyMs))} ms, ${perSecond(median(copyMs))} rows/s\n`,
  );
} finally {
  server.stop();
  rmSync(dir, { recursive: true, force: true });
}
