/**
 * Durable deliveries with 1, 2 and 3 `switchyard serve` nodes on one PostgreSQL queue, against one
 * node on SQLite, in the same run.
 * Run: node_modules/.bin/node --no-node-snapshot scripts/bench/pg-nodes.ts
 *
 * Everything on this machine, nothing pinned (the nodes need both cores, and so does PostgreSQL):
 * - a throwaway PostgreSQL (test/helpers/postgres.ts) at its defaults, so every commit waits for
 *   its WAL fsync; a fresh database per round and engine;
 * - the nodes: the real command (src/main.ts serve) as a user starts it, each with its own data
 *   directory and `server.processes` BENCH_PROCESSES (0: the default, one per core), the same
 *   `store:` URL (none for SQLite) and admin token, a webhook installation made through the API;
 *   `webhooks.per_endpoint_concurrency` raised to BENCH_PER_ENDPOINT (32) so the cap does not set the pace;
 * - this process: the load generator and the receiver (answers 200 at once), so latency is read on
 *   one clock, from the start of the ingest request to the delivery's arrival.
 *
 * Per engine and round:
 * 1. Full speed: BENCH_N (3,000) events in batches of BENCH_BATCH (100) on POST /api/v1/events,
 *    BENCH_IN_FLIGHT (2) batches in flight per node, batches spread over the nodes. Durable
 *    deliveries/s from the first send to the N-th arrival; ingest-to-receiver p50/p99 per event
 *    (at full speed that is mostly the backlog's wait); ingest alone (every 202 answered).
 *    On PostgreSQL, from pg_stat_database and pg_stat_wal before and after (less what the idle
 *    nodes' once-a-second look for due work costs, measured just before): commits, WAL fsyncs,
 *    rows inserted and updated, WAL bytes, and statements (pg_stat_statements, loaded for the run)
 *    per delivery; CPU per delivery of the nodes, PostgreSQL and this process (/proc).
 * 2. Steady: single-event POSTs, open loop at BENCH_RATE (100) events/s for BENCH_STEADY_SECONDS
 *    (8), spread over the nodes: ingest-to-receiver p50/p99 against the delivery benchmark's goal
 *    (p99 < 25 ms, scripts/bench/delivery.ts).
 * CPU busy (of every core, /proc/stat) during each phase says whether the machine was the limit.
 * Medians of BENCH_ROUNDS (3) rounds; engines in BENCH_ENGINES (sqlite,pg1,pg2,pg3).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { once } from 'node:events';
import pg from 'pg';
import { samplePayload } from '../../src/events/index.ts';
import { median, percentile, servingUrl, setting } from './common.ts';
import { startPostgres, type PgServer } from '../../test/helpers/postgres.ts';

const N = setting('BENCH_N', 3000);
const BATCH = setting('BENCH_BATCH', 100);
const IN_FLIGHT = setting('BENCH_IN_FLIGHT', 2);
const RATE = setting('BENCH_RATE', 100);
const STEADY_SECONDS = setting('BENCH_STEADY_SECONDS', 8, false);
const ROUNDS = setting('BENCH_ROUNDS', 3);
const PER_ENDPOINT = setting('BENCH_PER_ENDPOINT', 32);
const PROCESSES = process.env.BENCH_PROCESSES === undefined ? 0 : Number(process.env.BENCH_PROCESSES);
const ENGINES = (process.env.BENCH_ENGINES ?? 'sqlite,pg1,pg2,pg3').split(',').map((s) => s.trim());
const GOAL_P99 = 25;
const TOKEN = 'bench-token-0123456789';
const ROOT = new URL('../../', import.meta.url).pathname;

for (const e of ENGINES)
  if (!/^(sqlite|pg[1-9])$/.test(e)) {
    process.stderr.write(`BENCH_ENGINES: ${e} is not sqlite or pg<nodes> (pg1, pg2, pg3)\n`);
    process.exit(2);
  }
if (!Number.isInteger(PROCESSES) || PROCESSES < 0) {
  process.stderr.write(`BENCH_PROCESSES=${process.env.BENCH_PROCESSES}: a whole number, 0 for the default\n`);
  process.exit(2);
}

// --- the receiver ------------------------------------------------------------------------------
const sentAt = new Map<string, number>();
const latencies: number[] = [];
let arrived = 0;
let lastArrival = 0;
let waiting: { n: number; resolve: () => void } | undefined;
const receiver = http.createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    // The event a delivery comes from (its own eventId is the delivery's).
    const source = String(JSON.parse(Buffer.concat(chunks).toString()).sourceEventId);
    const t0 = sentAt.get(source);
    if (t0 === undefined) return; // a repeat (none expected: nothing is killed here) or another phase's
    sentAt.delete(source);
    lastArrival = performance.now();
    latencies.push(lastArrival - t0);
    arrived++;
    if (waiting && arrived >= waiting.n) waiting.resolve();
  });
});
receiver.keepAliveTimeout = 60_000;
receiver.listen(0, '127.0.0.1');
await once(receiver, 'listening');
const hook = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;

/** Resolves once `n` of the events sent since the last reset arrived (or after `ms`: then fewer did). */
function arrivals(n: number, ms: number): Promise<void> {
  if (arrived >= n) return Promise.resolve();
  return new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, ms);
    waiting = {
      n,
      resolve: () => {
        clearTimeout(timer);
        resolve();
      },
    };
  });
}
function reset(): void {
  sentAt.clear();
  latencies.length = 0;
  arrived = 0;
  waiting = undefined;
}

