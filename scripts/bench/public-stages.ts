/**
 * Where a public-endpoint request's CPU goes, by stage, on the path a user takes. Run:
 *
 *   PATH=node_modules/.bin:$PATH node --no-node-snapshot scripts/bench/public-stages.ts
 *
 * Settings (environment): BENCH_SECONDS (per wrk run, default 8), BENCH_ROUNDS (default 3),
 * BENCH_CONNECTIONS (wrk -c, default 32), BENCH_PROFILE_INTERVAL (µs between profile samples,
 * default 250), BENCH_GUEST_INVOCATIONS (the in-process split of the call, default 50000), BENCH_TOP
 * (default 0: with N, the N functions that take most of each stage).
 * Needs `wrk` and `taskset` on PATH, Node 24 and 2 CPUs.
 *
 * Two `switchyard serve --processes 1` with the hello integration (`fetch: () => new
 * Response('hello')`), installed with `switchyard install hello --json`, both pinned to CPU 0
 * (`taskset -c 0`), wrk pinned to CPU 1 (-t1 -c32) on the installation's public endpoint:
 * - A, unprofiled: the CPU each request costs the serving process (utime + stime from /proc), the
 *   median over ROUNDS;
 * - B, the same server under `--cpu-prof` (NODE_OPTIONS, the serving process's profile read after
 *   it exits): the share of each stage in the samples taken while wrk ran, a sample's stage being
 *   that of the nearest frame on its stack that a rule below names (its own function first, then
 *   its callers: a builtin or a native takes its caller's stage).
 * Each round loads A, then B (reversed every other round). A stage's µs per request is its share in
 * B times A's median: the profiler's own cost stays out of the figures.
 *
 * The guest runs in another isolate, invisible to the serving process's profile: its time lands on
 * the synchronous call into it (`applySync`). That bucket is split by a third measure, in this
 * process: the same hello invocation through the sandbox host (as the serving process runs it,
 * no HTTP): the share of the call that the guest isolate's cpuTime counts (its code, and the
 * copies in and out, which isolated-vm counts there too: a rough split), and the rest (entering,
 * the time-out, the clocks). isolated-vm's own profiler does not help here: it makes one profile
 * per activation of the isolate, one or two samples each for a call of tens of µs.
 *
 * On a shared machine req/s mean little; CPU per request and its split hold up better. Compare
 * runs made in the same conditions, never figures across days.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { median, setting, writeHelloIntegration } from './common.ts';

const SECONDS = setting('BENCH_SECONDS', 8, false);
const ROUNDS = setting('BENCH_ROUNDS', 3);
const CONNECTIONS = setting('BENCH_CONNECTIONS', 32);
const INTERVAL = setting('BENCH_PROFILE_INTERVAL', 250);
const GUEST_INVOCATIONS = setting('BENCH_GUEST_INVOCATIONS', 50_000);
const TOP = Number(process.env.BENCH_TOP ?? 0);
const REPO = new URL('../../', import.meta.url).pathname;
const HELLO = `fetch: () => new Response('hello')`;

// ---------------------------------------------------------------------------------------------
// Stages of the serving process, by the file (and for a few, the function) of a stack frame.

type Frame = { functionName: string; url: string };
interface Rule {
  stage: string;
  url?: RegExp;
  fn?: RegExp;
}

const CALL = 'the call into the isolate (applySync: crossing + guest)';
const RULES: Rule[] = [
  // applySync is a native: its samples land on the JS frame that called it.
  { stage: CALL, url: /src\/sandbox\/host\/instance\.ts$/, fn: /^(applySync|callInline)$/ },
  { stage: 'response back (toResponse, srvx FastResponse to the socket)', url: /src\/runtime\/public-fetch\.ts$/, fn: /^toResponse$/ },
  {
    stage: 'invocation record and output (invoke.ts, records, redaction)',
    url: /src\/runtime\/(invoke|records|redact|stack-trace|output|log-budget|late-logs|invocations)\.ts$/,
  },
  {
    stage: 'envelope (headers, environment, tokens)',
    url: /src\/runtime\/(public-fetch|environment|caller-environment)\.ts$|src\/installations\/(tokens|urls)\.ts$/,
  },
  { stage: 'sandbox host (batch, pool, invocation, limits)', url: /src\/sandbox\/|src\/lib\/batch\.ts$/ },
  { stage: 'invocation record and output (invoke.ts, records, redaction)', url: /src\/store\/|node_modules\/better-sqlite3\// },
  {
    stage: 'routing and auth (h3, srvx Request, src/http, lookups)',
    url: /node_modules\/(h3|srvx|rou3|cookie-es)\/|src\/(http|server|metrics|runtime|installations|registry|process)\//,
  },
  { stage: "Node's HTTP server and sockets", url: /^node:/ },
];
const GC = 'garbage collector';
const PROGRAM = '(program): native code outside JS frames';
const OTHER = 'other';

/** Node's helpers our code calls (a URL, a clock): charged to their caller, like a builtin. */
const TRANSPARENT = /^node:internal\/(url|process\/per_thread|perf\/utils|util)$/;

