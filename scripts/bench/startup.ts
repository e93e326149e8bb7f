/**
 * Start-up at scale: how long a (re)start of `switchyard serve` keeps public endpoints from
 * answering, and what loaded integrations cost in memory. Run:
 *
 *   node_modules/.bin/node --no-node-snapshot scripts/bench/startup.ts
 *   BENCH_EXECUTABLE=dist/switchyard node_modules/.bin/node --no-node-snapshot scripts/bench/startup.ts
 *
 * The real command as a user starts it (`node --no-node-snapshot src/main.ts serve`, or the single
 * executable named by BENCH_EXECUTABLE after `npm run build`), its default number of serving
 * processes, a temp data directory, and BENCH_SIZES (default 10,100,500) copies of a one-line hello
 * integration (`fetch: async () => new Response('hello <i>')`), each installed once through the API
 * before the rounds. Per size, BENCH_ROUNDS (default 3) starts with a cold bundle cache (the data
 * directory's cache/ removed) and as many warm ones (nothing changed since the last start), taken
 * in turn. Each start is timed from spawn to:
 *   - /healthz: the first 200 (liveness: the server listens);
 *   - first 200: the first 200 from the public endpoint of the last integration in name order (the
 *     last to load when nothing asks for it), polled every 5 ms on fresh connections;
 *   - /readyz: the first 200 (every integration loaded in every serving process).
 * Memory: the RSS of the whole process tree (supervisor, serving processes, anything they started)
 * 1 s after /readyz of every warm start ("idle", median), and, on the last warm start, 1 s after
 * one request to every installation's public endpoint ("after one invocation each"). Per idle
 * loaded integration: the slope of idle RSS between the smallest and the largest size (an idle
 * start already ran one invocation, the timed first 200, whose isolate and store pages every size
 * pays once: the slope leaves that out); per integration invoked: (after - idle) / N, its warm
 * isolate in the serving process that took the request.
 *
 * Goals: warm start to first 200 with 100 integrations < 1 s, with 500 < 3 s; < 2 MB of memory per
 * idle loaded integration. Medians of the rounds and their ratio to the goal are printed. The
 * machine is shared: compare medians, and run again when a figure looks off.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { median, setting, writeHelloIntegration } from './common.ts';

const ROUNDS = setting('BENCH_ROUNDS', 3);
const SIZES = (process.env.BENCH_SIZES ?? '10,100,500').split(',').map((s) => {
  const n = Number(s.trim());
  if (!Number.isInteger(n) || n <= 0) {
    process.stderr.write(`BENCH_SIZES=${process.env.BENCH_SIZES}: a comma-separated list of positive whole numbers (default 10,100,500)\n`);
    process.exit(2);
  }
  return n;
});
const ROOT = new URL('../../', import.meta.url).pathname;
const EXECUTABLE = process.env.BENCH_EXECUTABLE ? resolve(process.env.BENCH_EXECUTABLE) : undefined;
const TOKEN = 'bench-admin-token-0123456789';
const GOALS: Record<number, number> = { 100: 1000, 500: 3000 };
const MEMORY_GOAL_MB = 2;
const TIMEOUT_MS = 120_000;

const command = (config: string): [string, string[]] =>
  EXECUTABLE ? [EXECUTABLE, ['serve', '--config', config]] : [process.execPath, ['--no-node-snapshot', join(ROOT, 'src/main.ts'), 'serve', '--config', config]];

function freePort(): Promise<number> {
  return new Promise((res, rej) => {
    const s = net.createServer();
    s.once('error', rej);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => res(port));
    });
  });
}

/** A folder with `n` hello integrations (hello-0001 ...) and a config on `port`. */
function workspace(n: number, port: number): { dir: string; config: string; names: string[] } {
  const dir = mkdtempSync(join(tmpdir(), 'switchyard-bench-startup-'));
  const names: string[] = [];
  for (let i = 1; i <= n; i++) {
    const name = `hello-${String(i).padStart(4, '0')}`;
    names.push(name);
    writeHelloIntegration(join(dir, 'integrations'), name, `fetch: async () => new Response('hello ${i}')`, `Hello ${i}`);
  }
  mkdirSync(join(dir, 'integrations'), { recursive: true });
  const config = join(dir, 'config.yaml');
  writeFileSync(
    config,
    `server:\n  port: ${port}\ndata_dir: ./data\nintegrations_dir: ./integrations\nadmin_token: ${TOKEN}\nlog:\n  format: json\n  level: warn\n`,
  );
  return { dir, config, names };
}