// --- the nodes ---------------------------------------------------------------------------------
interface Node {
  url: string;
  child: ChildProcess;
  dir: string;
  agent: http.Agent;
}

const alive = new Set<ChildProcess>();
process.on('exit', () => alive.forEach((c) => c.kill('SIGKILL')));

async function startNode(store: string | undefined): Promise<Node> {
  const dir = mkdtempSync(join(tmpdir(), 'switchyard-bench-node-'));
  cpSync(join(ROOT, 'integrations/webhook'), join(dir, 'integrations/webhook'), { recursive: true });
  writeFileSync(
    join(dir, 'config.yaml'),
    [
      'server:',
      '  port: 0',
      `  processes: ${PROCESSES}`,
      ...(store ? [`store: ${JSON.stringify(store)}`] : []),
      'data_dir: ./data',
      'integrations_dir: ./integrations',
      `admin_token: ${TOKEN}`,
      'log:',
      '  format: json',
      'webhooks:',
      '  allow_private_networks: true',
      `  per_endpoint_concurrency: ${PER_ENDPOINT}`,
      `  concurrency: ${Math.max(32, PER_ENDPOINT)}`,
    ].join('\n'),
  );
  const child = spawn(process.execPath, ['--no-node-snapshot', join(ROOT, 'src/main.ts'), 'serve', '--config', join(dir, 'config.yaml')], {
    cwd: dir,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const url = await servingUrl(child);
  // Warnings and errors are worth seeing; the rest is drained so a full pipe never blocks the node.
  child.stdout!.on('data', (d: Buffer) => {
    for (const line of String(d).split('\n')) if (/"level":"(warn|error)"/.test(line)) process.stderr.write(`  node: ${line.slice(0, 400)}\n`);
  });
  for (let i = 0; ; i++) {
    const ok = await fetch(`${url}/readyz`).then((r) => r.status === 200, () => false);
    if (ok) break;
    if (i > 600) throw new Error(`${url} not ready after 60 s`);
    await new Promise((r) => setTimeout(r, 100));
  }
  alive.add(child);
  child.once('exit', () => alive.delete(child));
  return { url, child, dir, agent: new http.Agent({ keepAlive: true, maxSockets: 64 }) };
}

async function stopNodes(nodes: Node[]): Promise<void> {
  await Promise.all(
    nodes.map(async (n) => {
      const exited = once(n.child, 'exit');
      n.child.kill('SIGTERM');
      await exited;
      n.agent.destroy();
      rmSync(n.dir, { recursive: true, force: true });
    }),
  );
}

function post(node: Node, body: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve) => {
    const req = http.request(
      `${node.url}/api/v1/events`,
      { method: 'POST', agent: node.agent, headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
      },
    );
    req.on('error', (e) => resolve({ status: 0, text: e.message }));
    req.end(body);
  });
}

async function api(node: Node, method: string, path: string, body?: unknown): Promise<any> {
  const res = await fetch(`${node.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const json = (await res.json()) as any;
  if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(json)}`);
  return json;
}