function stageOf(stack: Frame[]): string {
  const leaf = stack[0];
  if (leaf.functionName === '(garbage collector)') return GC;
  if (leaf.functionName === '(program)') return PROGRAM;
  for (const f of stack) {
    if (TRANSPARENT.test(f.url)) continue;
    for (const r of RULES) {
      if (r.url && !r.url.test(f.url)) continue;
      if (r.fn && !r.fn.test(f.functionName)) continue;
      if (!r.url && !r.fn) continue;
      return r.stage;
    }
  }
  return OTHER;
}

interface Profile {
  nodes: Array<{ id: number; callFrame: Frame; children?: number[] }>;
  startTime: number;
  samples: number[];
  timeDeltas: number[];
}

/**
 * µs of samples per stage within the windows (µs on the profile's clock), and the total. Idle
 * samples are left out.
 */
function stagesOf(
  p: Profile,
  windows: Array<[number, number]>,
  classify: (stack: Frame[]) => string,
): { by: Map<string, number>; total: number; fns: Map<string, Map<string, number>> } {
  const parent = new Map<number, number>();
  const byId = new Map<number, Profile['nodes'][number]>();
  for (const n of p.nodes) {
    byId.set(n.id, n);
    for (const c of n.children ?? []) parent.set(c, n.id);
  }
  const memo = new Map<number, string | null>();
  // The frame a sample is charged to within its stage: its own, or for a builtin its nearest caller with a file.
  const where = (id: number): string => {
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
      const f = byId.get(at)!.callFrame;
      if (f.url) return `${f.functionName || '(anonymous)'} ${f.url.replace(/^.*\/(node_modules\/|src\/)/, '$1')}`;
    }
    return byId.get(id)!.callFrame.functionName;
  };
  const fns = new Map<string, Map<string, number>>();
  const stage = (id: number): string | null => {
    let s = memo.get(id);
    if (s !== undefined) return s;
    const stack: Frame[] = [];
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) stack.push(byId.get(at)!.callFrame);
    s = stack[0].functionName === '(idle)' ? null : classify(stack);
    memo.set(id, s);
    return s;
  };
  const by = new Map<string, number>();
  let total = 0;
  let t = p.startTime;
  for (let i = 0; i < p.samples.length; i++) {
    t += p.timeDeltas[i];
    // A sample stands for the time since the one before it.
    const dt = i + 1 < p.timeDeltas.length ? p.timeDeltas[i + 1] : 0;
    if (!windows.some(([a, b]) => t >= a && t <= b)) continue;
    const s = stage(p.samples[i]);
    if (s === null) continue;
    by.set(s, (by.get(s) ?? 0) + dt);
    total += dt;
    let f = fns.get(s);
    if (!f) fns.set(s, (f = new Map()));
    const w = where(p.samples[i]);
    f.set(w, (f.get(w) ?? 0) + dt);
  }
  return { by, total, fns };
}

// ---------------------------------------------------------------------------------------------
// Servers, wrk, CPU from /proc.

const children = new Set<ChildProcess>();
let tmp = '';
process.on('exit', () => {
  for (const c of children)
    if (c.pid)
      try {
        process.kill(-c.pid, 'SIGKILL');
      } catch {
        /* gone */
      }
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});
for (const sig of ['SIGINT', 'SIGTERM'] as const) process.on(sig, () => process.exit(130));

function fail(message: string): never {
  throw new Error(message);
}
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

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