/** One request on a fresh connection: its status, or 0 when nothing answered. */
function hit(url: string, method = 'GET'): Promise<number> {
  return new Promise((res) => {
    const req = http.request(url, { method, agent: false }, (r) => {
      r.resume();
      r.on('end', () => res(r.statusCode ?? 0));
      r.on('error', () => res(0));
    });
    req.on('error', () => res(0));
    req.setTimeout(30_000, () => req.destroy());
    req.end();
  });
}

/** Poll until `url` answers 200: ms since `t0`. */
async function until200(url: string, t0: number, method = 'GET', stop: () => boolean = () => false): Promise<number> {
  for (;;) {
    if ((await hit(url, method)) === 200) return performance.now() - t0;
    if (stop()) throw new Error(`the server stopped before ${url} answered 200`);
    if (performance.now() - t0 > TIMEOUT_MS) throw new Error(`no 200 from ${url} after ${TIMEOUT_MS} ms`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

function start(config: string, cwd: string): { child: ChildProcess; t0: number; exited: () => boolean; output: () => string } {
  const [cmd, args] = command(config);
  let out = '';
  const t0 = performance.now();
  const child = spawn(cmd, args, { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  return { child, t0, exited: () => child.exitCode !== null || child.signalCode !== null, output: () => out };
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const done = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  await done;
}

/** RSS of a process and every process below it, in bytes (from /proc). */
function treeRss(pid: number): number {
  const parents = new Map<number, number>();
  for (const e of readdirSync('/proc')) {
    if (!/^\d+$/.test(e)) continue;
    try {
      const stat = readFileSync(`/proc/${e}/stat`, 'utf8');
      parents.set(Number(e), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
    } catch {
      /* gone */
    }
  }
  const tree = new Set([pid]);
  for (let grew = true; grew; ) {
    grew = false;
    for (const [p, pp] of parents) if (!tree.has(p) && tree.has(pp)) tree.add(p), (grew = true);
  }
  let kb = 0;
  for (const p of tree) {
    try {
      kb += Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${p}/status`, 'utf8'))?.[1] ?? 0);
    } catch {
      /* gone */
    }
  }
  return kb * 1024;
}

const api = async (base: string, method: string, path: string, body?: unknown) => {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const json = (await res.json()) as any;
  if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(json)}`);
  return json;
};

const mb = (b: number) => b / 1024 / 1024;
const sec = (ms: number) => `${(ms / 1000).toFixed(2)} s`;

interface Start {
  healthz: number;
  first: number;
  ready: number;
}

async function timedStart(ws: { dir: string; config: string }, base: string, endpoint?: string): Promise<{ times: Start; child: ChildProcess }> {
  const s = start(ws.config, ws.dir);
  try {
    const [healthz, first, ready] = await Promise.all([
      until200(`${base}/healthz`, s.t0, 'GET', s.exited),
      endpoint ? until200(endpoint, s.t0, 'POST', s.exited) : Promise.resolve(0),
      until200(`${base}/readyz`, s.t0, 'GET', s.exited),
    ]);
    return { times: { healthz, first, ready }, child: s.child };
  } catch (e) {
    await stop(s.child);
    throw new Error(`${(e as Error).message}\n${s.output().slice(-2000)}`);
  }
}

async function main(): Promise<void> {
  console.log(
    `start-up benchmark: ${EXECUTABLE ? `the executable ${EXECUTABLE}` : 'node src/main.ts'} serve (default processes), sizes ${SIZES.join(', ')}, ${ROUNDS} cold and ${ROUNDS} warm starts each, Node ${process.version}`,
  );
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;

  // Memory with no integration at all: what the per-integration figures are measured against.
  const empty = workspace(0, port);
  const e = await timedStart(empty, base);
  await new Promise((r) => setTimeout(r, 1000));
  const emptyRss = treeRss(e.child.pid!);
  await stop(e.child);
  rmSync(empty.dir, { recursive: true, force: true });
  console.log(`idle RSS with 0 integrations: ${mb(emptyRss).toFixed(1)} MB (supervisor and serving processes)`);
  console.log(`${'integrations'.padEnd(13)}${'cache'.padEnd(7)}${'/healthz'.padEnd(11)}${'first 200'.padEnd(11)}${'/readyz'.padEnd(11)}goal (first 200)`);

  const summary: string[] = [];
  const idleBySize = new Map<number, number>();
  for (const n of SIZES) {
    const ws = workspace(n, port);
    try {
      // Installations, made once through the API (they live in the store across starts).
      const setup = start(ws.config, ws.dir);
      await until200(`${base}/readyz`, setup.t0, 'GET', setup.exited);
      const endpoints: string[] = [];
      for (const name of ws.names) endpoints.push((await api(base, 'POST', '/api/v1/installations', { integration: name })).installation.urls.publicEndpoint);
      await stop(setup.child);
      const last = endpoints.at(-1)!;

      const cold: Start[] = [];
      const warm: Start[] = [];
      let lastWarm: ChildProcess | undefined;
      const idles: number[] = [];
      for (let round = 0; round < ROUNDS; round++) {
        rmSync(join(ws.dir, 'data', 'cache'), { recursive: true, force: true });
        const c = await timedStart(ws, base, last);
        cold.push(c.times);
        await stop(c.child);
        const w = await timedStart(ws, base, last);
        warm.push(w.times);
        await new Promise((r) => setTimeout(r, 1000));
        idles.push(treeRss(w.child.pid!));
        if (round < ROUNDS - 1) await stop(w.child);
        else lastWarm = w.child;
      }
      for (const [label, starts] of [
        ['cold', cold],
        ['warm', warm],
      ] as const) {
        const m = (k: keyof Start) => median(starts.map((s) => s[k]));
        const goal = GOALS[n];
        const ratio = label === 'warm' && goal ? `< ${sec(goal)}: ratio ${(m('first') / goal).toFixed(2)} ${m('first') < goal ? 'met' : 'NOT met'}` : '';
        console.log(
          `${String(n).padEnd(13)}${label.padEnd(7)}${sec(m('healthz')).padEnd(11)}${sec(m('first')).padEnd(11)}${sec(m('ready')).padEnd(11)}${ratio}`,
        );
        console.log(
          `${''.padEnd(20)}rounds: first 200 [${starts.map((s) => sec(s.first)).join(', ')}], /readyz [${starts.map((s) => sec(s.ready)).join(', ')}]`,
        );
        if (label === 'warm' && goal)
          summary.push(`warm start to first 200, ${n} integrations: ${sec(m('first'))} (goal < ${sec(goal)}, ratio ${(m('first') / goal).toFixed(2)})`);
      }

      // Memory: idle (median of the warm starts), then one invocation each on the last one.
      const idle = median(idles);
      const lastIdle = idles.at(-1)!;
      idleBySize.set(n, idle);
      for (const url of endpoints) {
        const status = await hit(url, 'POST');
        if (status !== 200) throw new Error(`${url} answered ${status}`);
      }
      await new Promise((r) => setTimeout(r, 1000));
      const after = treeRss(lastWarm!.pid!);
      await stop(lastWarm!);
      const perInvoked = mb(after - lastIdle) / n;
      console.log(
        `${''.padEnd(20)}RSS idle ${mb(idle).toFixed(1)} MB (rounds [${idles.map((x) => mb(x).toFixed(1)).join(', ')}]); after one invocation each ${mb(after).toFixed(1)} MB: +${perInvoked.toFixed(2)} MB per integration invoked (its warm isolate)`,
      );
      summary.push(
        `${n} integrations: RSS idle ${mb(idle).toFixed(1)} MB (${mb(emptyRss).toFixed(1)} MB with none), +${perInvoked.toFixed(2)} MB per integration once invoked (a warm isolate)`,
      );
    } finally {
      rmSync(ws.dir, { recursive: true, force: true });
    }
  }
  if (SIZES.length > 1) {
    const lo = Math.min(...SIZES);
    const hi = Math.max(...SIZES);
    const slope = mb(idleBySize.get(hi)! - idleBySize.get(lo)!) / (hi - lo);
    summary.push(
      `memory per idle loaded integration, from ${lo} to ${hi}: ${slope.toFixed(3)} MB (goal < ${MEMORY_GOAL_MB} MB: ratio ${(slope / MEMORY_GOAL_MB).toFixed(2)} ${slope < MEMORY_GOAL_MB ? 'met' : 'NOT met'})`,
    );
  }
  console.log('\nsummary (medians):');
  for (const s of summary) console.log(`  ${s}`);
}

await main();