// --- CPU and PostgreSQL counters -----------------------------------------------------------------
/** CPU time (ms) a process has used, or undefined once it is gone. */
function cpuMs(pid: number): number | undefined {
  try {
    const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return ((Number(f[11]) + Number(f[12])) * 1000) / TICKS;
  } catch {
    return undefined;
  }
}
const TICKS = 100; // USER_HZ on Linux
/** A process and its descendants. */
function tree(pid: number): number[] {
  const out = [pid];
  try {
    for (const t of readdirSync(`/proc/${pid}/task`))
      for (const c of readFileSync(`/proc/${pid}/task/${t}/children`, 'utf8').trim().split(' ').filter(Boolean)) out.push(...tree(Number(c)));
  } catch {
    /* gone */
  }
  return out;
}
/** The PostgreSQL server's processes (its postmaster and every child), from its data directory's postmaster.pid. */
const postgresPids = (server: PgServer) => {
  try {
    return tree(Number(readFileSync(join(server.dir, 'data', 'postmaster.pid'), 'utf8').split('\n')[0]));
  } catch {
    return [];
  }
};

/** CPU used so far, per pid, by the nodes, PostgreSQL and this process; and every core's busy and total jiffies (/proc/stat). */
function cpuSnapshot(nodes: Node[], server: PgServer) {
  const per = (pids: number[]) => new Map(pids.map((p) => [p, cpuMs(p)]));
  const f = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
  const total = f.reduce((a, b) => a + b, 0);
  return { nodes: per(nodes.flatMap((n) => tree(n.child.pid!))), pg: per(postgresPids(server)), self: cpuMs(process.pid)!, busy: total - f[3] - (f[4] ?? 0), total };
}
type CpuSnapshot = ReturnType<typeof cpuSnapshot>;
/** CPU ms used between two snapshots by the processes alive at both; the share of all cores busy. */
function cpuUsed(a: CpuSnapshot, b: CpuSnapshot) {
  const sum = (x: Map<number, number | undefined>, y: Map<number, number | undefined>) => {
    let ms = 0;
    for (const [pid, v] of y) if (v !== undefined && x.get(pid) !== undefined) ms += v - x.get(pid)!;
    return ms;
  };
  return { nodes: sum(a.nodes, b.nodes), pg: sum(a.pg, b.pg), self: b.self - a.self, busy: (b.busy - a.busy) / Math.max(1, b.total - a.total) };
}

interface PgCounters {
  /** Statements run in the database (pg_stat_statements), NaN without it. */
  statements: number;
  commits: number;
  inserted: number;
  updated: number;
  deleted: number;
  walSyncs: number;
  walBytes: number;
  at: number;
}

async function pgCounters(db: pg.Client, name: string): Promise<PgCounters> {
  // Backends report their counts at most once a second: this reads what they reported.
  await db.query('SELECT pg_stat_clear_snapshot()');
  const d = (await db.query('SELECT xact_commit FROM pg_stat_database WHERE datname = $1', [name])).rows[0];
  // Rows of the product's tables only (autovacuum's ANALYZE writes catalog rows too).
  const t = (await db.query('SELECT sum(n_tup_ins) AS ins, sum(n_tup_upd) AS upd, sum(n_tup_del) AS del FROM pg_stat_user_tables')).rows[0];
  const w = (await db.query('SELECT wal_sync, wal_bytes FROM pg_stat_wal')).rows[0];
  const statements = await db
    .query('SELECT sum(calls) AS n FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = $1)', [name])
    .then((r) => Number(r.rows[0].n ?? 0), () => NaN);
  return {
    statements,
    commits: Number(d.xact_commit),
    inserted: Number(t.ins),
    updated: Number(t.upd),
    deleted: Number(t.del),
    walSyncs: Number(w.wal_sync),
    walBytes: Number(w.wal_bytes),
    at: performance.now(),
  };
}
/** The counters once the rows written stop changing (each backend reports at most once a second). */
async function settledCounters(db: pg.Client, name: string): Promise<PgCounters> {
  let last = await pgCounters(db, name);
  for (let waited = 0; waited < 12_000; waited += 1_000) {
    await sleep(1_000);
    const now = await pgCounters(db, name);
    const settled = waited >= 1_000 && now.inserted === last.inserted && now.updated === last.updated;
    last = now;
    if (settled) break;
  }
  return last;
}
const delta = (a: PgCounters, b: PgCounters) =>
  Object.fromEntries(Object.keys(a).map((k) => [k, b[k as keyof PgCounters] - a[k as keyof PgCounters]])) as unknown as PgCounters;
