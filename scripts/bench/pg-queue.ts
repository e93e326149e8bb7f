/**
 * The delivery queue's statements on PostgreSQL, with both drivers, against SQLite in the same run.
 * Run: node_modules/.bin/node --no-node-snapshot scripts/bench/pg-queue.ts
 *
 * Starts a throwaway PostgreSQL (test/helpers/postgres.ts; default settings, so every commit waits
 * for its WAL fsync), makes tables shaped like events and webhook_deliveries (their columns and
 * indexes, src/events/schema.ts and src/webhooks/schema.ts), and measures per engine/driver:
 *  (a) enqueue: one transaction per event (event row + delivery row), and one per batch of 100
 *      events (multi-row inserts);
 *  (b) claim: 1, 2 and 3 claimer processes, each a loop of "claim one due delivery with a lease
 *      (UPDATE … WHERE seq IN (SELECT … FOR UPDATE SKIP LOCKED LIMIT n) RETURNING …), then complete
 *      it" — the sender's two statements per delivery — until the queue is empty;
 *  (c) the claim statement's round trip p50/p99 (from the claimers' own timings);
 *  (d) SQLite (better-sqlite3, WAL, synchronous=NORMAL, BEGIN IMMEDIATE, as src/store does).
 * Every claim is checked: a delivery claimed twice while its lease holds is a duplicate (must be 0).
 * Medians of BENCH_ROUNDS (3) rounds, each on fresh tables.
 * Settings: BENCH_EVENTS (1000, per-event transactions), BENCH_BATCH_EVENTS (20000), BENCH_CLAIM_ROWS
 * (2000), BENCH_CLAIM_BATCH (1, rows per claim statement).
 */
import { fork } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import postgres from 'postgres';
import { median, percentile, setting } from './common.ts';
import { startPostgres } from '../../test/helpers/postgres.ts';

const ROUNDS = setting('BENCH_ROUNDS', 3);
const EVENTS = setting('BENCH_EVENTS', 1000);
const BATCH_EVENTS = setting('BENCH_BATCH_EVENTS', 20_000);
const CLAIM_ROWS = setting('BENCH_CLAIM_ROWS', 2000);
const CLAIM_BATCH = setting('BENCH_CLAIM_BATCH', 1);
const GROUP = 100;
const LEASE_MS = 60_000;

type Engine = 'pg' | 'postgres' | 'sqlite';

const PG_SCHEMA = `
DROP TABLE IF EXISTS webhook_deliveries; DROP TABLE IF EXISTS events;
CREATE TABLE events (
  seq BIGSERIAL PRIMARY KEY, id TEXT NOT NULL UNIQUE, type TEXT NOT NULL, installation_id TEXT,
  payload TEXT NOT NULL, received_at BIGINT NOT NULL, delivery_count INTEGER NOT NULL DEFAULT 0);
CREATE INDEX events_by_type ON events (type, seq);
CREATE INDEX events_by_time ON events (received_at);
CREATE TABLE webhook_deliveries (
  seq BIGSERIAL PRIMARY KEY, id TEXT NOT NULL UNIQUE, event_id TEXT NOT NULL, event_type TEXT NOT NULL,
  installation_id TEXT NOT NULL, url TEXT NOT NULL, origin TEXT NOT NULL, body TEXT NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('pending', 'retrying', 'held', 'delivered', 'failed', 'cancelled')),
  attempts INTEGER NOT NULL DEFAULT 0, next_attempt_at BIGINT, lease_until BIGINT, lease_owner TEXT,
  created_at BIGINT NOT NULL, updated_at BIGINT NOT NULL, completed_at BIGINT, last_status INTEGER, last_error TEXT,
  UNIQUE (event_id, installation_id));
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE next_attempt_at IS NOT NULL;
CREATE INDEX webhook_deliveries_due_by_origin ON webhook_deliveries (origin, next_attempt_at) WHERE next_attempt_at IS NOT NULL;
CREATE INDEX webhook_deliveries_leased ON webhook_deliveries (lease_until) WHERE lease_until IS NOT NULL;
CREATE INDEX webhook_deliveries_by_status ON webhook_deliveries (status, seq);
CREATE INDEX webhook_deliveries_by_installation ON webhook_deliveries (installation_id, seq);
CREATE INDEX webhook_deliveries_by_time ON webhook_deliveries (created_at);
CREATE INDEX webhook_deliveries_held ON webhook_deliveries (installation_id, seq) WHERE status = 'held';`;

