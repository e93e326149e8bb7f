/**
 * Data-plane benchmark against workerd, on the path a user takes. Run:
 *
 *   node_modules/.bin/node --no-node-snapshot scripts/bench/dataplane.ts
 *
 * Settings (environment): BENCH_SECONDS (per wrk run, default 5), BENCH_ROUNDS (default 3),
 * BENCH_CONNECTIONS (wrk -c, default 32), BENCH_WARMUP (seconds of wrk per server before the
 * rounds, default 2), BENCH_TWO_CORE (auto: the two-core run only when `serve --help` mentions
 * --processes; 1: always, without --processes when the CLI lacks it; 0: never), BENCH_BUSY_RETRIES
 * (default 2: a measure during which other processes took more than 10% of the CPU is taken again
 * up to this many times, the least disturbed kept; 0: never).
 * Needs `wrk` and `taskset` on PATH, Node 24 (the repo's node_modules/.bin/node) and 2 CPUs.
 *
 * Every server is a separate process pinned to CPU 0 (`taskset -c 0`, inherited by its children:
 * Switchyard's sandbox worker shares that core); wrk runs pinned to CPU 1
 * (`taskset -c 1 wrk -t1 -c32 -d<SECONDS>s --latency URL`). The servers:
 *   a. node:http answering "hello" (a tiny script written to a temp dir);
 *   b. workerd running `export default { fetch() { return new Response('hello') } }` (a capnp
 *      config in a temp dir; workerd serves on one event-loop thread, there is no thread setting);
 *   b2. edge-runtime (devDependency) running the same hello as a fetch event listener, on its own
 *      runServer (Node's HTTP server, the handler in a Node vm context, no isolation);
 *   b3. a hand-written isolate server, the simplest honest peer of the public endpoint on this stack:
 *      node:http, one isolated-vm isolate called inline per request (the request in as JSON, the
 *      answer copied out; no time limit on the call, so a floor), a record per request committed
 *      to SQLite every 10 ms (WAL, synchronous=NORMAL); run as a serving process is
 *      (--no-node-snapshot --v8-pool-size=1, allocation-site pretenuring off);
 *   c. Switchyard as a user starts it: `node --no-node-snapshot src/main.ts serve --config
 *      <tmp>/config.yaml` (temp data_dir, an integrations folder holding a hello integration that
 *      answers the same "hello"), the installation made with `switchyard install hello --json`,
 *      load on that installation's public endpoint. With `--processes 1` when `serve` accepts it,
 *      and again with the default configuration (its serving processes on the same core);
 *   d. Switchyard's `GET /healthz` and an authenticated `POST /api/v1/events` (a wrk Lua script:
 *      `Authorization: Bearer <admin token>`, a small space_content_updated event, each one stored),
 *      each against a plain h3 handler (h3 + srvx FastResponse on node:http, as the server
 *      answers) in its own process: a GET hello, and a POST that parses the same JSON body and
 *      answers 202.
 * Two cores, when supported (see BENCH_TWO_CORE): a second Switchyard started unpinned with the
 * default number of processes, loaded by wrk unpinned too with the same -t1 -c32, so wrk takes
 * its share of the same two cores (as a client on the same machine would); printed as the ratio
 * of its public-endpoint req/s to the one-core figure.
 *
 * All servers run side by side (idle ones cost nothing); each round measures every server once,
 * in reversed order every other round, and medians over ROUNDS are printed: req/s, p50, p99, the
 * CPU each request cost in each process of the server (from /proc, utime + stime), and "others":
 * the share of CPU 0 (both CPUs, less wrk, in the two-core run) that other processes took meanwhile.
 * On a shared machine that share disturbs req/s much more than CPU per request, so each ratio is
 * also printed from CPU per request.
 * Then, at half of each server's median req/s, an open-loop load pinned to CPU 1 (http-load.ts
 * runPaced: latency from each request's planned time) for node:http, workerd, edge-runtime and
 * Switchyard (`--processes 1`, and the default configuration on the core: its serving process runs
 * with V8's pool of one background thread, process/fork.ts, which `node src/main.ts serve
 * --processes 1` does not get unless given), each server's CPU per request at that rate (against its
 * CPU per request at the peak) and the share of the core that makes (its headroom: a stall drains
 * in about its length times busy / (1 - busy)), and the stalls a thread that only spins sees on
 * CPU 0 meanwhile (this VM's own).
 * Goals (issue 31): Switchyard public endpoint / edge-runtime >= 1.0 and / workerd >= 0.65, with
 * --processes 1 and with the default configuration; two cores / one core >= 1.7 (1.6 before);
 * p99 at half the peak <= 5 ms.
 * Informational: healthz / plain h3 GET, events POST / plain h3 GET (and / plain h3 POST).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { closeSync, mkdirSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import { availableParallelism, tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { median, setting, writeHelloIntegration } from './common.ts';
import type { LoadResult } from './http-load.ts';

const SECONDS = setting('BENCH_SECONDS', 5, false);
const ROUNDS = setting('BENCH_ROUNDS', 3);
const CONNECTIONS = setting('BENCH_CONNECTIONS', 32);
const WARMUP = setting('BENCH_WARMUP', 2, false);
const BUSY = 0.1;
const BUSY_RETRIES = Number(process.env.BENCH_BUSY_RETRIES ?? 2);
if (!Number.isInteger(BUSY_RETRIES) || BUSY_RETRIES < 0) {
  process.stderr.write(`BENCH_BUSY_RETRIES=${process.env.BENCH_BUSY_RETRIES}: must be a whole number, 0 or more (default 2)\n`);
  process.exit(2);
}
const TWO_CORE = process.env.BENCH_TWO_CORE ?? 'auto';
if (!['auto', '0', '1'].includes(TWO_CORE)) {
  process.stderr.write(`BENCH_TWO_CORE=${TWO_CORE}: must be auto (the default), 1 or 0\n`);
  process.exit(2);
}

const REPO = new URL('../../', import.meta.url).pathname;
const ADMIN_TOKEN = 'bench-dataplane-admin-token';
const EVENT_BODY = '{"type":"space_content_updated","spaceId":"space-1","revisionId":"rev-1"}';

// ---------------------------------------------------------------------------------------------
// The plain h3 server, run as its own process: `dataplane.ts plain-h3 <port>` (started at the end
// of this file, once every declaration is initialized).
async function plainH3(port: number): Promise<void> {
  const { H3 } = await import('h3');
  const { toNodeHandler } = await import('h3/node');
  const { FastResponse } = await import('srvx');
  const app = new H3();
  app.get('/hello', () => new FastResponse('hello', { headers: { 'content-type': 'text/plain;charset=UTF-8' } }));
  app.post('/events', async (event) => {
    const body = (await event.req.json()) as { type: string };
    return new FastResponse(JSON.stringify({ eventId: 'evt_plain', type: body.type, duplicate: false, deliveries: [], handlers: [] }), {
      status: 202,
      headers: { 'content-type': 'application/json' },
    });
  });
  // The server's own options (src/server/server.ts).
  const server = http.createServer({ requestTimeout: 120_000, headersTimeout: 30_000, keepAliveTimeout: 5_000 }, toNodeHandler(app));
  server.listen(port, '127.0.0.1');
}

// ---------------------------------------------------------------------------------------------
// Children and temp dirs, all cleaned up on every way out.

interface Server {
  name: string;
  child: ChildProcess;
  log: string;
  exited: boolean;
}

const servers: Server[] = [];
const running = new Set<ChildProcess>(); // wrk and CLI runs
let tmp = '';

function killGroups(signal: NodeJS.Signals): void {
  for (const s of servers) {
    if (s.exited || s.child.pid === undefined) continue;
    try {
      process.kill(-s.child.pid, signal); // the server's process group: its children too
    } catch {
      /* gone already */
    }
  }
  for (const c of running) c.kill(signal);
}