/** A counter's growth from `a` to `b` per delivery, less what idle nodes did over as long (`idleRate`: a delta). */
const perDelivery = (a: PgCounters, b: PgCounters, idleRate: PgCounters, deliveries: number) => {
  const d = delta(a, b);
  return (k: keyof PgCounters) => (d[k] - (idleRate[k] * d.at) / idleRate.at) / deliveries;
};
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// --- one engine, one round -----------------------------------------------------------------------
type Row = Record<string, number>;
let runId = 0;

async function measure(engine: string, server: PgServer, admin: pg.Client, round: number): Promise<Row> {
  const count = engine === 'sqlite' ? 1 : Number(engine.slice(2));
  let store: string | undefined;
  let db: pg.Client | undefined;
  const dbName = `bench_${round}_${engine}`;
  if (engine !== 'sqlite') {
    await admin.query(`CREATE DATABASE ${dbName}`);
    const u = new URL(server.url);
    u.pathname = `/${dbName}`;
    store = u.toString();
    db = new pg.Client({ connectionString: store });
    db.on('error', () => {});
    await db.connect();
    // Statements per delivery, where the server has pg_stat_statements loaded (see main).
    await db.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements').catch(() => {});
  }
  const nodes: Node[] = [];
  try {
    for (let i = 0; i < count; i++) nodes.push(await startNode(store));
    await api(nodes[0], 'POST', '/api/v1/installations', { integration: 'webhook', configuration: { webhook_url: hook, event_types: 'site_view' } });
    const run = `${(runId++).toString(36)}_${Date.now().toString(36)}`;
    let n = 0;
    const event = () => samplePayload('site_view', { eventId: `evt_${run}_${++n}` });

    // Every node fans out to the installation (the others learn it from the store), and warms up.
    for (const node of nodes)
      for (let tries = 0; ; tries++) {
        const e = event();
        const r = await post(node, JSON.stringify(e));
        if (r.status === 202 && JSON.parse(r.text).deliveries.length === 1) break;
        if (tries > 100) throw new Error(`${engine}: node ${node.url} does not see the installation: ${r.status} ${r.text}`);
        await sleep(100);
      }
    reset();
    {
      const warm = Array.from({ length: 300 }, event);
      warm.forEach((e) => sentAt.set(e.eventId as string, performance.now()));
      await Promise.all(nodes.map((node, i) => post(node, JSON.stringify(warm.filter((_, j) => j % nodes.length === i)))));
      await arrivals(warm.length, 30_000);
    }

    // 1. Full speed.
    reset();
    const batches = Array.from({ length: Math.ceil(N / BATCH) }, () => Array.from({ length: BATCH }, event));
    const bodies = batches.map((b) => JSON.stringify(b));
    const total = batches.length * BATCH;
    let idle: PgCounters | undefined;
    let before: PgCounters | undefined;
    if (db) {
      // What the idle nodes cost (each process looks for due work every second), to take off the
      // figures; once the warm-up's counts have reached pg_stat_database (a backend reports at most once a second).
      await sleep(2_000);
      idle = await pgCounters(db, dbName);
      await sleep(3_000);
      before = await pgCounters(db, dbName);
    }
    const cpu0 = cpuSnapshot(nodes, server);
    const t0 = performance.now();
    let next = 0;
    let refused = 0;
    const lane = async (node: Node) => {
      while (next < bodies.length) {
        const i = next++;
        const at = performance.now();
        for (const e of batches[i]) sentAt.set(e.eventId as string, at);
        const r = await post(node, bodies[i]);
        if (r.status !== 202) {
          refused++;
          process.stderr.write(`  ${engine}: a batch answered ${r.status} ${r.text.slice(0, 200)}\n`);
        }
      }
    };
    await Promise.all(nodes.flatMap((node) => Array.from({ length: IN_FLIGHT }, () => lane(node))));
    const ackedMs = performance.now() - t0;
    await arrivals(total, 180_000);
    const cpu1 = cpuSnapshot(nodes, server);
    if (arrived < total || refused) throw new Error(`${engine}: ${arrived} of ${total} delivered, ${refused} batches refused`);
    const fullMs = lastArrival - t0;
    const full = [...latencies].sort((a, b) => a - b);
    const used = cpuUsed(cpu0, cpu1);
    const row: Row = {
      rate: (total / fullMs) * 1000,
      ingest: (total / ackedMs) * 1000,
      fullP50: percentile(full, 50),
      fullP99: percentile(full, 99),
      fullBusy: used.busy,
      cpuNodes: used.nodes / total,
      cpuSelf: used.self / total,
    };
    if (db) row.cpuPg = used.pg / total;
    if (db && idle && before) {
      const after = await settledCounters(db, dbName);
      const idleRate = delta(idle, before);
      const net = perDelivery(before, after, idleRate, total);
      row.statements = net('statements');
      row.commits = net('commits');
      row.walSyncs = net('walSyncs');
      row.inserted = net('inserted');
      row.updated = net('updated');
      row.walBytes = net('walBytes');
      row.idleStatements = (idleRate.statements / idleRate.at) * 1000;
    }
    const steadyBefore = db ? await pgCounters(db, dbName) : undefined;

    // 2. Steady rate, single events, open loop.
    reset();
    const steady = Math.round(RATE * STEADY_SECONDS);
    const cpu2 = cpuSnapshot(nodes, server);
    const start = performance.now();
    const sends: Promise<unknown>[] = [];
    for (let i = 0; i < steady; i++) {
      const wait = start + (i * 1000) / RATE - performance.now();
      if (wait > 1) await sleep(wait);
      const e = event();
      const body = JSON.stringify(e);
      sentAt.set(e.eventId as string, performance.now());
      sends.push(post(nodes[i % nodes.length], body));
    }
    await Promise.all(sends);
    await arrivals(steady, 10_000);
    const steadyUsed = cpuUsed(cpu2, cpuSnapshot(nodes, server));
    const lat = [...latencies].sort((a, b) => a - b);
    row.steadyP50 = percentile(lat, 50);
    row.steadyP99 = percentile(lat, 99);
    row.steadyLost = steady - arrived;
    row.steadyBusy = steadyUsed.busy;
    row.steadyCpuNodes = steadyUsed.nodes / steady;
    if (db) row.steadyCpuPg = steadyUsed.pg / steady;
    if (db && idle && before && steadyBefore) {
      const net = perDelivery(steadyBefore, await settledCounters(db, dbName), delta(idle, before), steady);
      row.steadyStatements = net('statements');
      row.steadyCommits = net('commits');
      row.steadyWalSyncs = net('walSyncs');
      row.steadyInserted = net('inserted');
      row.steadyUpdated = net('updated');
    }
    return row;
  } finally {
    await stopNodes(nodes);
    await db?.end().catch(() => {});
  }
}

