/**
 * Durable deliveries with 1, 2 and 3 `switchyard serve` nodes on one PostgreSQL queue, against one
 * node on SQLite and against graphile-worker 0.18 (issue 29's PostgreSQL peer) on the same
 * PostgreSQL, in the same run.
 * Run: node_modules/.bin/node --no-node-snapshot scripts/bench/pg-nodes.ts
 *
 * Everything on this machine, nothing pinned by default (the nodes need both cores, and so does
 * PostgreSQL); BENCH_PIN pins every engine to the same CPUs (below):
 * - a throwaway PostgreSQL (test/helpers/postgres.ts) at its defaults, so every commit waits for
 *   its WAL fsync; a fresh database per round and engine;
 * - the nodes: the real command (src/main.ts serve) as a user starts it, each with its own data
 *   directory and `server.processes` BENCH_PROCESSES (0: the default, one per core), the same
 *   `store:` URL (none for SQLite) and admin token, a webhook installation made through the API;
 *   `webhooks.per_endpoint_concurrency` raised to BENCH_PER_ENDPOINT (32) so the cap does not set the pace;
 * - the peer (engines `gw` and `gwbatch`): one graphile-worker process (scripts/bench/graphile-peer.ts)
 *   whose task signs the event with Switchyard's scheme and POSTs it to the same receiver; events
 *   handed over by this process with `WorkerUtils.addJobs`, in the same batches. `gw`: its defaults
 *   (one job at a time). `gwbatch`: BENCH_GW_CONCURRENCY (BENCH_PER_ENDPOINT) jobs at once,
 *   `preset.worker.localQueue.size` BENCH_GW_LOCAL_QUEUE (100), `completeJobBatchDelay` and
 *   `failJobBatchDelay` BENCH_GW_BATCH_DELAY (250 ms, the starting point its docs suggest);
 * - the rows relay (engine `rows`, not in the default list): scripts/bench/pg-rows-relay.ts, a
 *   hand-written durable relay storing Switchyard's rows (its migrations' tables) with one statement
 *   a turn each way, handed events on its POST /api/v1/events like a node; the ratios to it say what
 *   the data model costs (against graphile-worker) and what the rest of Switchyard costs (pg x1);
 * - this process: the load generator and the receiver (answers 200 at once), so latency is read on
 *   one clock, from the start of the hand-over to the delivery's arrival.
 *
 * Per engine and round, after a warm-up of BENCH_WARM (3,000) events sent as in the full-speed phase:
 * 1. Full speed: BENCH_N (3,000) events in batches of BENCH_BATCH (100) on POST /api/v1/events
 *    (the peer: addJobs), BENCH_IN_FLIGHT (2) batches in flight per node, batches spread over the
 *    nodes. Durable deliveries/s from the first hand-over to the N-th arrival; hand-over-to-receiver
 *    p50/p99 per event (at full speed that is mostly the backlog's wait); hand-over alone (every 202
 *    answered, every addJobs resolved).
 *    On PostgreSQL, from pg_stat_database and pg_stat_wal before and after, each read once every
 *    backend has reported (PostgreSQL 15 holds an idle backend's counts up to 10 s), less what the
 *    idle nodes' once-a-second look for due work costs (measured before the warm-up): commits, WAL fsyncs,
 *    rows inserted, updated and deleted, WAL bytes, and statements (pg_stat_statements, loaded for
 *    the run) per delivery; CPU per delivery of the nodes (the peer's worker), PostgreSQL and this
 *    process (/proc).
 *    Event-loop delay p99 and max of the worst serving process (the peer's worker), read inside each
 *    by `monitorEventLoopDelay` from scripts/bench/loop-delay-probe.ts, which this benchmark
 *    preloads with NODE_OPTIONS (the product exposes no such figure; nothing of it is changed).
 * 2. Steady: single-event POSTs (addJobs of one), open loop at BENCH_RATE (100) events/s for
 *    BENCH_STEADY_SECONDS (8), spread over the nodes: hand-over-to-receiver p50/p99 against the
 *    delivery benchmark's goal (p99 < 25 ms, scripts/bench/delivery.ts).
 * CPU busy (of every core, /proc/stat) during each phase says whether the machine was the limit.
 * Medians of BENCH_ROUNDS (3) rounds; engines in BENCH_ENGINES (sqlite,pg1,pg2,pg3,gw,gwbatch; rows on request).
 * Printed after the table: issue 29's goals against the medians (PostgreSQL 1 node / graphile-worker
 * batched, ingest, PostgreSQL CPU and statements per delivery, event-loop delay), and what N nodes on
 * separate machines would carry (1, 2, 4, 8), from pg x1's CPU per delivery on a node and on
 * PostgreSQL, with BENCH_CAPACITY_CORES (this machine's count) cores per machine, formula printed.
 */
import { fork, spawn, type ChildProcess } from 'node:child_process';
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { once } from 'node:events';
import { pathToFileURL } from 'node:url';
import pg from 'pg';
import { makeWorkerUtils, type WorkerUtils } from 'graphile-worker';
import { samplePayload } from '../../src/events/index.ts';
import { ask, cpuMs, median, percentile, processTree as tree, servingUrl, setting } from './common.ts';
import { startPostgres, type PgServer } from '../../test/helpers/postgres.ts';