function runToEnd(cmd: string, args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd: REPO, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout!.on('data', (d) => (out += d));
    child.stderr!.on('data', (d) => (err += d));
    child.once('error', reject);
    child.once('close', (code) => (code === 0 ? resolve(out) : reject(new Error(`${cmd} ${args.join(' ')} exited with ${code}:\n${out}${err}`))));
  });
}

const TICKS = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout?.trim()) || 100;

function procTicks(pid: number): number {
  const s = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
  return Number(f[11]) + Number(f[12]);
}

/** The serving process: a supervisor's child (cluster.fork), or the process itself when it has none. */
function servingPid(supervisor: number): number {
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const s = readFileSync(`/proc/${d}/stat`, 'utf8');
      if (Number(s.slice(s.lastIndexOf(')') + 2).split(' ')[1]) !== supervisor) continue;
      if (readFileSync(`/proc/${d}/environ`, 'utf8').includes('SWITCHYARD_SERVING=')) return Number(d);
    } catch {
      /* gone */
    }
  }
  return supervisor; // --processes 1: the process started serves itself
}

interface Serve {
  name: string;
  child: ChildProcess;
  endpoint: string;
  serving: number;
  profDir?: string;
  log: string;
}

async function startServe(name: string, profile: boolean): Promise<Serve> {
  const dir = join(tmp, name);
  writeHelloIntegration(join(dir, 'integrations'), 'hello', HELLO);
  const port = await freePort();
  const config = join(dir, 'config.yaml');
  writeFileSync(
    config,
    `server:\n  host: 127.0.0.1\n  port: ${port}\n  shutdown_timeout: 2s\ndata_dir: ${JSON.stringify(join(dir, 'data'))}\nintegrations_dir: ${JSON.stringify(join(dir, 'integrations'))}\nadmin_token: bench-stages-admin-token\n`,
  );
  const profDir = profile ? join(dir, 'prof') : undefined;
  const log = join(dir, 'serve.log');
  const fd = openSync(log, 'w');
  const env = { ...process.env, ...(profDir ? { NODE_OPTIONS: `--cpu-prof --cpu-prof-dir=${profDir} --cpu-prof-interval=${INTERVAL}` } : {}) };
  const child = spawn('taskset', ['-c', '0', process.execPath, '--no-node-snapshot', 'src/main.ts', 'serve', '--processes', '1', '--config', config], {
    cwd: REPO,
    detached: true,
    stdio: ['ignore', fd, fd],
    env,
  });
  closeSync(fd);
  children.add(child);
  const base = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (child.exitCode !== null) fail(`${name} exited:\n${readFileSync(log, 'utf8')}`);
    try {
      if ((await fetch(`${base}/healthz`)).status === 200) break;
    } catch {
      /* not yet */
    }
    if (Date.now() > deadline) fail(`${name} did not answer /healthz`);
    await sleep(100);
  }
  const installed = JSON.parse(await runToEnd(process.execPath, ['--no-node-snapshot', 'src/main.ts', 'install', 'hello', '--config', config, '--json'])) as {
    installation: { urls: { publicEndpoint: string } };
  };
  const endpoint = installed.installation.urls.publicEndpoint;
  for (let i = 0; ; i++) {
    const r = await fetch(endpoint);
    const text = await r.text();
    if (r.status === 200 && text === 'hello') break;
    if (i > 100) fail(`${endpoint} answered ${r.status} ${text}`);
    await sleep(100);
  }
  return { name, child, endpoint, serving: servingPid(child.pid!), profDir, log };
}

async function stopServe(s: Serve): Promise<void> {
  s.child.kill('SIGTERM');
  await new Promise((r) => (s.child.exitCode !== null ? r(null) : s.child.once('exit', r)));
  children.delete(s.child);
}

interface Load {
  requests: number;
  rps: number;
  cpuUs: number;
  /** The run's window on the monotonic clock, in µs (the profile's clock). */
  window: [number, number];
}

