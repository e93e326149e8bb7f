/**
 * Retention benchmark. Run: PATH=node_modules/.bin:$PATH node --no-node-snapshot scripts/bench/retention.ts
 *
 * A store holding N old delivered deliveries (one attempt each), N old events and N old invocation
 * logs (each with a few printed lines) is purged with the default batch size (500). What matters
 * is how long delivery can wait behind the job: the longest single batch (its DELETE plus the
 * passive WAL checkpoint after it), which bounds the event-loop stall during the run (measured
 * too, with monitorEventLoopDelay).
 * Goals: longest batch < 50 ms; event-loop stall p99 < 50 ms. Also reported: rows purged per second.
 * Each round uses a fresh store; medians of ROUNDS are printed.
 */
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createEvents } from '../../src/events/index.ts';
import { memoryLogger } from '../../src/log/index.ts';
import { createRetention, type Purger } from '../../src/retention/index.ts';
import { createInvocations } from '../../src/runtime/index.ts';
import { openStore } from '../../src/store/index.ts';
import { createQueue } from '../../src/webhooks/index.ts';
import { median, setting } from './common.ts';
import { allMigrations } from '../../src/server/migrations.ts';

const N = setting('BENCH_N', 100_000);
const ROUNDS = setting('BENCH_ROUNDS', 3);
const BATCH = setting('BENCH_BATCH', 500);
const GOAL_BATCH_MS = 50;
const GOAL_STALL_MS = 50;
const DAY = 86_400_000;

function fill(db: NonNullable<ReturnType<typeof openStore>['sqlite']>, old: number): void {
  const delivery = db.prepare(
    `INSERT INTO webhook_deliveries (id, event_id, event_type, installation_id, url, origin, body, status, attempts, created_at, updated_at, completed_at)
     VALUES (?, ?, 'site_view', 'inst_bench', 'http://127.0.0.1/hook', 'http://127.0.0.1', ?, 'delivered', 1, ?, ?, ?)`,
  );
  const attempt = db.prepare(
    `INSERT INTO webhook_attempts (delivery_seq, number, manual, started_at, duration_ms, url, signature, status, outcome, response_excerpt)
     VALUES (?, 1, 0, ?, 3.2, 'http://127.0.0.1/hook', 't=1,v1=00', 200, 'success', '{"received":true}')`,
  );
  const event = db.prepare(`INSERT INTO events (id, type, installation_id, payload, received_at, delivery_count) VALUES (?, 'site_view', NULL, ?, ?, 1)`);
  const invocation = db.prepare(
    `INSERT INTO invocations (id, integration, installation_id, event_type, event_id, status, duration_ms, cpu_ms, logs, created_at)
     VALUES (?, 'bench', 'inst_bench', 'space_content_updated', ?, 200, 2.1, 0.9, ?, ?)`,
  );
  const body = JSON.stringify({ eventId: 'evt', type: 'site_view', installationId: 'inst_bench', siteId: 'site', url: 'https://example.com/', referrer: '' });
  const logs = JSON.stringify([1, 2, 3].map((i) => ({ time: old, level: 'log', message: `line ${i} of a typical handler's output` })));
  const iso = new Date(old).toISOString();
  db.transaction(() => {
    for (let i = 0; i < N; i++) {
      const seq = delivery.run(`dlv_${i}`, `evt_${i}`, body, old, old, old).lastInsertRowid;
      attempt.run(seq, old);
      event.run(`evt_${i}`, body, old);
      invocation.run(`req_${i}`, `evt_${i}`, logs, iso);
    }
  })();
}

async function round(): Promise<{ longestBatch: number; medianBatch: number; stallP99: number; stallMax: number; rowsPerSec: number; rows: number }> {
  const dir = mkdtempSync(join(tmpdir(), 'switchyard-bench-retention-'));
  const store = openStore(dir, { migrations: allMigrations() });
  try {
    const now = Date.now();
    fill(store.sqlite!, now - 40 * DAY);
    const queue = createQueue(store.database, { maxAttempts: () => 4 });
    const events = createEvents({
      database: store.database,
      log: memoryLogger(),
    });
    const invocations = createInvocations(store.database);
    const batches: number[] = [];
    const timed = (p: Purger): Purger => ({
      name: p.name,
      async purge(before, limit) {
        const t0 = performance.now();
        const n = await p.purge(before, limit);
        batches.push(performance.now() - t0);
        return n;
      },
    });
    const purgers: Purger[] = [
      timed({ name: 'deliveries', purge: (b, l) => queue.purgeFinished(b, l) }),
      timed({ name: 'events', purge: (b, l) => events.purgeOrphans(b, l) }),
      timed({ name: 'invocations', purge: (b, l) => invocations.purgeBefore(b, l) }),
    ];
    // As the server runs it: a passive checkpoint after each batch, timed as part of the batch.
    const checkpoint = () => {
      const t0 = performance.now();
      store.sqlite!.pragma('wal_checkpoint(PASSIVE)');
      batches[batches.length - 1] += performance.now() - t0;
    };
    const retention = createRetention({
      purgers: () => purgers,
      settings: () => ({ keep: 30 * DAY, keep_failed: 90 * DAY, batch_size: BATCH }),
      log: memoryLogger(),
      checkpoint,
    });
    const h = monitorEventLoopDelay({ resolution: 1 });
    h.enable();
    const t0 = performance.now();
    const report = await retention.run({ now });
    const elapsed = performance.now() - t0;
    h.disable();
    const rows = report.deliveries + report.events + report.invocations;
    if (report.deliveries !== N - 1 || report.events !== N - 1 || report.invocations !== N - 1)
      throw new Error(`unexpected purge counts ${JSON.stringify(report)}`);
    return {
      longestBatch: Math.max(...batches),
      medianBatch: median(batches),
      stallP99: h.percentile(99) / 1e6,
      stallMax: h.max / 1e6,
      rowsPerSec: (rows / elapsed) * 1000,
      rows,
    };
  } finally {
    store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

const results = [];
for (let i = 0; i < ROUNDS; i++) {
  const r = await round();
  results.push(r);
  console.log(
    `round ${i + 1}: ${r.rows} rows, longest batch ${r.longestBatch.toFixed(1)} ms, median batch ${r.medianBatch.toFixed(2)} ms, ` +
      `event-loop stall p99 ${r.stallP99.toFixed(1)} ms (max ${r.stallMax.toFixed(1)} ms), ${Math.round(r.rowsPerSec)} rows/s`,
  );
}
const longest = median(results.map((r) => r.longestBatch));
const stall = median(results.map((r) => r.stallP99));
console.log(`\nretention, ${N} rows per table, batch ${BATCH} (medians of ${ROUNDS}):`);
console.log(`  longest batch         ${longest.toFixed(1)} ms   goal < ${GOAL_BATCH_MS} ms   ratio ${(longest / GOAL_BATCH_MS).toFixed(2)}`);
console.log(`  median batch          ${median(results.map((r) => r.medianBatch)).toFixed(2)} ms`);
console.log(`  event-loop stall p99  ${stall.toFixed(1)} ms   goal < ${GOAL_STALL_MS} ms   ratio ${(stall / GOAL_STALL_MS).toFixed(2)}`);
console.log(`  throughput            ${Math.round(median(results.map((r) => r.rowsPerSec)))} rows/s`);
