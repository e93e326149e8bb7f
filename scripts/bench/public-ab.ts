/**
 * Two builds of the public endpoint compared, paired: how the commits' "A/B" figures were taken.
 *
 *   git worktree add /tmp/base <commit> && ln -s "$PWD/node_modules" /tmp/base/node_modules
 *   node_modules/.bin/node --no-node-snapshot scripts/bench/public-ab.ts /tmp/base .
 *
 * Settings (environment): BENCH_ROUNDS (default 8), BENCH_SECONDS (per wrk run, default 3).
 * Needs `wrk` and `taskset` on PATH, Node 24 and 2 CPUs.
 *
 * Each tree runs `switchyard serve --processes 1` with the hello integration, installed with
 * `switchyard install hello --json`; both servers are pinned to CPU 0 and loaded in turn (order
 * reversed every other round) by wrk -t1 -c32 pinned to CPU 1 on the installation's public
 * endpoint. Per run: the serving process's CPU per request (utime + stime from /proc). Printed: each
 * round's pair and its ratio (second / first), the medians, and the median of the paired ratios,
 * which is what to read: this machine's speed drifts by tens of percent within the hour, and a pair
 * taken a few seconds apart shares the drift.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { closeSync, existsSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { median, setting, writeHelloIntegration } from './common.ts';

const ROUNDS = setting('BENCH_ROUNDS', 8);
const SECONDS = setting('BENCH_SECONDS', 3);
const trees = process.argv.slice(2).map((t) => resolve(t));
if (trees.length !== 2 || trees.some((t) => !existsSync(join(t, 'src/main.ts')))) {
  process.stderr.write('usage: public-ab.ts <first tree> <second tree> (each a checkout with src/main.ts and node_modules)\n');
  process.exit(2);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const TICKS = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim()) || 100;
const ticks = (pid: number) => {
  const s = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
  return Number(f[11]) + Number(f[12]);
};
const freePort = () =>
  new Promise<number>((res, rej) => {
    const s = net.createServer();
    s.once('error', rej);
    s.listen(0, '127.0.0.1', () => {
      const p = (s.address() as net.AddressInfo).port;
      s.close(() => res(p));
    });
  });
const run = (cwd: string, cmd: string, args: string[]) =>
  new Promise<string>((res, rej) => {
    const c = spawn(cmd, args, { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    c.stdout!.on('data', (d) => (out += d));
    c.stderr!.on('data', (d) => (out += d));
    c.once('error', rej);
    c.once('close', (code) => (code === 0 ? res(out) : rej(new Error(`${cmd} ${args.join(' ')} exited with ${code}:\n${out}`))));
  });

const tmp = mkdtempSync(join(tmpdir(), 'switchyard-public-ab-'));
const children: ChildProcess[] = [];
process.on('exit', () => {
  for (const c of children)
    try {
      process.kill(-c.pid!, 'SIGKILL');
    } catch {
      /* gone */
    }
  rmSync(tmp, { recursive: true, force: true });
});

async function start(tree: string, i: number): Promise<{ endpoint: string; pid: number }> {
  const dir = join(tmp, `s${i}`);
  writeHelloIntegration(join(dir, 'integrations'), 'hello', `fetch: () => new Response('hello')`);
  const port = await freePort();
  const config = join(dir, 'config.yaml');
  writeFileSync(
    config,
    `server:\n  host: 127.0.0.1\n  port: ${port}\n  shutdown_timeout: 2s\ndata_dir: ${JSON.stringify(join(dir, 'data'))}\nintegrations_dir: ${JSON.stringify(join(dir, 'integrations'))}\nadmin_token: bench-public-ab-admin-token\n`,
  );
  const log = join(dir, 'serve.log');
  const fd = openSync(log, 'w');
  // taskset execs node in place: the child's pid is the serving process's (--processes 1).
  const child = spawn('taskset', ['-c', '0', process.execPath, '--no-node-snapshot', 'src/main.ts', 'serve', '--processes', '1', '--config', config], {
    cwd: tree,
    detached: true,
    stdio: ['ignore', fd, fd],
  });
  closeSync(fd);
  children.push(child);
  for (let t = 0; ; t++) {
    if (child.exitCode !== null) throw new Error(`${tree}: serve exited:\n${readFileSync(log, 'utf8')}`);
    try {
      if ((await fetch(`http://127.0.0.1:${port}/healthz`)).status === 200) break;
    } catch {
      /* not yet */
    }
    if (t > 600) throw new Error(`${tree}: no /healthz in 60 s`);
    await sleep(100);
  }
  const installed = JSON.parse(await run(tree, process.execPath, ['--no-node-snapshot', 'src/main.ts', 'install', 'hello', '--config', config, '--json']));
  const endpoint: string = installed.installation.urls.publicEndpoint;
  for (let t = 0; ; t++) {
    const r = await fetch(endpoint);
    if (r.status === 200 && (await r.text()) === 'hello') break;
    if (t > 100) throw new Error(`${endpoint} does not answer hello`);
    await sleep(100);
  }
  return { endpoint, pid: child.pid! };
}

async function cpuPerRequest(s: { endpoint: string; pid: number }, seconds: number): Promise<number> {
  const t0 = ticks(s.pid);
  const out = await run('/', 'taskset', ['-c', '1', 'wrk', '-t1', '-c32', `-d${seconds}s`, s.endpoint]);
  const n = Number(/(\d+) requests in/.exec(out)?.[1]);
  if (!n || /Non-2xx/.test(out)) throw new Error(`wrk on ${s.endpoint}:\n${out}`);
  return (((ticks(s.pid) - t0) / TICKS) * 1e6) / n;
}

const servers = [await start(trees[0], 0), await start(trees[1], 1)];
for (const s of servers) await cpuPerRequest(s, 2); // warm-up
const per: number[][] = [[], []];
console.log(`public endpoint, paired: ${trees[0]} (first) against ${trees[1]} (second); wrk -t1 -c32 -d${SECONDS}s, ${ROUNDS} rounds`);
for (let r = 0; r < ROUNDS; r++) {
  for (const i of r % 2 ? [1, 0] : [0, 1]) per[i].push(await cpuPerRequest(servers[i], SECONDS));
  console.log(`  round ${r + 1}: ${per[0][r].toFixed(1)} / ${per[1][r].toFixed(1)} µs a request, ratio ${(per[1][r] / per[0][r]).toFixed(3)}`);
}
console.log(
  `medians: ${median(per[0]).toFixed(1)} / ${median(per[1]).toFixed(1)} µs a request; median of the paired ratios (second / first): ${median(per[1].map((v, i) => v / per[0][i])).toFixed(3)}`,
);
process.exit(0);