// --- main ----------------------------------------------------------------------------------------
// pg_stat_statements counts the statements per delivery; it only observes (the commits still wait for their fsync).
const server = await startPostgres({ settings: { shared_preload_libraries: "'pg_stat_statements'" } });
const admin = new pg.Client({ connectionString: server.url });
admin.on('error', () => {});
await admin.connect();
process.stdout.write(
  `${server.version}, at its defaults (synchronous_commit=on) with pg_stat_statements; node ${process.version}; ${cpus().length} cores; ${ROUNDS} rounds; ` +
    `server.processes ${PROCESSES || 'default'} per node; per_endpoint_concurrency ${PER_ENDPOINT}; full speed: ${N} events in batches of ${BATCH}, ` +
    `${IN_FLIGHT} in flight per node; steady: ${RATE} single events/s for ${STEADY_SECONDS} s\n`,
);
const results: Record<string, Row[]> = Object.fromEntries(ENGINES.map((e) => [e, []]));
try {
  for (let round = 0; round < ROUNDS; round++) {
    for (const e of ENGINES) {
      const r = await measure(e, server, admin, round);
      results[e].push(r);
      process.stdout.write(`round ${round + 1} ${e}: ${Object.entries(r).map(([k, v]) => `${k}=${v.toFixed(Math.abs(v) < 10 ? 2 : 0)}`).join(' ')}\n`);
    }
  }
} finally {
  await admin.end().catch(() => {});
  server.stop();
  receiver.close();
}