async function wrk(s: Serve, seconds: number): Promise<Load> {
  const t0 = procTicks(s.serving);
  const w0 = Number(process.hrtime.bigint() / 1000n);
  const out = await runToEnd('taskset', ['-c', '1', 'wrk', '-t1', `-c${CONNECTIONS}`, `-d${seconds}s`, s.endpoint]);
  const w1 = Number(process.hrtime.bigint() / 1000n);
  const ticks = procTicks(s.serving) - t0;
  const requests = Number(/(\d+) requests in/.exec(out)?.[1]);
  const non2xx = Number(/Non-2xx or 3xx responses:\s*(\d+)/.exec(out)?.[1] ?? 0);
  if (!requests || non2xx) fail(`wrk on ${s.name}: ${out}`);
  return { requests, rps: Number(/Requests\/sec:\s*([\d.]+)/.exec(out)?.[1]), cpuUs: ((ticks / TICKS) * 1e6) / requests, window: [w0, w1] };
}

// ---------------------------------------------------------------------------------------------
// The guest's side, in this process: the sandbox host running the hello invocation, the guest
// isolate's cpuTime read around the run.

async function guestSplit(): Promise<{ perInvocation: number; guestUs: number; callUs: number }> {
  const { defaultConfig } = await import('../../src/config/index.ts');
  const { SandboxHost } = await import('../../src/sandbox/host/host.ts');
  const { GuestInstance } = await import('../../src/sandbox/host/instance.ts');
  const profiled: Array<Awaited<ReturnType<typeof GuestInstance.create>>> = [];
  const create = GuestInstance.create.bind(GuestInstance);
  GuestInstance.create = async (...args: Parameters<typeof GuestInstance.create>) => {
    const inst = await create(...args);
    profiled.push(inst);
    return inst;
  };
  const host = new SandboxHost(
    { limits: defaultConfig().sandbox, allowPrivateNetworks: false, serverOrigin: 'http://127.0.0.1:4000', concurrency: 4 },
    () => {},
  );
  const endpoint = 'http://127.0.0.1:4000/v1/integrations/hello/installations/inst_f14dbd8b24f97380985d';
  const invoke = {
    name: 'hello',
    version: '1',
    code: `import { createIntegration } from '@switchyard/runtime';\nexport default createIntegration({ ${HELLO} });\n`,
    requestId: 'req_bench',
    envelope: {
      event: { type: 'fetch', request: { method: 'GET', url: endpoint, headers: [['host', '127.0.0.1:4000']] as Array<[string, string]> } },
      environment: {
        apiEndpoint: 'http://127.0.0.1:4000/api/v1',
        apiTokens: {
          installation: 'sy_inv_aW5zdF9mMTRkYmQ4YjI0Zjk3MzgwOTg1ZC4xNzk1NTUxNDI3.4nXRS-lDJSKz6BeonhDaMq81Duv2mFKlZ4_lrZwn8ww',
          integration: 'sy_int_aGVsbG8uMTc5NTU1MTQyNw.4nXRS-lDJSKz6BeonhDaMq81Duv2mFKlZ4_lrZwn8ww',
        },
        integration: {
          name: 'hello',
          title: 'Hello',
          description: 'Says hello',
          visibility: 'private',
          scopes: [],
          version: '1',
          urls: { publicEndpoint: endpoint, publicContentEndpoint: endpoint },
        },
        secrets: {},
        installation: {
          id: 'inst_f14dbd8b24f97380985d',
          target: 'organization',
          space_selection: { selection: 'all', spaces: [] },
          status: 'active',
          configuration: {},
          externalIds: [],
          urls: { publicEndpoint: endpoint },
        },
      },
    },
  };
  const once = async () => {
    const r = await host.invoke(invoke);
    if (r === 'need-code' || r.status !== 200) fail(`the hello invocation failed: ${JSON.stringify(r)}`);
  };
  for (let i = 0; i < 5000; i++) await once();
  const isolateNs = () => profiled.reduce((a, inst) => a + (inst.disposed ? 0n : inst.isolate.cpuTime), 0n);
  const g0 = isolateNs();
  const c0 = process.threadCpuUsage();
  let callMs = 0;
  for (let i = 0; i < GUEST_INVOCATIONS; i++) {
    let r = host.invoke(invoke); // answered synchronously when the instance is idle, as under load
    if (r instanceof Promise) r = await r;
    if (r !== 'need-code') callMs += r.cpuMs ?? 0; // inline: the thread's CPU time inside the calls
  }
  const c = process.threadCpuUsage(c0);
  const guestUs = Number(isolateNs() - g0) / 1000 / GUEST_INVOCATIONS;
  host.close();
  return { perInvocation: (c.user + c.system) / GUEST_INVOCATIONS, guestUs, callUs: (callMs * 1000) / GUEST_INVOCATIONS };
}