const SQLITE_SCHEMA = PG_SCHEMA.replace(/BIGSERIAL PRIMARY KEY/g, 'INTEGER PRIMARY KEY').replace(/BIGINT/g, 'INTEGER');

// The statements, in PostgreSQL's placeholders; SQLite's use ? in the same order.
const SQL = {
  insertEvent: `INSERT INTO events (id, type, installation_id, payload, received_at) VALUES ($1, $2, $3, $4, $5) ON CONFLICT (id) DO NOTHING`,
  insertDelivery: `INSERT INTO webhook_deliveries (id, event_id, event_type, installation_id, url, origin, body, status, next_attempt_at, created_at, updated_at)
    VALUES ($1, $2, $3, $4, $5, $6, $7, 'pending', $8, $9, $9) ON CONFLICT (event_id, installation_id) DO NOTHING`,
  // A group of events and their deliveries: one multi-row INSERT each, rows as one JSON parameter.
  insertEvents: `INSERT INTO events (id, type, installation_id, payload, received_at)
    SELECT id, type, installation_id, payload, received_at FROM json_to_recordset($1::text::json)
      AS x(id text, type text, installation_id text, payload text, received_at bigint)
    ON CONFLICT (id) DO NOTHING`,
  insertDeliveries: `INSERT INTO webhook_deliveries (id, event_id, event_type, installation_id, url, origin, body, status, next_attempt_at, created_at, updated_at)
    SELECT id, event_id, event_type, installation_id, url, origin, body, 'pending', at, at, at FROM json_to_recordset($1::text::json)
      AS x(id text, event_id text, event_type text, installation_id text, url text, origin text, body text, at bigint)
    ON CONFLICT (event_id, installation_id) DO NOTHING`,
  claim: `UPDATE webhook_deliveries SET lease_until = $1, lease_owner = $2
    WHERE seq IN (SELECT seq FROM webhook_deliveries
                  WHERE next_attempt_at <= $3 AND (lease_until IS NULL OR lease_until <= $3)
                  ORDER BY next_attempt_at, seq LIMIT $4 FOR UPDATE SKIP LOCKED)
    RETURNING seq, id, url, origin, body, event_id, installation_id, event_type, status, attempts, next_attempt_at, created_at`,
  complete: `UPDATE webhook_deliveries SET status = 'delivered', next_attempt_at = NULL, completed_at = $1, attempts = attempts + 1,
    lease_until = NULL, lease_owner = NULL, updated_at = $1, last_status = 200 WHERE seq = $2 AND lease_owner = $3`,
};
// SQLite: numbered ?NNN placeholders, no row locks (its write lock serialises claims), json_each for groups.
const SQLITE_SQL: Partial<typeof SQL> = {
  insertEvents: `INSERT INTO events (id, type, installation_id, payload, received_at)
    SELECT j->>'id', j->>'type', j->>'installation_id', j->>'payload', j->>'received_at' FROM (SELECT value AS j FROM json_each(?1)) WHERE true
    ON CONFLICT (id) DO NOTHING`,
  insertDeliveries: `INSERT INTO webhook_deliveries (id, event_id, event_type, installation_id, url, origin, body, status, next_attempt_at, created_at, updated_at)
    SELECT j->>'id', j->>'event_id', j->>'event_type', j->>'installation_id', j->>'url', j->>'origin', j->>'body', 'pending', j->>'at', j->>'at', j->>'at'
    FROM (SELECT value AS j FROM json_each(?1)) WHERE true
    ON CONFLICT (event_id, installation_id) DO NOTHING`,
};
/** SQLite's text of a statement, with plain ? placeholders, and which parameter each takes (the product binds positionally). */
const sqliteOf = (name: keyof typeof SQL) => {
  const order: number[] = [];
  const text = (SQLITE_SQL[name] ?? SQL[name].replace(/FOR UPDATE SKIP LOCKED/, '')).replace(/[$?](\d+)/g, (_, n) => (order.push(Number(n) - 1), '?'));
  return { text, order };
};