process.on('exit', () => {
  killGroups('SIGKILL');
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});
for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
  process.on(sig, () => {
    process.stderr.write(`\n${sig}: stopping the servers\n`);
    process.exit(sig === 'SIGINT' ? 130 : 143);
  });
}

async function stopServers(): Promise<void> {
  killGroups('SIGTERM');
  const deadline = Date.now() + 5000;
  while (servers.some((s) => !s.exited) && Date.now() < deadline) await sleep(50);
  killGroups('SIGKILL'); // what did not stop in time, and any straggler in the groups
}

function fail(message: string): never {
  throw new Error(message);
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

function onPath(cmd: string): boolean {
  return spawnSync('sh', ['-c', `command -v ${cmd}`], { stdio: 'ignore' }).status === 0;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

function tail(file: string, lines = 20): string {
  try {
    return readFileSync(file, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '(no output)';
  }
}

/** Starts `cmd args` in its own process group, pinned to CPU 0 unless `pinned` is false; output to a log file. */
function startServer(name: string, cmd: string, args: string[], pinned = true): Server {
  const log = join(tmp, `${name.replace(/[^a-z0-9]+/gi, '-')}.log`);
  const fd = openSync(log, 'w');
  const [file, argv] = pinned ? ['taskset', ['-c', '0', cmd, ...args]] : [cmd, args];
  const child = spawn(file, argv, { cwd: REPO, detached: true, stdio: ['ignore', fd, fd] });
  closeSync(fd);
  const server: Server = { name, child, log, exited: false };
  child.once('exit', () => (server.exited = true));
  child.once('error', () => (server.exited = true));
  servers.push(server);
  return server;
}

/** Waits until `url` answers `status`, or fails with the server's last output. */
async function ready(server: Server, url: string, status = 200): Promise<void> {
  const deadline = Date.now() + 30_000;
  let last = '';
  while (Date.now() < deadline) {
    if (server.exited) fail(`${server.name} exited before answering ${url}:\n${tail(server.log)}`);
    try {
      const r = await fetch(url, { signal: AbortSignal.timeout(2000) });
      await r.arrayBuffer();
      if (r.status === status) return;
      last = `status ${r.status}`;
    } catch (e) {
      last = (e as Error).message;
    }
    await sleep(100);
  }
  fail(`${server.name} did not answer ${url} with ${status} within 30 s (${last}):\n${tail(server.log)}`);
}

/** Runs a command to its end; its stdout, or a failure naming it with its output. */
function runToEnd(cmd: string, args: string[], opts: { cwd?: string; started?: (child: ChildProcess) => void } = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd: opts.cwd ?? REPO, stdio: ['ignore', 'pipe', 'pipe'] });
    running.add(child);
    opts.started?.(child);
    let out = '';
    let err = '';
    child.stdout!.on('data', (d) => (out += d));
    child.stderr!.on('data', (d) => (err += d));
    child.once('error', (e) => {
      running.delete(child);
      reject(new Error(`${cmd}: ${e.message}`));
    });
    child.once('close', (code) => {
      running.delete(child);
      if (code === 0) resolve(out);
      else reject(new Error(`${cmd} ${args.join(' ')} exited with ${code}:\n${out}${err}`));
    });
  });
}