const med = (e: string, k: string) => (results[e].length && k in results[e][0] ? median(results[e].map((r) => r[k])) : NaN);
const fmt = (n: number, d = 0) => (Number.isNaN(n) ? '-' : n.toFixed(d));
const label = (e: string) => (e === 'sqlite' ? 'sqlite' : `pg x${e.slice(2)}`);
// [label, key, decimals, scale, ratio to SQLite]
const lines: Array<[string, string, number, number, boolean]> = [
  ['full speed: durable deliveries/s', 'rate', 0, 1, true],
  ['  ingest alone, all 202s (events/s)', 'ingest', 0, 1, true],
  ['  ingest-to-receiver p50 (ms)', 'fullP50', 0, 1, true],
  ['  ingest-to-receiver p99 (ms)', 'fullP99', 0, 1, true],
  ['  CPU busy, all cores (%)', 'fullBusy', 0, 100, false],
  ['  CPU ms per delivery: nodes', 'cpuNodes', 2, 1, true],
  ['    PostgreSQL', 'cpuPg', 2, 1, false],
  ['    load generator + receiver', 'cpuSelf', 2, 1, true],
  [`steady ${RATE}/s: ingest-to-receiver p50 (ms)`, 'steadyP50', 1, 1, true],
  [`  p99 (ms), goal < ${GOAL_P99}`, 'steadyP99', 1, 1, true],
  ['  CPU busy, all cores (%)', 'steadyBusy', 0, 100, false],
  ['  CPU ms per delivery: nodes', 'steadyCpuNodes', 2, 1, true],
  ['    PostgreSQL', 'steadyCpuPg', 2, 1, false],
  ['per delivery on PostgreSQL, full speed (batches):', '', 0, 1, false],
  ['  statements', 'statements', 1, 1, false],
  ['  transactions (commits, read-only ones too)', 'commits', 2, 1, false],
  ['  WAL fsyncs', 'walSyncs', 2, 1, false],
  ['  rows inserted', 'inserted', 2, 1, false],
  ['  rows updated', 'updated', 2, 1, false],
  ['  WAL bytes', 'walBytes', 0, 1, false],
  [`per delivery on PostgreSQL, steady (single events):`, '', 0, 1, false],
  ['  statements', 'steadyStatements', 1, 1, false],
  ['  transactions (commits, read-only ones too)', 'steadyCommits', 2, 1, false],
  ['  WAL fsyncs', 'steadyWalSyncs', 2, 1, false],
  ['  rows inserted', 'steadyInserted', 2, 1, false],
  ['  rows updated', 'steadyUpdated', 2, 1, false],
  ['idle nodes: statements/s (taken off the above)', 'idleStatements', 1, 1, false],
];
const base = ENGINES.includes('sqlite') ? 'sqlite' : undefined;
const others = ENGINES.filter((e) => e !== 'sqlite');
process.stdout.write(`\nmedians of ${ROUNDS} rounds${' '.repeat(33)}${ENGINES.map((e) => label(e).padStart(9)).join('')}${base ? others.map((e) => `${label(e)}/sqlite`.padStart(14)).join('') : ''}\n`);
for (const [name, k, d, scale, ratio] of lines) {
  if (!k) {
    process.stdout.write(`${name}\n`);
    continue;
  }
  const vals = ENGINES.map((e) => med(e, k) * scale);
  const ratios = base && ratio ? others.map((e) => fmt(med(e, k) / med(base, k), 2).padStart(14)) : [];
  process.stdout.write(`${name.padEnd(48)}${vals.map((v) => fmt(v, d).padStart(9)).join('')}${ratios.join('')}\n`);
}
for (const e of ENGINES) {
  const p99 = med(e, 'steadyP99');
  process.stdout.write(
    `${label(e)}: steady p99 ${fmt(p99, 1)} ms, ${fmt(p99 / GOAL_P99, 2)} of the ${GOAL_P99} ms goal (${p99 < GOAL_P99 ? 'met' : 'NOT met'}); ` +
      `events not delivered within 10 s at the steady rate: ${results[e].reduce((a, r) => a + r.steadyLost, 0)}\n`,
  );
}
process.exit(0);