const body = JSON.stringify({ type: 'site_view', data: { path: '/pricing', referrer: 'https://example.com/', n: 42 } });
const eventRow = (i: number, now: number) => ({ id: `evt_${now}_${i}`, type: 'site_view', installation_id: null, payload: body, received_at: now });
const deliveryRow = (i: number, now: number) => ({
  id: `dlv_${now}_${i}`,
  event_id: `evt_${now}_${i}`,
  event_type: 'site_view',
  installation_id: 'ins_bench',
  url: `https://receiver-${i % 4}.example/hook`,
  origin: `https://receiver-${i % 4}.example`,
  body,
  at: now,
});

/** One connection that runs a statement by name with positional parameters, per engine. */
interface Conn {
  run(name: keyof typeof SQL, params: unknown[]): Promise<any[]>;
  tx<T>(fn: () => Promise<T>): Promise<T>;
  /** One statement as its own transaction (SQLite: BEGIN IMMEDIATE, as src/store's transactions begin). */
  alone(name: keyof typeof SQL, params: unknown[]): Promise<any[]>;
  exec(sql: string): Promise<void>;
  close(): Promise<void>;
}

async function connect(engine: Engine, target: string): Promise<Conn> {
  if (engine === 'pg') {
    const c = new pg.Client({ connectionString: target });
    await c.connect();
    return {
      // Named: prepared once per connection, as postgres does by default.
      run: async (name, values) => (await c.query({ name, text: SQL[name], values })).rows,
      alone: async (name, values) => (await c.query({ name, text: SQL[name], values })).rows,
      async tx(fn) {
        await c.query('BEGIN');
        try {
          const r = await fn();
          await c.query('COMMIT');
          return r;
        } catch (e) {
          await c.query('ROLLBACK');
          throw e;
        }
      },
      exec: async (s) => void (await c.query(s)),
      close: () => c.end(),
    };
  }
  if (engine === 'postgres') {
    const sql = postgres(target, { max: 1, onnotice: () => {} });
    let inTx: postgres.TransactionSql | undefined;
    return {
      run: async (name, values) => [...(await (inTx ?? sql).unsafe(SQL[name], values as any[], { prepare: true }))],
      alone: async (name, values) => [...(await sql.unsafe(SQL[name], values as any[], { prepare: true }))],
      async tx(fn) {
        let out: any;
        await sql.begin(async (t) => {
          inTx = t;
          try {
            out = await fn();
          } finally {
            inTx = undefined;
          }
        });
        return out;
      },
      exec: async (s) => void (await sql.unsafe(s)),
      close: () => sql.end(),
    };
  }
  const db = new Database(target);
  db.pragma('busy_timeout = 5000');
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  db.pragma('temp_store = MEMORY');
  const stmts = new Map<string, { s: Database.Statement; order: number[] }>();
  const stmt = (name: keyof typeof SQL) => {
    let s = stmts.get(name);
    if (!s) {
      const { text, order } = sqliteOf(name);
      stmts.set(name, (s = { s: db.prepare(text), order }));
    }
    return s;
  };
  let depth = 0;
  const conn: Conn = {
    async run(name, values) {
      const { s, order } = stmt(name);
      const v = order.map((i) => values[i]);
      return s.reader ? s.all(...v) : (s.run(...v), []);
    },
    async tx(fn) {
      // Synchronous work in between, as the product's transactions are.
      if (depth++ === 0) db.exec('BEGIN IMMEDIATE');
      try {
        const r = await fn();
        if (depth === 1) db.exec('COMMIT');
        return r;
      } catch (e) {
        if (depth === 1) db.exec('ROLLBACK');
        throw e;
      } finally {
        depth--;
      }
    },
    alone: (name, values) => conn.tx(() => conn.run(name, values)),
    exec: async (s) => void db.exec(s),
    close: async () => void db.close(),
  };
  return conn;
}

// ---- a claimer process ------------------------------------------------------------------------
if (process.argv[2] === '--claimer') {
  const [, , , engine, target, owner] = process.argv;
  const c = await connect(engine as Engine, target);
  process.send!({ ready: true });
  await new Promise<void>((r) => process.once('message', () => r()));
  const claims: Array<[string, number, number]> = []; // seq, claimed at, lease until
  const lat: number[] = [];
  for (;;) {
    const now = Date.now();
    const t0 = performance.now();
    const rows = await c.alone('claim', [now + LEASE_MS, owner, now, CLAIM_BATCH]);
    lat.push(performance.now() - t0);
    if (!rows.length) break;
    for (const r of rows) claims.push([String(r.seq), now, now + LEASE_MS]);
    if (rows.length === 1) await c.alone('complete', [Date.now(), rows[0].seq, owner]);
    else
      await c.tx(async () => {
        for (const r of rows) await c.run('complete', [Date.now(), r.seq, owner]);
      });
  }
  lat.pop(); // the empty claim that ended the loop
  await c.close();
  process.send!({ claims, lat }, () => process.exit(0));
  await new Promise(() => {}); // never on to the run below (it would start a server of its own)
}