// ---------------------------------------------------------------------------------------------
// CPU time per process of a server's tree, from /proc (utime + stime, in clock ticks).

const TICKS = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout?.trim()) || 100;

function procStat(pid: number): { ppid: number; ticks: number } | null {
  try {
    const s = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
    return { ppid: Number(f[1]), ticks: Number(f[11]) + Number(f[12]) };
  } catch {
    return null;
  }
}

function label(pid: number, root: number, rootName: string): string {
  if (pid === root) return rootName;
  try {
    const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean);
    const script = argv.find((a) => /\.(ts|js|mjs|cjs)$/.test(a));
    return script ? basename(script) : basename(argv[0] ?? String(pid));
  } catch {
    return String(pid);
  }
}

/** CPU ticks of `root` and each of its descendants, by pid. */
function ticksByPid(root: number): Map<number, number> {
  const parent = new Map<number, number>();
  const ticks = new Map<number, number>();
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    const st = procStat(Number(d));
    if (!st) continue;
    parent.set(Number(d), st.ppid);
    ticks.set(Number(d), st.ticks);
  }
  const inTree = (pid: number): boolean => {
    for (let p = pid, hops = 0; p > 1 && hops < 32; p = parent.get(p) ?? 0, hops++) if (p === root) return true;
    return false;
  };
  return new Map([...ticks].filter(([pid]) => inTree(pid)));
}

/** CPU ticks of `root` and each of its descendants, by label. */
function cpuTree(root: number, rootName: string, byPid = ticksByPid(root)): Map<string, number> {
  const out = new Map<string, number>();
  for (const [pid, t] of byPid) {
    const name = label(pid, root, rootName);
    out.set(name, (out.get(name) ?? 0) + t);
  }
  return out;
}

/**
 * How the serving processes (the root's children that run main.ts) shared the work between two
 * readings (one started in between counts whole), each one's part of their CPU, largest first. Unpinned, it shows how the client's
 * connections fell on them (they accept from one socket: whichever accepts first takes one).
 */
function servingShares(root: number, before: Map<number, number>, after: Map<number, number>): number[] {
  const used = [...after].filter(([pid]) => pid !== root && label(pid, root, '') === 'main.ts').map(([pid, t]) => t - (before.get(pid) ?? 0));
  const total = used.reduce((a, v) => a + v, 0);
  return total > 0 ? used.map((v) => v / total).sort((a, b) => b - a) : [];
}

/** Busy ticks so far (user, nice, system, irq, softirq, steal) of CPU 0, or of all CPUs with `cpu`, from /proc/stat. */
function cpuBusy(which: 'cpu0' | 'cpu'): number {
  const line = readFileSync('/proc/stat', 'utf8')
    .split('\n')
    .find((l) => l.startsWith(`${which} `));
  if (!line) return NaN;
  const f = line.trim().split(/\s+/).slice(1).map(Number);
  return f[0] + f[1] + f[2] + f[5] + f[6] + f[7];
}

const CPUS = readFileSync('/proc/stat', 'utf8')
  .split('\n')
  .filter((l) => /^cpu\d+ /.test(l)).length;

// ---------------------------------------------------------------------------------------------
// wrk and its output.

interface Measure {
  rps: number;
  p50: number; // ms
  p99: number; // ms
  requests: number;
  errors: number;
  /** What the errors were, as wrk counts them ("non-2xx 3, timeout 7"). */
  errorKinds: string;
  /** µs of CPU per request, by process of the server. */
  cpu: Map<string, number>;
  /** Share of CPU 0 busy outside the server's processes while wrk ran (other load on a shared machine); NaN unpinned. */
  others: number;
  /** Unpinned: each serving process's part of their CPU, largest first (see servingShares). */
  shares: number[];
  /** µs of CPU per request of wrk itself (the client shares the two cores in the two-core run). */
  wrkCpu: number;
}