const N = setting('BENCH_N', 3000);
const WARM = setting('BENCH_WARM', 3000);
const BATCH = setting('BENCH_BATCH', 100);
const IN_FLIGHT = setting('BENCH_IN_FLIGHT', 2);
const RATE = setting('BENCH_RATE', 100);
const STEADY_SECONDS = setting('BENCH_STEADY_SECONDS', 8, false);
const ROUNDS = setting('BENCH_ROUNDS', 3);
const PER_ENDPOINT = setting('BENCH_PER_ENDPOINT', 32);
const PROCESSES = process.env.BENCH_PROCESSES === undefined ? 0 : Number(process.env.BENCH_PROCESSES);
const ENGINES = (process.env.BENCH_ENGINES ?? 'sqlite,pg1,pg2,pg3,gw,gwbatch').split(',').map((s) => s.trim());
const GW_CONCURRENCY = setting('BENCH_GW_CONCURRENCY', PER_ENDPOINT);
const GW_LOCAL_QUEUE = setting('BENCH_GW_LOCAL_QUEUE', 100);
const GW_BATCH_DELAY = setting('BENCH_GW_BATCH_DELAY', 250);
const CAPACITY_CORES = setting('BENCH_CAPACITY_CORES', cpus().length);
/**
 * BENCH_PIN (a taskset CPU list, e.g. `0`): every engine's processes (a node's supervisor and serving
 * processes, graphile-worker's worker, the rows relay) run on these CPUs alone, started under
 * `taskset -c` (inherited by their children), so each engine has the same cores; PostgreSQL and this
 * process are not pinned. A node sizes its serving processes by the CPUs it may run on: `0` gives it
 * one, still supervised. Unset: nothing pinned.
 */
const PIN = process.env.BENCH_PIN ?? '';
const GOAL_P99 = 25;
const GW_VERSION = (JSON.parse(readFileSync(new URL('../../node_modules/graphile-worker/package.json', import.meta.url), 'utf8')) as { version: string })
  .version;
const TOKEN = 'bench-token-0123456789';
const ROOT = new URL('../../', import.meta.url).pathname;

if (PIN && !/^[0-9]+([-,][0-9]+)*$/.test(PIN)) {
  process.stderr.write(`BENCH_PIN=${PIN}: a taskset CPU list (0, 0-1, 0,2), or unset\n`);
  process.exit(2);
}
/** `[file, args]` to start `node args` as an engine: under `taskset -c BENCH_PIN` when set (taskset execs node: the same pid). */
const engineCommand = (args: string[]): [string, string[]] => (PIN ? ['taskset', ['-c', PIN, process.execPath, ...args]] : [process.execPath, args]);
/** fork()'s options for an engine's process: the same, through execPath (fork keeps its IPC channel across taskset's exec). */
const engineFork = (): { execPath?: string; execArgv: string[] } =>
  PIN ? { execPath: 'taskset', execArgv: ['-c', PIN, process.execPath, '--no-node-snapshot'] } : { execArgv: ['--no-node-snapshot'] };

for (const e of ENGINES)
  if (!/^(sqlite|pg[1-9]|gw|gwbatch|rows)$/.test(e)) {
    process.stderr.write(`BENCH_ENGINES: ${e} is not sqlite, pg<nodes> (pg1, pg2, pg3), gw, gwbatch or rows\n`);
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
let repeats = 0;
let waiting: { n: number; resolve: () => void } | undefined;
const receiver = http.createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    // The event a delivery comes from (its own eventId is the delivery's).
    const source = String(JSON.parse(Buffer.concat(chunks).toString()).sourceEventId);
    const t0 = sentAt.get(source);
    if (t0 === undefined) {
      repeats++; // a repeat (none expected: nothing is killed here) or another phase's late arrival
      return;
    }
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
  repeats = 0;
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

/**
 * The environment of a process whose event-loop delay is measured: scripts/bench/loop-delay-probe.ts
 * preloaded (inherited by a supervisor's serving processes), reporting into `loopDir`.
 */
const probed = (loopDir: string): NodeJS.ProcessEnv => ({
  ...process.env,
  // BENCH_SERVE_NODE_OPTIONS reaches the probed processes alone, e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof`.
  NODE_OPTIONS:
    `${process.env.NODE_OPTIONS ?? ''} ${process.env.BENCH_SERVE_NODE_OPTIONS ?? ''} --import=${pathToFileURL(join(ROOT, 'scripts/bench/loop-delay-probe.ts')).href}`.trim(),
  BENCH_LOOP_DELAY_DIR: loopDir,
});
/** Opens the event-loop delay window `name` in every probed process (closes the one open), or closes it (''). */
const loopWindow = (loopDir: string, name: string) => writeFileSync(join(loopDir, 'window'), name);
/**
 * The p99 and max event-loop delay (ms) of the worst process over window `name`: serving processes
 * of a supervisor where there are some (not the supervisor), else every probed process.
 */
async function loopDelay(loopDir: string, name: string): Promise<{ p99: number; max: number }> {
  await sleep(300); // each process looks at the window every 50 ms
  const all = readdirSync(loopDir)
    .filter((f) => f.endsWith(`.${name}.json`))
    .map((f) => JSON.parse(readFileSync(join(loopDir, f), 'utf8')) as { serving: boolean; p99: number; max: number; samples: number });
  const serving = all.some((r) => r.serving) ? all.filter((r) => r.serving) : all;
  const worst = (k: 'p99' | 'max') => (serving.length ? Math.max(...serving.map((r) => r[k])) : NaN);
  return { p99: worst('p99'), max: worst('max') };
}

async function startNode(store: string | undefined, loopDir: string): Promise<Node> {
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
  const child = spawn(...engineCommand(['--no-node-snapshot', join(ROOT, 'src/main.ts'), 'serve', '--config', join(dir, 'config.yaml')]), {
    cwd: dir,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: probed(loopDir),
  });
  const url = await servingUrl(child);
  // Warnings and errors are worth seeing; the rest is drained so a full pipe never blocks the node.
  child.stdout!.on('data', (d: Buffer) => {
    for (const line of String(d).split('\n')) if (/"level":"(warn|error)"/.test(line)) process.stderr.write(`  node: ${line.slice(0, 400)}\n`);
  });
  for (let i = 0; ; i++) {
    const ok = await fetch(`${url}/readyz`).then(
      (r) => r.status === 200,
      () => false,
    );
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
      if (n.dir) rmSync(n.dir, { recursive: true, force: true });
    }),
  );
}