// ---- the run ------------------------------------------------------------------------------------
async function fresh(engine: Engine, target: string): Promise<Conn> {
  const c = await connect(engine, target);
  await c.exec(engine === 'sqlite' ? SQLITE_SCHEMA : PG_SCHEMA);
  return c;
}

async function enqueueEach(c: Conn): Promise<number> {
  const now = Date.now();
  const t0 = performance.now();
  for (let i = 0; i < EVENTS; i++) {
    const e = eventRow(i, now);
    const d = deliveryRow(i, now);
    await c.tx(async () => {
      await c.run('insertEvent', [e.id, e.type, e.installation_id, e.payload, e.received_at]);
      await c.run('insertDelivery', [d.id, d.event_id, d.event_type, d.installation_id, d.url, d.origin, d.body, d.at, d.at]);
    });
  }
  return EVENTS / ((performance.now() - t0) / 1000);
}

async function enqueueGrouped(c: Conn, n: number, now = Date.now()): Promise<number> {
  const t0 = performance.now();
  for (let i = 0; i < n; i += GROUP) {
    const idx = Array.from({ length: Math.min(GROUP, n - i) }, (_, k) => i + k);
    await c.tx(async () => {
      await c.run('insertEvents', [JSON.stringify(idx.map((k) => eventRow(k, now)))]);
      await c.run('insertDeliveries', [JSON.stringify(idx.map((k) => deliveryRow(k, now)))]);
    });
  }
  return n / ((performance.now() - t0) / 1000);
}

async function claimRun(engine: Engine, target: string, claimers: number) {
  const kids = await Promise.all(
    Array.from({ length: claimers }, (_, i) => {
      const k = fork(new URL(import.meta.url).pathname, ['--claimer', engine, target, `${process.pid}.${i}`], {
        execArgv: ['--no-node-snapshot'],
      });
      return new Promise<typeof k>((res, rej) => {
        k.once('message', () => res(k));
        k.once('error', rej);
      });
    }),
  );
  const done = kids.map((k) => new Promise<{ claims: Array<[string, number, number]>; lat: number[] }>((res) => k.once('message', res)));
  const t0 = performance.now();
  for (const k of kids) k.send('go');
  const results = await Promise.all(done);
  const secs = (performance.now() - t0) / 1000;
  // Duplicates: a delivery claimed again before an earlier lease of it ran out.
  const bySeq = new Map<string, Array<[number, number]>>();
  for (const r of results) for (const [seq, at, until] of r.claims) bySeq.set(seq, [...(bySeq.get(seq) ?? []), [at, until]]);
  let duplicates = 0;
  for (const leases of bySeq.values()) {
    leases.sort((a, b) => a[0] - b[0]);
    for (let i = 1; i < leases.length; i++) if (leases[i][0] < leases[i - 1][1]) duplicates++;
  }
  const claimed = results.reduce((n, r) => n + r.claims.length, 0);
  const lat = results.flatMap((r) => r.lat).sort((a, b) => a - b);
  return { perSec: claimed / secs, claimed, distinct: bySeq.size, duplicates, p50: percentile(lat, 50), p99: percentile(lat, 99) };
}

const engines: Engine[] = ['sqlite', 'pg', 'postgres'];
const server = await startPostgres();
const sqliteDir = mkdtempSync(join(tmpdir(), 'switchyard-bench-sqlite-'));
const targetOf = (e: Engine, round: number) => (e === 'sqlite' ? join(sqliteDir, `queue-${round}.db`) : server.url);
process.stdout.write(
  `${server.version}; SQLite ${new Database(':memory:').prepare('select sqlite_version() v').pluck().get()}; ` +
    `node ${process.version}; ${ROUNDS} rounds; claim batch ${CLAIM_BATCH}; PostgreSQL at its defaults (synchronous_commit=on)\n`,
);