// ---------------------------------------------------------------------------------------------

async function main(): Promise<void> {
  tmp = mkdtempSync(join(tmpdir(), 'switchyard-stages-'));
  const plain = await startServe('unprofiled', false);
  const profiled = await startServe('profiled', true);
  process.stdout.write(
    `public endpoint stages: serve --processes 1 (hello), wrk -t1 -c${CONNECTIONS} -d${SECONDS}s, ${ROUNDS} rounds; profile every ${INTERVAL} µs\n`,
  );
  await wrk(plain, 2);
  await wrk(profiled, 2);
  const loads: Load[] = [];
  const windows: Array<[number, number]> = [];
  const rps: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    const order = round % 2 ? [profiled, plain] : [plain, profiled];
    for (const s of order) {
      const l = await wrk(s, SECONDS);
      if (s === plain) {
        loads.push(l);
        rps.push(l.rps);
      } else windows.push(l.window);
    }
    process.stdout.write(
      `  round ${round + 1}: ${loads.at(-1)!.cpuUs.toFixed(1)} µs CPU per request (serving process), ${loads.at(-1)!.rps.toFixed(0)} req/s\n`,
    );
  }
  await stopServe(plain);
  await stopServe(profiled);
  const perRequest = median(loads.map((l) => l.cpuUs));

  // The serving process's profile: the largest one in the directory (the supervisor's is small).
  const files = readdirSync(profiled.profDir!).filter((f) => f.endsWith('.cpuprofile'));
  if (!files.length) fail(`no profile in ${profiled.profDir}:\n${readFileSync(profiled.log, 'utf8')}`);
  const profiles = files
    .map((f) => JSON.parse(readFileSync(join(profiled.profDir!, f), 'utf8')) as Profile)
    .sort((a, b) => b.samples.length - a.samples.length);
  const { by, total, fns } = stagesOf(profiles[0], windows, stageOf);

  const guest = await guestSplit();

  const rows = [...by.entries()].sort((a, b) => b[1] - a[1]);
  console.log(`\nserving process: ${perRequest.toFixed(1)} µs CPU per request (median of ${ROUNDS}; ${median(rps).toFixed(0)} req/s on a shared core)`);
  console.log(`  ${'stage'.padEnd(64)}  µs/req  share`);
  for (const [stage, us] of rows) {
    const share = us / total;
    console.log(`  ${stage.padEnd(64)} ${(share * perRequest).toFixed(1).padStart(6)}  ${(share * 100).toFixed(1).padStart(5)}%`);
    if (TOP > 0) {
      const top = [...fns.get(stage)!.entries()].sort((a, b) => b[1] - a[1]).slice(0, TOP);
      for (const [f, fus] of top) console.log(`      ${f.slice(0, 90).padEnd(90)} ${((fus / total) * perRequest).toFixed(1).padStart(6)}`);
    }
    if (stage === CALL) {
      // In-process shares of the call: the isolate's own CPU time, and the rest of the call.
      const call = share * perRequest;
      const inGuest = call * (guest.guestUs / guest.callUs);
      console.log(`      ${"the guest's own work (isolate cpuTime: Request, handler, Response)".padEnd(60)} ${inGuest.toFixed(1).padStart(6)}`);
      console.log(`      ${'crossing (copies, time-out, entering; the call less the above)'.padEnd(60)} ${(call - inGuest).toFixed(1).padStart(6)}`);
    }
  }
  console.log(
    `  (the call split by ${GUEST_INVOCATIONS} in-process hello invocations through the sandbox host: ${guest.perInvocation.toFixed(1)} µs of CPU each, ` +
      `${guest.callUs.toFixed(1)} µs of it inside the calls into the guest, ${guest.guestUs.toFixed(1)} µs of that in the guest isolate)`,
  );
}

try {
  await main();
} catch (e) {
  process.stderr.write(`public-stages failed: ${(e as Error).message}\n`);
  process.exitCode = 1;
}
process.exit();