function post(node: Node, body: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve) => {
    const req = http.request(
      `${node.url}/api/v1/events`,
      {
        method: 'POST',
        agent: node.agent,
        headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
      },
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
/** The PostgreSQL server's processes (its postmaster and every child), from its data directory's postmaster.pid. */
const postgresPids = (server: PgServer) => {
  try {
    return tree(Number(readFileSync(join(server.dir, 'data', 'postmaster.pid'), 'utf8').split('\n')[0]));
  } catch {
    return [];
  }
};

/** CPU used so far, per pid, by the nodes (`roots` and their children), PostgreSQL and this process; and every core's busy and total jiffies (/proc/stat). */
function cpuSnapshot(roots: number[], server: PgServer) {
  const per = (pids: number[]) => new Map(pids.map((p) => [p, cpuMs(p)]));
  const f = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
  const total = f.reduce((a, b) => a + b, 0);
  return { nodes: per(roots.flatMap((pid) => tree(pid))), pg: per(postgresPids(server)), self: cpuMs(process.pid)!, busy: total - f[3] - (f[4] ?? 0), total };
}
type CpuSnapshot = ReturnType<typeof cpuSnapshot>;
/**
 * CPU ms used between two snapshots by the processes alive at the second: all of it for those
 * started in between (a pool's connections opened under load are PostgreSQL backends started
 * then); what a process that ended in between used is lost. The share of all cores busy.
 */
function cpuUsed(a: CpuSnapshot, b: CpuSnapshot) {
  const sum = (x: Map<number, number | undefined>, y: Map<number, number | undefined>) => {
    let ms = 0;
    for (const [pid, v] of y) if (v !== undefined) ms += v - (x.get(pid) ?? 0);
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

/**
 * Where a round's counters are read: the cluster-wide views and pg_stat_statements from `admin`
 * (another database, so these reads are not counted), the rows of the product's tables from `db`
 * (pg_stat_user_tables is per database; autovacuum's ANALYZE writes catalog rows too, so not
 * pg_stat_database's). Each read on `db` is one commit there: `reads` counts them, to take off.
 */
interface Watch {
  admin: pg.Client;
  db: pg.Client;
  name: string;
  reads: number;
}

async function pgCounters(w: Watch): Promise<PgCounters> {
  // Each statement is its own transaction, so each reads the counts as last reported (backends report at most once a second).
  const d = (
    await w.admin.query('SELECT (SELECT xact_commit FROM pg_stat_database WHERE datname = $1) AS commits, wal_sync, wal_bytes FROM pg_stat_wal', [w.name])
  ).rows[0];
  const ownCommits = w.reads++;
  const t = (await w.db.query('SELECT sum(n_tup_ins) AS ins, sum(n_tup_upd) AS upd, sum(n_tup_del) AS del FROM pg_stat_user_tables')).rows[0];
  const statements = await w.admin
    .query(
      `SELECT sum(calls) AS n FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = $1) AND query NOT LIKE '%pg_stat_user_tables%'`,
      [w.name],
    )
    .then(
      (r) => Number(r.rows[0].n ?? 0),
      () => NaN,
    );
  return {
    statements,
    commits: Number(d.commits) - ownCommits,
    inserted: Number(t.ins),
    updated: Number(t.upd),
    deleted: Number(t.del),
    walSyncs: Number(d.wal_sync),
    walBytes: Number(d.wal_bytes),
    at: performance.now(),
  };
}
/**
 * How late PostgreSQL 15 may report a backend's counts: at most once a second while it works, and a
 * backend that goes idle within a second of its last report holds the rest for up to 10 s
 * (PGSTAT_IDLE_INTERVAL). A pool of many connections (graphile-worker's) leaves most of them idle.
 */
const STATS_LAG_MS = 11_000;
/** How long idle nodes are watched for what they cost without work. */
const IDLE_WINDOW_MS = 5_000;
/** The counters once every backend has reported (STATS_LAG_MS) and the rows written stop changing. */
async function settledCounters(w: Watch): Promise<PgCounters> {
  await sleep(STATS_LAG_MS);
  let last = await pgCounters(w);
  for (let waited = 0; waited < 12_000; waited += 1_000) {
    await sleep(1_000);
    const now = await pgCounters(w);
    const settled = now.inserted === last.inserted && now.updated === last.updated && now.deleted === last.deleted;
    last = now;
    if (settled) break;
  }
  return last;
}
/**
 * With BENCH_PG_STATEMENTS: the statements that took the most of PostgreSQL's time in the round so
 * far (warm-up and idle looks included; pg_stat_statements' execution time, which is CPU here: the
 * data is in memory), per delivery of the full-speed phase.
 */
async function statementsTop(w: Watch, engine: string, deliveries: number): Promise<void> {
  const rows = (
    await w.admin.query(
      `SELECT calls, rows, total_exec_time AS ms, left(regexp_replace(query, '\\s+', ' ', 'g'), 150) AS q FROM pg_stat_statements
       WHERE dbid = (SELECT oid FROM pg_database WHERE datname = $1) ORDER BY total_exec_time DESC LIMIT 10`,
      [w.name],
    )
  ).rows as Array<{ calls: string; rows: string; ms: number; q: string }>;
  process.stderr.write(`  ${engine}: PostgreSQL's time by statement (us per delivery, calls, rows):\n`);
  for (const r of rows)
    process.stderr.write(`    ${((r.ms * 1000) / deliveries).toFixed(1).padStart(7)} ${String(r.calls).padStart(6)} ${String(r.rows).padStart(7)}  ${r.q}\n`);
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

/**
 * What delivers in a round: Switchyard nodes, or the graphile-worker peer. `handOver` gives it
 * events (`body`: their JSON, made before the clock starts) through its `way`-th entrance (a node;
 * the peer has one: addJobs from this process) and resolves with undefined once they are
 * accepted, else with why not.
 */
interface Deliverer {
  ways: number;
  /** The processes (each with its children) whose CPU is the delivering side's. */
  roots(): number[];
  handOver(way: number, events: BenchEvent[], body: string): Promise<string | undefined>;
  stop(): Promise<void>;
}
type BenchEvent = ReturnType<typeof samplePayload>;

async function startSwitchyard(engine: string, store: string | undefined, loopDir: string, event: () => BenchEvent): Promise<Deliverer> {
  const count = engine === 'sqlite' ? 1 : Number(engine.slice(2));
  const nodes: Node[] = [];
  try {
    for (let i = 0; i < count; i++) nodes.push(await startNode(store, loopDir));
    await api(nodes[0], 'POST', '/api/v1/installations', { integration: 'webhook', configuration: { webhook_url: hook, event_types: 'site_view' } });
    // Every node fans out to the installation (the others learn it from the store).
    for (const node of nodes)
      for (let tries = 0; ; tries++) {
        const r = await post(node, JSON.stringify(event()));
        if (r.status === 202 && JSON.parse(r.text).deliveries.length === 1) break;
        if (tries > 100) throw new Error(`${engine}: node ${node.url} does not see the installation: ${r.status} ${r.text}`);
        await sleep(100);
      }
  } catch (e) {
    await stopNodes(nodes);
    throw e;
  }
  return {
    ways: nodes.length,
    roots: () => nodes.map((n) => n.child.pid!),
    handOver: async (way, _events, body) => {
      const r = await post(nodes[way], body);
      return r.status === 202 ? undefined : `${r.status} ${r.text.slice(0, 200)}`;
    },
    stop: () => stopNodes(nodes),
  };
}

async function startGraphile(engine: string, connectionString: string, loopDir: string): Promise<Deliverer> {
  const utils: WorkerUtils = await makeWorkerUtils({ connectionString });
  let peer: ChildProcess | undefined;
  try {
    await utils.migrate();
    const options = {
      connectionString,
      target: hook,
      batched: engine === 'gwbatch',
      concurrency: GW_CONCURRENCY,
      localQueue: GW_LOCAL_QUEUE,
      batchDelay: GW_BATCH_DELAY,
    };
    peer = fork(join(ROOT, 'scripts/bench/graphile-peer.ts'), [JSON.stringify(options)], {
      ...engineFork(),
      stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
      env: probed(loopDir),
    });
    alive.add(peer);
    peer.once('exit', () => alive.delete(peer!));
    const exited = once(peer, 'exit').then(([code]) => {
      throw new Error(`${engine}: the graphile-worker process exited with ${code} before it was ready`);
    });
    await Promise.race([ask(peer, undefined, 'ready'), exited]);
    exited.catch(() => {});
  } catch (e) {
    peer?.kill('SIGKILL');
    await utils.release();
    throw e;
  }
  const worker = peer;
  return {
    ways: 1,
    roots: () => [worker.pid!],
    handOver: (_way, events) =>
      utils.addJobs(events.map((payload) => ({ identifier: 'deliver', payload }))).then(
        () => undefined,
        (e: Error) => e.message,
      ),
    stop: async () => {
      // Gracefully: batched completions are written before it exits.
      if (worker.exitCode === null) {
        const exited = once(worker, 'exit');
        await Promise.race([ask(worker, { stop: true }, 'stopped'), exited, sleep(10_000)]);
        worker.kill('SIGKILL');
      }
      await utils.release();
    },
  };
}

/** The rows relay (scripts/bench/pg-rows-relay.ts): events handed over on its POST /api/v1/events, as to a node. */
async function startRowsRelay(connectionString: string, loopDir: string): Promise<Deliverer> {
  const relay = fork(
    join(ROOT, 'scripts/bench/pg-rows-relay.ts'),
    [JSON.stringify({ connectionString, target: hook, concurrency: PER_ENDPOINT, token: TOKEN })],
    { ...engineFork(), stdio: ['ignore', 'ignore', 'inherit', 'ipc'], env: probed(loopDir) },
  );
  alive.add(relay);
  relay.once('exit', () => alive.delete(relay));
  const exited = once(relay, 'exit').then(([code]) => {
    throw new Error(`rows: the relay exited with ${code} before it listened`);
  });
  let port: number;
  try {
    port = ((await Promise.race([ask(relay, undefined, 'port'), exited])) as { port: number }).port;
  } catch (e) {
    relay.kill('SIGKILL');
    throw e;
  } finally {
    exited.catch(() => {});
  }
  const node: Node = { url: `http://127.0.0.1:${port}`, child: relay, dir: '', agent: new http.Agent({ keepAlive: true, maxSockets: 64 }) };
  return {
    ways: 1,
    roots: () => [relay.pid!],
    handOver: async (_way, _events, body) => {
      const r = await post(node, body);
      return r.status === 202 ? undefined : `${r.status} ${r.text.slice(0, 200)}`;
    },
    stop: () => stopNodes([node]),
  };
}

async function measure(engine: string, server: PgServer, admin: pg.Client, round: number): Promise<Row> {
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
  }
  const watch: Watch | undefined = db && { admin, db, name: dbName, reads: 0 };
  const loopDir = mkdtempSync(join(tmpdir(), 'switchyard-bench-loop-'));
  const run = `${(runId++).toString(36)}_${Date.now().toString(36)}`;
  let n = 0;
  const event = () => samplePayload('site_view', { eventId: `evt_${run}_${++n}` });
  const peer = engine.startsWith('gw');
  let target: Deliverer | undefined;
  try {
    target = peer
      ? await startGraphile(engine, store!, loopDir)
      : engine === 'rows'
        ? await startRowsRelay(store!, loopDir)
        : await startSwitchyard(engine, store, loopDir, event);
    const deliverer = target;
    const ways = deliverer.ways;

    // What the idle nodes cost (each process looks for due work every second; the peer polls every
    // 2 s), to take off the figures: before the warm-up, whose dead rows autovacuum may clean up at
    // any time in the next minute (that work is counted in the phases; here it would be taken off them).
    let idle: PgCounters | undefined;
    let idleEnd: PgCounters | undefined;
    if (watch) {
      await sleep(STATS_LAG_MS);
      idle = await pgCounters(watch);
      await sleep(IDLE_WINDOW_MS);
      idleEnd = await pgCounters(watch);
    }

    // Warm-up: BENCH_WARM events the way the full-speed phase sends them, so that phase measures
    // processes whose code the JIT has compiled (a node serves for hours; 300 events in one go left
    // Switchyard's ingest and sender mostly unoptimised: its CPU per delivery fell by a third over a
    // longer run, graphile-worker's by a tenth).
    reset();
    {
      const warm = Array.from({ length: Math.ceil(WARM / BATCH) }, () => Array.from({ length: BATCH }, event));
      let w = 0;
      const lane = async (way: number) => {
        while (w < warm.length) {
          const batch = warm[w++];
          const at = performance.now();
          for (const e of batch) sentAt.set(e.eventId as string, at);
          await deliverer.handOver(way, batch, JSON.stringify(batch));
        }
      };
      await Promise.all(Array.from({ length: ways * IN_FLIGHT }, (_, i) => lane(i % ways)));
      await arrivals(warm.length * BATCH, 60_000);
    }

    // 1. Full speed.
    reset();
    const batches = Array.from({ length: Math.ceil(N / BATCH) }, () => Array.from({ length: BATCH }, event));
    const bodies = batches.map((b) => JSON.stringify(b));
    const total = batches.length * BATCH;
    // Once the warm-up's counts have reached pg_stat_database (STATS_LAG_MS).
    const before = watch ? (await sleep(STATS_LAG_MS), await pgCounters(watch)) : undefined;
    loopWindow(loopDir, `full${round}`);
    const cpu0 = cpuSnapshot(deliverer.roots(), server);
    const t0 = performance.now();
    let next = 0;
    let refused = 0;
    const lane = async (way: number) => {
      while (next < bodies.length) {
        const i = next++;
        const at = performance.now();
        for (const e of batches[i]) sentAt.set(e.eventId as string, at);
        const why = await deliverer.handOver(way, batches[i], bodies[i]);
        if (why !== undefined) {
          refused++;
          process.stderr.write(`  ${engine}: a batch was refused: ${why}\n`);
        }
      }
    };
    await Promise.all(Array.from({ length: ways * IN_FLIGHT }, (_, i) => lane(i % ways)));
    const ackedMs = performance.now() - t0;
    await arrivals(total, 180_000);
    const cpu1 = cpuSnapshot(deliverer.roots(), server);
    loopWindow(loopDir, '');
    if (arrived < total || refused) {
      // Say what the store holds for what did not arrive: its deliveries' states, leases and attempts.
      if (watch) {
        const missing = [...sentAt.keys()]; // arrivals leave it
        const rows = (
          await watch.db.query(
            `SELECT status, attempts, lease_owner IS NOT NULL AS leased, lease_until - $2::bigint AS lease_left_ms, next_attempt_at - $2::bigint AS due_in_ms,
               count(*)::int AS n FROM webhook_deliveries WHERE event_id = ANY($1) GROUP BY 1, 2, 3, 4, 5 ORDER BY n DESC LIMIT 20`,
            [missing, Date.now()],
          )
        ).rows;
        const events = (await watch.db.query('SELECT count(*)::int AS n FROM events WHERE id = ANY($1)', [missing])).rows[0].n;
        process.stderr.write(`  ${engine}: ${missing.length} not arrived; ${events} of them stored as events; their deliveries: ${JSON.stringify(rows)}\n`);
      }
      throw new Error(`${engine}: ${arrived} of ${total} delivered, ${refused} batches refused`);
    }
    const fullMs = lastArrival - t0;
    const full = [...latencies].sort((a, b) => a - b);
    const used = cpuUsed(cpu0, cpu1);
    const fullLoop = await loopDelay(loopDir, `full${round}`);
    const row: Row = {
      rate: (total / fullMs) * 1000,
      ingest: (total / ackedMs) * 1000,
      fullP50: percentile(full, 50),
      fullP99: percentile(full, 99),
      fullBusy: used.busy,
      cpuNodes: used.nodes / total,
      cpuSelf: used.self / total,
      loopP99: fullLoop.p99,
      loopMax: fullLoop.max,
      repeats,
    };
    if (db) row.cpuPg = used.pg / total;
    if (watch && idle && idleEnd && before) {
      const after = await settledCounters(watch);
      if (process.env.BENCH_PG_STATEMENTS) await statementsTop(watch, engine, total);
      const idleRate = delta(idle, idleEnd);
      const net = perDelivery(before, after, idleRate, total);
      row.statements = net('statements');
      row.commits = net('commits');
      row.walSyncs = net('walSyncs');
      row.inserted = net('inserted');
      row.updated = net('updated');
      row.deleted = net('deleted');
      row.walBytes = net('walBytes');
      row.idleStatements = (idleRate.statements / idleRate.at) * 1000;
    }
    const steadyBefore = watch ? await pgCounters(watch) : undefined;

    // 2. Steady rate, single events, open loop.
    reset();
    const steady = Math.round(RATE * STEADY_SECONDS);
    loopWindow(loopDir, `steady${round}`);
    const cpu2 = cpuSnapshot(deliverer.roots(), server);
    const start = performance.now();
    const sends: Promise<unknown>[] = [];
    for (let i = 0; i < steady; i++) {
      const wait = start + (i * 1000) / RATE - performance.now();
      if (wait > 1) await sleep(wait);
      const e = event();
      const body = JSON.stringify(e);
      sentAt.set(e.eventId as string, performance.now());
      sends.push(deliverer.handOver(i % ways, [e], body));
    }
    await Promise.all(sends);
    await arrivals(steady, 10_000);
    const steadyUsed = cpuUsed(cpu2, cpuSnapshot(deliverer.roots(), server));
    loopWindow(loopDir, '');
    const lat = [...latencies].sort((a, b) => a - b);
    row.steadyP50 = percentile(lat, 50);
    row.steadyP99 = percentile(lat, 99);
    row.steadyLost = steady - arrived;
    row.steadyBusy = steadyUsed.busy;
    row.steadyCpuNodes = steadyUsed.nodes / steady;
    row.steadyLoopP99 = (await loopDelay(loopDir, `steady${round}`)).p99;
    if (db) row.steadyCpuPg = steadyUsed.pg / steady;
    if (watch && idle && idleEnd && steadyBefore) {
      const net = perDelivery(steadyBefore, await settledCounters(watch), delta(idle, idleEnd), steady);
      row.steadyStatements = net('statements');
      row.steadyCommits = net('commits');
      row.steadyWalSyncs = net('walSyncs');
      row.steadyInserted = net('inserted');
      row.steadyUpdated = net('updated');
      row.steadyDeleted = net('deleted');
    }
    return row;
  } finally {
    await target?.stop();
    await db?.end().catch(() => {});
    rmSync(loopDir, { recursive: true, force: true });
  }
}

// --- main ----------------------------------------------------------------------------------------
// pg_stat_statements counts the statements per delivery; it only observes (the commits still wait for their fsync).
const server = await startPostgres({ settings: { shared_preload_libraries: "'pg_stat_statements'" } });
const admin = new pg.Client({ connectionString: server.url });
admin.on('error', () => {});
await admin.connect();
// Statements per delivery, where the server has pg_stat_statements loaded (read from this database: see Watch).
await admin.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements').catch(() => {});
process.stdout.write(
  `${server.version}, at its defaults (synchronous_commit=on) with pg_stat_statements; node ${process.version}; ${cpus().length} cores; ${PIN ? `every engine pinned to CPU ${PIN} (taskset)` : 'nothing pinned'}; ${ROUNDS} rounds; ` +
    `server.processes ${PROCESSES || 'default'} per node; per_endpoint_concurrency ${PER_ENDPOINT}; full speed: ${N} events in batches of ${BATCH}, ` +
    `${IN_FLIGHT} in flight per node; steady: ${RATE} single events/s for ${STEADY_SECONDS} s; graphile-worker ${GW_VERSION}: batched = concurrency ${GW_CONCURRENCY}, ` +
    `localQueue.size ${GW_LOCAL_QUEUE}, completeJobBatchDelay = failJobBatchDelay = ${GW_BATCH_DELAY} ms, defaults = none of these (concurrency 1)\n`,
);
const results: Record<string, Row[]> = Object.fromEntries(ENGINES.map((e) => [e, []]));
try {
  for (let round = 0; round < ROUNDS; round++) {
    for (const e of ENGINES) {
      const r = await measure(e, server, admin, round);
      results[e].push(r);
      process.stdout.write(
        `round ${round + 1} ${e}: ${Object.entries(r)
          .map(([k, v]) => `${k}=${v.toFixed(Math.abs(v) < 10 ? 2 : 0)}`)
          .join(' ')}\n`,
      );
    }
  }
} finally {
  await admin.end().catch(() => {});
  server.stop();
  receiver.close();
}

const med = (e: string, k: string) => (results[e].length && k in results[e][0] ? median(results[e].map((r) => r[k])) : NaN);
const fmt = (n: number, d = 0) => (Number.isNaN(n) ? '-' : n.toFixed(d));
const label = (e: string) =>
  e === 'sqlite' ? 'sqlite' : e === 'gw' ? 'gw dflt' : e === 'gwbatch' ? 'gw batch' : e === 'rows' ? 'rows rly' : `pg x${e.slice(2)}`;
// [label, key, decimals, scale, ratio to SQLite]
const lines: Array<[string, string, number, number, boolean]> = [
  ['full speed: durable deliveries/s', 'rate', 0, 1, true],
  ['  hand-over alone, all accepted (events/s)', 'ingest', 0, 1, true],
  ['  hand-over-to-receiver p50 (ms)', 'fullP50', 0, 1, true],
  ['  hand-over-to-receiver p99 (ms)', 'fullP99', 0, 1, true],
  ['  CPU busy, all cores (%)', 'fullBusy', 0, 100, false],
  ['  CPU ms per delivery: nodes (peer: worker)', 'cpuNodes', 2, 1, true],
  ['    PostgreSQL', 'cpuPg', 3, 1, false],
  ['    load generator + receiver', 'cpuSelf', 2, 1, true],
  ['  event-loop delay p99, worst serving process (ms)', 'loopP99', 1, 1, true],
  ['  event-loop delay max, worst serving process (ms)', 'loopMax', 0, 1, true],
  [`steady ${RATE}/s: hand-over-to-receiver p50 (ms)`, 'steadyP50', 1, 1, true],
  [`  p99 (ms), goal < ${GOAL_P99}`, 'steadyP99', 1, 1, true],
  ['  CPU busy, all cores (%)', 'steadyBusy', 0, 100, false],
  ['  CPU ms per delivery: nodes (peer: worker)', 'steadyCpuNodes', 2, 1, true],
  ['    PostgreSQL', 'steadyCpuPg', 2, 1, false],
  ['  event-loop delay p99, worst serving process (ms)', 'steadyLoopP99', 1, 1, true],
  ['per delivery on PostgreSQL, full speed (batches):', '', 0, 1, false],
  ['  statements', 'statements', 2, 1, false],
  ['  transactions (commits, read-only ones too)', 'commits', 2, 1, false],
  ['  WAL fsyncs', 'walSyncs', 2, 1, false],
  ['  rows inserted', 'inserted', 2, 1, false],
  ['  rows updated', 'updated', 2, 1, false],
  ['  rows deleted', 'deleted', 2, 1, false],
  ['  WAL bytes', 'walBytes', 0, 1, false],
  [`per delivery on PostgreSQL, steady (single events):`, '', 0, 1, false],
  ['  statements', 'steadyStatements', 2, 1, false],
  ['  transactions (commits, read-only ones too)', 'steadyCommits', 2, 1, false],
  ['  WAL fsyncs', 'steadyWalSyncs', 2, 1, false],
  ['  rows inserted', 'steadyInserted', 2, 1, false],
  ['  rows updated', 'steadyUpdated', 2, 1, false],
  ['  rows deleted', 'steadyDeleted', 2, 1, false],
  ['idle nodes: statements/s (taken off the above)', 'idleStatements', 1, 1, false],
];
const base = ENGINES.includes('sqlite') ? 'sqlite' : undefined;
const others = ENGINES.filter((e) => e !== 'sqlite');
const W = 52;
process.stdout.write(
  `\nmedians of ${ROUNDS} rounds${' '.repeat(W - 19)}${ENGINES.map((e) => label(e).padStart(10)).join('')}${base ? others.map((e) => `${label(e)}/sqlite`.padStart(16)).join('') : ''}\n`,
);
for (const [name, k, d, scale, ratio] of lines) {
  if (!k) {
    process.stdout.write(`${name}\n`);
    continue;
  }
  const vals = ENGINES.map((e) => med(e, k) * scale);
  const ratios = base && ratio ? others.map((e) => fmt(med(e, k) / med(base, k), 2).padStart(16)) : [];
  process.stdout.write(`${name.padEnd(W)}${vals.map((v) => fmt(v, d).padStart(10)).join('')}${ratios.join('')}\n`);
}
process.stdout.write(
  `(event-loop delay: read inside each serving process by perf_hooks.monitorEventLoopDelay at 10 ms resolution, less the resolution, by\n` +
    ` scripts/bench/loop-delay-probe.ts, which this benchmark preloads; the product exposes no such figure. The peer's row is its worker process.)\n\n`,
);
for (const e of ENGINES) {
  const p99 = med(e, 'steadyP99');
  process.stdout.write(
    `${label(e)}: steady p99 ${fmt(p99, 1)} ms, ${fmt(p99 / GOAL_P99, 2)} of the ${GOAL_P99} ms goal (${p99 < GOAL_P99 ? 'met' : 'NOT met'}); ` +
      `events not delivered within 10 s at the steady rate: ${results[e].reduce((a, r) => a + r.steadyLost, 0)}\n`,
  );
}

// Issue 29's goals, against the medians above.
const goal = (ok: boolean) => (ok ? 'met' : 'NOT met');
const has = (e: string) => ENGINES.includes(e);
process.stdout.write('\ngoals (issue 29), medians of this run:\n');
if (has('pg1') && has('gwbatch')) {
  const r = med('pg1', 'rate') / med('gwbatch', 'rate');
  process.stdout.write(
    `  PostgreSQL 1 node / graphile-worker batched, deliveries/s: ${fmt(med('pg1', 'rate'))} / ${fmt(med('gwbatch', 'rate'))} = ${fmt(r, 2)}x (goal >= 1.0x: ${goal(r >= 1)})` +
      (has('gw') ? `; / graphile-worker at its defaults (${fmt(med('gw', 'rate'))}): ${fmt(med('pg1', 'rate') / med('gw', 'rate'), 2)}x` : '') +
      '\n',
  );
}
if (has('rows')) {
  // The rows relay (scripts/bench/pg-rows-relay.ts): the data model's floor on PostgreSQL, by hand.
  const ratio = (a: string, b: string, k: string) => `${fmt(med(a, k) / med(b, k), 2)}`;
  const line = (what: string, a: string, b: string) =>
    `  ${what}: deliveries/s ${ratio(a, b, 'rate')}x; node CPU per delivery ${fmt(med(a, 'cpuNodes'), 3)} / ${fmt(med(b, 'cpuNodes'), 3)} ms = ${ratio(a, b, 'cpuNodes')}x; ` +
    `PostgreSQL CPU per delivery ${fmt(med(a, 'cpuPg'), 3)} / ${fmt(med(b, 'cpuPg'), 3)} ms = ${ratio(a, b, 'cpuPg')}x\n`;
  if (has('gwbatch'))
    process.stdout.write(line("rows relay / graphile-worker batched (what storing Switchyard's rows costs a hand-written sender)", 'rows', 'gwbatch'));
  if (has('pg1')) process.stdout.write(line('PostgreSQL 1 node / rows relay (what the rest of Switchyard costs)', 'pg1', 'rows'));
}
if (has('pg1')) {
  const ingest = med('pg1', 'ingest');
  const cpuPg = med('pg1', 'cpuPg');
  const st = med('pg1', 'statements');
  const st1 = med('pg1', 'steadyStatements');
  const loop = med('pg1', 'loopP99');
  const peer = (k: string, d: number) => (has('gwbatch') ? ` (graphile-worker batched: ${fmt(med('gwbatch', k), d)})` : '');
  process.stdout.write(
    `  PostgreSQL 1 node, ingest of batches of ${BATCH} through the HTTP API: ${fmt(ingest)} events/s stored (goal >= 10,000: ${goal(ingest >= 10_000)})${peer('ingest', 0)}\n` +
      `  PostgreSQL CPU per delivery in batches: ${fmt(cpuPg, 3)} ms (goal <= 0.25: ${goal(cpuPg <= 0.25)})${peer('cpuPg', 3)}\n` +
      `  statements per delivery in batches: ${fmt(st, 2)} (goal <= 2: ${goal(st <= 2)})${peer('statements', 2)}; single events: ${fmt(st1, 2)} (goal <= 5: ${goal(st1 <= 5)})${peer('steadyStatements', 2)}\n` +
      `  commits and WAL bytes per delivery in batches: ${fmt(med('pg1', 'commits'), 2)}, ${fmt(med('pg1', 'walBytes'))}` +
      (has('gwbatch') ? ` (graphile-worker batched: ${fmt(med('gwbatch', 'commits'), 2)}, ${fmt(med('gwbatch', 'walBytes'))})` : '') +
      '\n' +
      `  event-loop delay p99 of a serving process at full speed (worst of them, monitorEventLoopDelay read inside by this benchmark's probe): ` +
      `${fmt(loop, 1)} ms (goal <= 10: ${goal(loop <= 10)})\n`,
  );

  // What N nodes on separate machines would carry, if CPU were all that limits and it scaled linearly.
  const node = med('pg1', 'cpuNodes');
  const nodeCap = (CAPACITY_CORES * 1000) / node;
  const pgCap = (CAPACITY_CORES * 1000) / cpuPg;
  process.stdout.write(
    `\nN nodes on separate machines, from pg x1 at full speed (batches of ${BATCH}), ${CAPACITY_CORES} cores per machine (BENCH_CAPACITY_CORES):\n` +
      `  capacity(N) = min(N x cores x 1000 / node CPU ms per delivery, cores x 1000 / PostgreSQL CPU ms per delivery)\n` +
      `              = min(N x ${CAPACITY_CORES} x 1000 / ${fmt(node, 3)}, ${CAPACITY_CORES} x 1000 / ${fmt(cpuPg, 3)}) = min(N x ${fmt(nodeCap)}, ${fmt(pgCap)}) deliveries/s\n`,
  );
  for (const count of [1, 2, 4, 8]) {
    const cap = Math.min(count * nodeCap, pgCap);
    process.stdout.write(
      `  ${String(count).padStart(2)} node${count > 1 ? 's' : ' '}: ${fmt(cap).padStart(8)} deliveries/s (${count * nodeCap <= pgCap ? 'the nodes limit' : 'PostgreSQL limits'})\n`,
    );
  }
  process.stdout.write(
    '  (every core busy with deliveries alone: no load generator, no headroom; the disk, the network and lock waits not counted; ' +
      "node CPU is all of a node's processes, measured with the load generator and PostgreSQL on the same cores)\n",
  );
}
process.exit(0);