type Row = Record<string, number>;
const results: Record<Engine, Row[]> = { sqlite: [], pg: [], postgres: [] };
let duplicatesTotal = 0;
try {
  for (let round = 0; round < ROUNDS; round++) {
    for (const e of engines) {
      const r: Row = {};
      const target = targetOf(e, round);
      let c = await fresh(e, target);
      r.enqueueEach = await enqueueEach(c);
      if (e !== 'sqlite') {
        // The same with the commit not waiting for its WAL flush (closer to SQLite's synchronous=NORMAL).
        await c.exec('TRUNCATE events, webhook_deliveries; SET synchronous_commit = off');
        r.enqueueEachAsync = await enqueueEach(c);
        await c.exec('SET synchronous_commit = on');
      }
      await c.exec(e === 'sqlite' ? 'DELETE FROM webhook_deliveries; DELETE FROM events' : 'TRUNCATE events, webhook_deliveries');
      r.enqueueGrouped = await enqueueGrouped(c, BATCH_EVENTS);
      for (const n of [1, 2, 3]) {
        await c.close();
        c = await fresh(e, target);
        await enqueueGrouped(c, CLAIM_ROWS, Date.now() - 1000);
        if (e !== 'sqlite') await c.exec('VACUUM ANALYZE webhook_deliveries');
        const cr = await claimRun(e, target, n);
        if (cr.claimed !== CLAIM_ROWS || cr.distinct !== CLAIM_ROWS)
          throw new Error(`${e} ${n} claimers: ${cr.claimed} claims of ${cr.distinct} rows, expected ${CLAIM_ROWS}`);
        duplicatesTotal += cr.duplicates;
        r[`claim${n}`] = cr.perSec;
        r[`dup${n}`] = cr.duplicates;
        r[`p50_${n}`] = cr.p50;
        r[`p99_${n}`] = cr.p99;
      }
      await c.close();
      results[e].push(r);
      process.stdout.write(
        `round ${round + 1} ${e}: ${Object.entries(r)
          .map(([k, v]) => `${k}=${v.toFixed(k.startsWith('p') ? 2 : 0)}`)
          .join(' ')}\n`,
      );
    }
  }
} finally {
  server.stop();
  rmSync(sqliteDir, { recursive: true, force: true });
}

const med = (e: Engine, k: string) => median(results[e].map((r) => r[k]));
const fmt = (n: number | undefined, d = 0) => (n === undefined || Number.isNaN(n) ? '-' : n.toFixed(d));
const lines: Array<[string, string, number]> = [
  ['enqueue, 1 tx per event (events/s)', 'enqueueEach', 0],
  ['  same, synchronous_commit=off', 'enqueueEachAsync', 0],
  ['enqueue, 1 tx per 100 events (events/s)', 'enqueueGrouped', 0],
  ['claim+complete, 1 claimer (deliveries/s)', 'claim1', 0],
  ['claim+complete, 2 claimers', 'claim2', 0],
  ['claim+complete, 3 claimers', 'claim3', 0],
  ['claim round trip p50, 1 claimer (ms)', 'p50_1', 3],
  ['claim round trip p99, 1 claimer (ms)', 'p99_1', 3],
  ['claim round trip p50, 3 claimers (ms)', 'p50_3', 3],
  ['claim round trip p99, 3 claimers (ms)', 'p99_3', 3],
];
process.stdout.write(
  `\nmedians of ${ROUNDS}        ${'sqlite'.padStart(10)}${'pg'.padStart(10)}${'postgres'.padStart(10)}   pg/sqlite postgres/sqlite postgres/pg\n`,
);
for (const [label, k, d] of lines) {
  const [s, p, q] = engines.map((e) => med(e, k));
  process.stdout.write(
    `${label.padEnd(42)}${fmt(s, d).padStart(10)}${fmt(p, d).padStart(10)}${fmt(q, d).padStart(10)}   ${fmt(p / s, 2).padStart(9)}${fmt(q / s, 2).padStart(16)}${fmt(q / p, 2).padStart(12)}\n`,
  );
}
process.stdout.write(`duplicate claims while a lease held (all rounds, all engines): ${duplicatesTotal}\n`);
process.exit(duplicatesTotal ? 1 : 0);