const UNIT_MS: Record<string, number> = { us: 0.001, ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

function parseWrk(out: string): Omit<Measure, 'cpu' | 'others' | 'wrkCpu' | 'shares'> {
  const rps = Number(/Requests\/sec:\s*([\d.]+)/.exec(out)?.[1]);
  const requests = Number(/(\d+) requests in/.exec(out)?.[1]);
  const pct = (p: string) => {
    const m = new RegExp(`^\\s*${p}%\\s+([\\d.]+)(us|ms|s|m|h)\\s*$`, 'm').exec(out);
    return m ? Number(m[1]) * UNIT_MS[m[2]] : NaN;
  };
  const non2xx = Number(/Non-2xx or 3xx responses:\s*(\d+)/.exec(out)?.[1] ?? 0);
  const sock = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(out);
  const errors = non2xx + (sock ? sock.slice(1).reduce((a, n) => a + Number(n), 0) : 0);
  const kinds = [['non-2xx', non2xx], ...['connect', 'read', 'write', 'timeout'].map((k, i) => [k, Number(sock?.[i + 1] ?? 0)] as const)] as const;
  const errorKinds = kinds
    .filter(([, n]) => n > 0)
    .map(([k, n]) => `${k} ${n}`)
    .join(', ');
  if (!Number.isFinite(rps) || !Number.isFinite(requests)) fail(`could not read wrk's output:\n${out}`);
  return { rps, requests, p50: pct('50'), p99: pct('99'), errors, errorKinds };
}

interface Target {
  name: string;
  url: string;
  lua?: string;
  server: Server;
  /** false: server and wrk unpinned (the two-core run). */
  pinned: boolean;
}

async function wrk(t: Target, seconds: number): Promise<Measure> {
  if (t.server.exited) fail(`${t.server.name} has exited:\n${tail(t.server.log)}`);
  const args = ['-t1', `-c${CONNECTIONS}`, `-d${seconds}s`, '--latency', ...(t.lua ? ['-s', t.lua] : []), t.url];
  const root = t.server.child.pid!;
  const ticksBefore = ticksByPid(root);
  const before = cpuTree(root, t.server.name, ticksBefore);
  // Pinned: what else ran on CPU 0. Unpinned: what else ran on all CPUs besides the server and wrk,
  // whose CPU time is read every 100 ms while it runs (taskset execs wrk: same pid).
  const which = t.pinned ? 'cpu0' : 'cpu';
  const busyBefore = cpuBusy(which);
  const t0 = performance.now();
  let wrkTicks = 0;
  let poll: NodeJS.Timeout | undefined;
  const started = (child: ChildProcess) => {
    poll = setInterval(() => (wrkTicks = procStat(child.pid!)?.ticks ?? wrkTicks), 100);
  };
  let out: string;
  try {
    out = t.pinned ? await runToEnd('taskset', ['-c', '1', 'wrk', ...args], { started }) : await runToEnd('wrk', args, { started });
  } finally {
    clearInterval(poll);
  }
  const ticksAfter = ticksByPid(root);
  const after = cpuTree(root, t.server.name, ticksAfter);
  const busy = cpuBusy(which) - busyBefore;
  const elapsedTicks = ((performance.now() - t0) / 1000) * TICKS;
  const m = parseWrk(out);
  const cpu = new Map<string, number>();
  let treeTicks = 0;
  for (const [k, v] of after) {
    treeTicks += v - (before.get(k) ?? 0);
    cpu.set(k, (((v - (before.get(k) ?? 0)) / TICKS) * 1e6) / Math.max(1, m.requests));
  }
  const others = t.pinned ? (busy - treeTicks) / elapsedTicks : (busy - treeTicks - wrkTicks) / (elapsedTicks * CPUS);
  const shares = t.pinned ? [] : servingShares(root, ticksBefore, ticksAfter);
  return { ...m, cpu, others: Math.max(0, others), shares, wrkCpu: ((wrkTicks / TICKS) * 1e6) / Math.max(1, m.requests) };
}

/**
 * One measure of `t`; measured again (up to BUSY_RETRIES times) while other processes took more
 * than BUSY of the CPU it ran on, keeping the least disturbed.
 */
async function measure(t: Target, seconds: number): Promise<Measure> {
  let best = await wrk(t, seconds);
  for (let i = 0; i < BUSY_RETRIES && best.others > BUSY; i++) {
    retried++;
    const again = await wrk(t, seconds);
    if (again.others < best.others) best = again;
  }
  return best;
}
let retried = 0;

// ---------------------------------------------------------------------------------------------

async function run(): Promise<void> {
  try {
    await main();
    await stopServers();
  } catch (e) {
    process.stderr.write(`dataplane benchmark failed: ${(e as Error).message}\n`);
    await stopServers();
    process.exitCode = 1;
  }
  process.exit(); // the 'exit' handler removes the temp dir
}

async function main(): Promise<void> {
  const missing = ['wrk', 'taskset'].filter((c) => !onPath(c));
  if (missing.length)
    fail(
      `${missing.join(' and ')} not found on PATH: install ${missing.length > 1 ? 'them' : 'it'} (Debian: apt-get install ${missing.map((c) => (c === 'taskset' ? 'util-linux' : c)).join(' ')})`,
    );
  if (availableParallelism() < 2) fail(`needs 2 CPUs (servers on CPU 0, wrk on CPU 1); this process may use ${availableParallelism()}`);
  if (Number(process.versions.node.split('.')[0]) < 24) fail(`needs Node 24 (this is ${process.version}): run it with node_modules/.bin/node`);
  const workerdBin = [join(REPO, 'node_modules/@cloudflare/workerd-linux-64/bin/workerd'), join(REPO, 'node_modules/.bin/workerd')].find(
    (p) => spawnSync(p, ['--version'], { stdio: 'ignore' }).status === 0,
  );
  if (!workerdBin) fail('workerd not found: run npm ci (it is a devDependency; its binary is in @cloudflare/workerd-linux-64)');

  tmp = mkdtempSync(join(tmpdir(), 'switchyard-dataplane-'));
  const node = process.execPath;

  // a. node:http hello.
  const nodePort = await freePort();
  writeFileSync(
    join(tmp, 'node-hello.mjs'),
    `import http from 'node:http';
http.createServer((req, res) => { res.writeHead(200, { 'content-type': 'text/plain;charset=UTF-8' }); res.end('hello'); }).listen(${nodePort}, '127.0.0.1');
`,
  );
  const nodeServer = startServer('node:http', node, [join(tmp, 'node-hello.mjs')]);

  // b. workerd, one hello module worker.
  const workerdPort = await freePort();
  mkdirSync(join(tmp, 'workerd'));
  writeFileSync(join(tmp, 'workerd/worker.js'), `export default { fetch() { return new Response('hello') } }\n`);
  writeFileSync(
    join(tmp, 'workerd/config.capnp'),
    `using Workerd = import "/workerd/workerd.capnp";
const config :Workerd.Config = (
  services = [ (name = "main", worker = .hello) ],
  sockets = [ (name = "http", address = "127.0.0.1:${workerdPort}", http = (), service = "main") ],
);
const hello :Workerd.Worker = (
  modules = [ (name = "worker.js", esModule = embed "worker.js") ],
  compatibilityDate = "2025-01-01",
);
`,
  );
  const workerdServer = startServer('workerd', workerdBin, ['serve', join(tmp, 'workerd/config.capnp')]);

  // b2. edge-runtime (devDependency): Workers-style fetch handlers in Node vm contexts, without
  // isolation, on Node's HTTP server: the peer that runs the same kind of code on the same platform.
  const edgePort = await freePort();
  writeFileSync(
    join(tmp, 'edge-hello.mjs'),
    `import { createRequire } from 'node:module';
const require = createRequire(${JSON.stringify(join(REPO, 'package.json'))});
const { EdgeRuntime, runServer } = require('edge-runtime');
const runtime = new EdgeRuntime({ initialCode: "addEventListener('fetch', (event) => event.respondWith(new Response('hello')));" });
await runServer({ runtime, port: ${edgePort}, host: '127.0.0.1' });
`,
  );
  const edgeServer = startServer('edge-runtime', node, [join(tmp, 'edge-hello.mjs')]);

  // b3. The hand-written isolate server (see the top of this file).
  const peerPort = await freePort();
  writeFileSync(
    join(tmp, 'isolate-peer.mjs'),
    `import http from 'node:http';
import { createRequire } from 'node:module';
import { setFlagsFromString } from 'node:v8';
setFlagsFromString('--no-allocation-site-pretenuring');
const require = createRequire(${JSON.stringify(join(REPO, 'package.json'))});
const ivm = require('isolated-vm');
const Database = require('better-sqlite3');
const context = new ivm.Isolate({ memoryLimit: 128 }).createContextSync();
context.evalSync("globalThis.handle = (json) => { const request = JSON.parse(json); return { status: 200, headers: ['content-type', 'text/plain;charset=UTF-8'], body: 'hello' }; }");
const handle = context.global.getSync('handle', { reference: true });
const db = new Database(${JSON.stringify(join(tmp, 'isolate-peer.db'))});
db.pragma('journal_mode = WAL');
db.pragma('synchronous = NORMAL');
db.exec('CREATE TABLE invocations (id TEXT PRIMARY KEY, url TEXT, status INTEGER, duration REAL, at TEXT)');
const insert = db.prepare('INSERT INTO invocations VALUES (?, ?, ?, ?, ?)');
const commit = db.transaction((rows) => { for (const r of rows) insert.run(r); });
const copy = { arguments: { copy: true }, result: { copy: true } };
let rows = [];
let timer;
let n = 0;
http.createServer((req, res) => {
  const started = performance.now();
  const out = handle.applySync(undefined, [JSON.stringify({ method: req.method, url: 'http://' + req.headers.host + req.url, headers: req.rawHeaders })], copy);
  res.writeHead(out.status, out.headers);
  res.end(out.body);
  rows.push(['req_' + ++n, req.url, out.status, performance.now() - started, new Date().toISOString()]);
  timer ??= setTimeout(() => { timer = undefined; const batch = rows; rows = []; commit(batch); }, 10);
}).listen(${peerPort}, '127.0.0.1');
`,
  );
  const peerServer = startServer('isolate peer', node, ['--no-node-snapshot', '--v8-pool-size=1', join(tmp, 'isolate-peer.mjs')]);

  // c/d. Plain h3 (GET hello, POST events), one process.
  const h3Port = await freePort();
  const h3Server = startServer('plain h3', node, ['--no-node-snapshot', new URL(import.meta.url).pathname, 'plain-h3', String(h3Port)]);

  // c. Switchyard, started as a user starts it.
  const help = await runToEnd(node, ['--no-node-snapshot', 'src/main.ts', 'serve', '--help']);
  const hasProcesses = /--processes\b/.test(help);
  const oneCoreArgs = hasProcesses ? ['--processes', '1'] : [];
  const twoCore = TWO_CORE === '1' || (TWO_CORE === 'auto' && hasProcesses);

  const switchyard = async (name: string, extra: string[], pinned: boolean) => {
    const dir = join(tmp, name);
    writeHelloIntegration(join(dir, 'integrations'), 'hello', `fetch: () => new Response('hello')`);
    const port = await freePort();
    const config = join(dir, 'config.yaml');
    writeFileSync(
      config,
      `server:\n  host: 127.0.0.1\n  port: ${port}\n  shutdown_timeout: 2s\ndata_dir: ${JSON.stringify(join(dir, 'data'))}\nintegrations_dir: ${JSON.stringify(join(dir, 'integrations'))}\nadmin_token: ${ADMIN_TOKEN}\n`,
    );
    const server = startServer(name, node, ['--no-node-snapshot', 'src/main.ts', 'serve', '--config', config, ...extra], pinned);
    const base = `http://127.0.0.1:${port}`;
    await ready(server, `${base}/healthz`);
    const installed = JSON.parse(await runToEnd(node, ['--no-node-snapshot', 'src/main.ts', 'install', 'hello', '--config', config, '--json'])) as {
      installation: { id: string; status: string; urls: { publicEndpoint: string } };
    };
    const endpoint = installed.installation.urls.publicEndpoint;
    await ready(server, endpoint);
    return { server, base, endpoint };
  };
  const sy1 = await switchyard(hasProcesses ? 'switchyard --processes 1' : 'switchyard', oneCoreArgs, true);
  // The default configuration on the one core: its serving processes pinned to CPU 0 with the rest.
  const sy1d = hasProcesses ? await switchyard('switchyard default processes', [], true) : null;
  const sy2 = twoCore ? await switchyard('switchyard 2 cores', [], false) : null;

  await ready(nodeServer, `http://127.0.0.1:${nodePort}/`);
  await ready(workerdServer, `http://127.0.0.1:${workerdPort}/`);
  await ready(h3Server, `http://127.0.0.1:${h3Port}/hello`);
  await ready(peerServer, `http://127.0.0.1:${peerPort}/`);

  // Check each answer once: the same "hello" everywhere, the events API accepting the event.
  const bodyOf = async (url: string, init?: RequestInit) => {
    const r = await fetch(url, init);
    return `${r.status} ${await r.text()}`;
  };
  for (const url of [
    `http://127.0.0.1:${nodePort}/`,
    `http://127.0.0.1:${workerdPort}/`,
    `http://127.0.0.1:${h3Port}/hello`,
    `http://127.0.0.1:${peerPort}/`,
    sy1.endpoint,
    ...(sy1d ? [sy1d.endpoint] : []),
    ...(sy2 ? [sy2.endpoint] : []),
  ]) {
    const got = await bodyOf(url);
    if (got !== '200 hello') fail(`${url} answered ${got}, not 200 hello`);
  }
  const post = { method: 'POST', headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' }, body: EVENT_BODY };
  const accepted = await bodyOf(`${sy1.base}/api/v1/events`, post);
  if (!accepted.startsWith('202 ')) fail(`POST /api/v1/events answered ${accepted}`);

  const lua = join(tmp, 'post-event.lua');
  writeFileSync(
    lua,
    `wrk.method = "POST"\nwrk.body = '${EVENT_BODY}'\nwrk.headers["Content-Type"] = "application/json"\nwrk.headers["Authorization"] = "Bearer ${ADMIN_TOKEN}"\n`,
  );

  const targets: Target[] = [
    { name: 'node:http hello', url: `http://127.0.0.1:${nodePort}/`, server: nodeServer, pinned: true },
    { name: 'workerd hello module worker', url: `http://127.0.0.1:${workerdPort}/`, server: workerdServer, pinned: true },
    { name: 'edge-runtime hello', url: `http://127.0.0.1:${edgePort}/`, server: edgeServer, pinned: true },
    { name: 'hand-written isolate server', url: `http://127.0.0.1:${peerPort}/`, server: peerServer, pinned: true },
    { name: 'switchyard public endpoint', url: sy1.endpoint, server: sy1.server, pinned: true },
    ...(sy1d ? [{ name: 'switchyard public endpoint, default processes', url: sy1d.endpoint, server: sy1d.server, pinned: true }] : []),
    { name: 'plain h3 GET hello', url: `http://127.0.0.1:${h3Port}/hello`, server: h3Server, pinned: true },
    { name: 'switchyard GET /healthz', url: `${sy1.base}/healthz`, server: sy1.server, pinned: true },
    { name: 'plain h3 POST (JSON body)', url: `http://127.0.0.1:${h3Port}/events`, lua, server: h3Server, pinned: true },
    { name: 'switchyard POST /api/v1/events', url: `${sy1.base}/api/v1/events`, lua, server: sy1.server, pinned: true },
    ...(sy2 ? [{ name: 'switchyard public endpoint, 2 cores', url: sy2.endpoint, server: sy2.server, pinned: false }] : []),
  ];

  const wrkVersion = spawnSync('wrk', ['--version'], { encoding: 'utf8' })
    .stdout.split('\n')[0]
    .replace(/ Copyright.*/, '');
  const workerdVersion = spawnSync(workerdBin, ['--version'], { encoding: 'utf8' }).stdout.trim();
  console.log(`Data plane: ${wrkVersion} -t1 -c${CONNECTIONS} -d${SECONDS}s --latency; ${ROUNDS} rounds, medians; Node ${process.version}, ${workerdVersion}`);
  console.log(`  servers pinned to CPU 0 (taskset -c 0, children included), wrk to CPU 1 (taskset -c 1); "others": CPU taken by other processes meanwhile`);
  console.log(`  switchyard: ${hasProcesses ? 'serve --processes 1' : 'serve (no --processes option yet: one serving process and its sandbox worker)'}`);
  if (sy2)
    console.log(
      `  two-core run: serve ${hasProcesses ? 'with the default processes' : '(no --processes yet)'}, unpinned; wrk unpinned too (-t1 -c${CONNECTIONS}), sharing the two cores`,
    );
  else
    console.log(`  two-core run: skipped (${TWO_CORE === '0' ? 'BENCH_TWO_CORE=0' : 'serve has no --processes option yet; BENCH_TWO_CORE=1 runs it anyway'})`);

  process.stdout.write(`  warm-up (${WARMUP}s each)...`);
  for (const t of targets) await wrk(t, WARMUP);
  process.stdout.write(' done\n');

  const results = new Map<string, Measure[]>(targets.map((t) => [t.name, []]));
  for (let round = 0; round < ROUNDS; round++) {
    const order = round % 2 ? [...targets].reverse() : targets;
    for (const t of order) results.get(t.name)!.push(await measure(t, SECONDS));
    process.stdout.write(
      `  round ${round + 1}/${ROUNDS}: ${targets.map((t) => `${t.name.split(' ').slice(0, 3).join(' ')} ${results.get(t.name)!.at(-1)!.rps.toFixed(0)}`).join(', ')}\n`,
    );
  }

  const rps = (name: string) => median(results.get(name)!.map((m) => m.rps));
  const cpuPerRequest = (name: string) => median(results.get(name)!.map((m) => [...m.cpu.values()].reduce((a, v) => a + v, 0)));
  console.log('');
  for (const t of targets) {
    const ms = results.get(t.name)!;
    const errors = ms.reduce((a, m) => a + m.errors, 0);
    const procs = [...new Set(ms.flatMap((m) => [...m.cpu.keys()]))];
    const cpu = procs.map((p) => ({ p, us: median(ms.map((m) => m.cpu.get(p) ?? 0)) })).filter((c) => c.us >= 0.5);
    const total = cpuPerRequest(t.name);
    const others = median(ms.map((m) => m.others));
    console.log(
      `  ${t.name.padEnd(36)} ${rps(t.name).toFixed(0).padStart(7)} req/s   p50 ${median(ms.map((m) => m.p50))
        .toFixed(2)
        .padStart(6)} ms   p99 ${median(ms.map((m) => m.p99))
        .toFixed(2)
        .padStart(6)} ms` +
        `   CPU ${total.toFixed(1)} µs/req${cpu.length > 1 ? ` (${cpu.map((c) => `${c.p} ${c.us.toFixed(1)}`).join(', ')})` : ''}` +
        `   others ${(others * 100).toFixed(0)}%${errors ? `   ERRORS ${errors} (${ms.map((m) => m.errorKinds || 'none').join('; ')})` : ''}`,
    );
  }
  const busiest = Math.max(...[...results.values()].flat().map((m) => m.others));
  if (retried) console.log(`  ${retried} measure(s) taken again because other processes were busy (BENCH_BUSY_RETRIES=${BUSY_RETRIES})`);
  if (busiest > BUSY)
    console.log(
      `  NOTE: other processes took up to ${(busiest * 100).toFixed(0)}% of the CPU during a kept measure (a shared machine): its req/s are low and noisy; CPU µs/req holds up better`,
    );
  const ratio = (label: string, a: string, b: string, goal?: number, byCpuToo = true) => {
    const r = rps(a) / rps(b);
    const byCpu = cpuPerRequest(b) / cpuPerRequest(a);
    console.log(
      `  ${label.padEnd(48)} ${r.toFixed(3)}${goal === undefined ? '' : `   (goal >= ${goal}: ${r >= goal ? 'met' : 'NOT met'})`}` +
        (byCpuToo ? `   (by CPU per request: ${byCpu.toFixed(3)})` : ''),
    );
  };
  console.log('Ratios of median req/s (and of CPU per request, inverted: what the req/s ratio would be if both were CPU-bound on one core):');
  ratio('switchyard public endpoint / workerd', 'switchyard public endpoint', 'workerd hello module worker', 0.65);
  ratio('switchyard public endpoint / edge-runtime', 'switchyard public endpoint', 'edge-runtime hello', 1.0);
  if (sy1d) {
    ratio('  the default configuration / workerd', 'switchyard public endpoint, default processes', 'workerd hello module worker', 0.65);
    ratio('  the default configuration / edge-runtime', 'switchyard public endpoint, default processes', 'edge-runtime hello', 1.0);
  }
  ratio('switchyard public endpoint / isolate server', 'switchyard public endpoint', 'hand-written isolate server');
  if (sy1d) ratio('  the default configuration / isolate server', 'switchyard public endpoint, default processes', 'hand-written isolate server');
  ratio('edge-runtime / workerd', 'edge-runtime hello', 'workerd hello module worker');
  ratio('switchyard public endpoint / node:http', 'switchyard public endpoint', 'node:http hello');
  ratio('workerd / node:http', 'workerd hello module worker', 'node:http hello');
  ratio('switchyard GET /healthz / plain h3 GET', 'switchyard GET /healthz', 'plain h3 GET hello');
  ratio('switchyard POST /api/v1/events / plain h3 GET', 'switchyard POST /api/v1/events', 'plain h3 GET hello');
  ratio('switchyard POST /api/v1/events / plain h3 POST', 'switchyard POST /api/v1/events', 'plain h3 POST (JSON body)');
  if (sy2) {
    ratio('switchyard public endpoint, 2 cores / 1 core', 'switchyard public endpoint, 2 cores', 'switchyard public endpoint', 1.7, false);
    // wrk runs on the same two cores there: what the two cores could give at best, were every
    // request to cost the server what it costs on one core, is 2 cores over (server + wrk) per request.
    const two = 'switchyard public endpoint, 2 cores';
    const wrkUs = median(results.get(two)!.map((m) => m.wrkCpu));
    const oneName = 'switchyard public endpoint';
    const one = cpuPerRequest(oneName);
    console.log(
      `    wrk took ${wrkUs.toFixed(1)} µs of CPU a request on the same two cores; at the one-core CPU per request (${one.toFixed(1)} µs), two cores shared with it give at most ` +
        `${((2 * 1e6) / (one + wrkUs)).toFixed(0)} req/s: ${((2 * 1e6) / (one + wrkUs) / rps(oneName)).toFixed(3)} of the one-core figure; ` +
        `measured ${cpuPerRequest(two).toFixed(1)} µs a request on two cores`,
    );
    // Whichever serving process accepts first takes a connection: an uneven split leaves a core idle.
    const pct = (x: number) => `${Math.round(x * 100)}`;
    console.log(
      `    the serving processes' parts of their CPU, each round: ${results
        .get(two)!
        .map((m) => `${m.rps.toFixed(0)} req/s at ${m.shares.map(pct).join('/') || '?'} %`)
        .join(', ')}`,
    );
  }

  // Latency at half the peak: an open-loop load (scripts/bench/http-load.ts runPaced, latency from
  // each request's planned time) pinned to CPU 1, at half of each server's own median req/s above.
  // The same client against the peers, and what this machine does to a thread that only spins
  // (its stalls bound every server's p99 here).
  console.log(`Latency at half the peak (open loop, ${SECONDS}s after a 1 s warm-up, client pinned to CPU 1):`);
  const switchyards = ['switchyard public endpoint', ...(sy1d ? ['switchyard public endpoint, default processes'] : [])];
  for (const name of ['node:http hello', 'workerd hello module worker', 'edge-runtime hello', 'hand-written isolate server', ...switchyards]) {
    const t = targets.find((x) => x.name === name)!;
    const rate = Math.round(rps(name) / 2);
    const root = t.server.child.pid!;
    const ticksBefore = ticksByPid(root);
    const out = await runToEnd('taskset', [
      '-c',
      '1',
      node,
      '--no-node-snapshot',
      join(REPO, 'scripts/bench/http-load.ts'),
      'paced',
      t.url,
      String(SECONDS),
      String(rate),
    ]);
    const r = JSON.parse(out) as LoadResult;
    // The server's headroom at this rate: its CPU a request here (all it was sent, the warm-up's
    // second too) against its CPU a request at the peak, and the share of the core that makes.
    const ticksAfter = ticksByPid(root);
    let used = 0;
    // A process started meanwhile (a serving process replaced): all of its CPU falls in the run.
    for (const [pid, v] of ticksAfter) used += v - (ticksBefore.get(pid) ?? 0);
    const cpu = ((used / TICKS) * 1e6) / (rate * (SECONDS + 1));
    const headroom = `   CPU ${cpu.toFixed(1).padStart(5)} µs/req (${(cpu / cpuPerRequest(name)).toFixed(2)}x its peak's), ${Math.round((cpu * rate) / 1e4)} % of the core`;
    const goal = switchyards.includes(name) ? `   (goal p99 <= 5 ms: ${r.p99 <= 5 ? 'met' : 'NOT met'})` : '';
    console.log(
      `  ${name.padEnd(47)} ${String(rate).padStart(6)} req/s   p50 ${r.p50.toFixed(2).padStart(6)} ms   p99 ${r.p99.toFixed(2).padStart(6)} ms${r.errors ? `   ERRORS ${r.errors}` : ''}${headroom}${goal}`,
    );
  }
  const stalls = JSON.parse(await runToEnd('taskset', ['-c', '0', node, '-e', SPIN_STALLS])) as number[];
  console.log(
    `  this machine: a thread that only spins on CPU 0 for ${SECONDS}s was stalled ${stalls.length} times past 1 ms (longest ${Math.max(0, ...stalls).toFixed(1)} ms)`,
  );
}

/** A spinning thread's gaps past 1 ms, as JSON: what the machine takes from a process that never waits. */
const SPIN_STALLS = `const end = performance.now() + ${SECONDS * 1000}; let last = performance.now(); const gaps = [];
while (performance.now() < end) { const n = performance.now(); if (n - last > 1) gaps.push(n - last); last = n; }
console.log(JSON.stringify(gaps));`;

// ---------------------------------------------------------------------------------------------
if (process.argv[2] === 'plain-h3') await plainH3(Number(process.argv[3]));
else await run();
