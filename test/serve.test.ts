import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { runCli, spawnCli, startTestServer, tmpDir } from './helpers/index.ts';
import { VERSION } from '../src/version.ts';

test('GET /healthz reports version, uptime and store', async (t) => {
  const server = await startTestServer(t);
  const res = await fetch(`${server.url}/healthz`);
  assert.equal(res.status, 200);
  const body = (await res.json()) as any;
  assert.equal(body.version, VERSION);
  assert.equal(body.store, 'ok');
  assert.equal(typeof body.uptime_s, 'number');
});

test('/api/v1 refuses a missing or wrong token with the JSON error shape', async (t) => {
  const server = await startTestServer(t);
  const none = await fetch(`${server.url}/api/v1/anything`);
  assert.equal(none.status, 401);
  assert.equal(((await none.json()) as any).error.code, 'unauthorized');
  const wrong = await server.api('GET', '/api/v1/anything', undefined, 'nope');
  assert.equal(wrong.status, 401);
  assert.match(wrong.body.error.message, /not valid/);
});

test('--version and --help work at every level', async () => {
  const v = await runCli(['--version']);
  assert.equal(v.stdout.trim(), VERSION);
  const h = await runCli(['serve', '--help']);
  assert.equal(h.code, 0);
  assert.match(h.stdout, /switchyard serve/);
  const none = await runCli([]);
  assert.equal(none.code, 2);
});

test('serve starts on the given config and stops cleanly on SIGTERM', async (t) => {
  const dir = tmpDir(t);
  writeFileSync(join(dir, 'config.yaml'), `server:\n  port: 0\ndata_dir: ./data\nlog:\n  format: json\n`);
  const { child, match, output } = await spawnCli(t, ['serve', '--config', join(dir, 'config.yaml')], /"url":"(http:\/\/127\.0\.0\.1:\d+)"/, { cwd: dir });
  const health = await fetch(`${match[1]}/healthz`);
  assert.equal(health.status, 200);
  // The start line says where the generated admin token is (a path, not the token: never redacted away).
  assert.ok(output().includes(`"admin_credential":"${join(dir, 'data', 'admin-token')}"`), output());
  child.kill('SIGTERM');
  const code = await new Promise((r) => child.on('exit', r));
  assert.equal(code, 0);
});

test('bad input ends serve with one clear message and exit code 2, never a stack', async (t) => {
  const dir = tmpDir(t);
  // malformed config
  writeFileSync(join(dir, 'bad.yaml'), 'server:\n  port: "eighty"\n  colour: blue\n');
  const bad = await runCli(['serve', '--config', join(dir, 'bad.yaml')], { cwd: dir });
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /bad\.yaml:2:9: server\.port: must be a number/);
  assert.match(bad.stderr, /bad\.yaml:3:3: server\.colour: unknown key/);
  assert.doesNotMatch(bad.stderr, /\n\s+at /);

  // a data directory that cannot be written (a path below a regular file)
  writeFileSync(join(dir, 'file'), 'x');
  writeFileSync(join(dir, 'nodir.yaml'), `server:\n  port: 0\ndata_dir: ${join(dir, 'file', 'data')}\n`);
  const nodir = await runCli(['serve', '--config', join(dir, 'nodir.yaml')], { cwd: dir });
  assert.equal(nodir.code, 2);
  assert.match(nodir.stderr, /data directory .* cannot be written/);
  assert.doesNotMatch(nodir.stderr, /\n\s+at /);

  // a port in use
  const blocker = createServer().listen(0, '127.0.0.1');
  await new Promise((r) => blocker.once('listening', r));
  t.after(() => blocker.close());
  const port = (blocker.address() as { port: number }).port;
  writeFileSync(join(dir, 'busy.yaml'), `server:\n  port: ${port}\ndata_dir: ./busy\n`);
  const busy = await runCli(['serve', '--config', join(dir, 'busy.yaml')], { cwd: dir });
  assert.equal(busy.code, 2);
  assert.match(busy.stderr, new RegExp(`port ${port} on 127\\.0\\.0\\.1 is already in use`));
  assert.doesNotMatch(busy.stderr, /\n\s+at /);
});

test('a second serve on the same data directory is refused', async (t) => {
  const dir = tmpDir(t);
  writeFileSync(join(dir, 'config.yaml'), `server:\n  port: 0\ndata_dir: ./data\n`);
  await spawnCli(t, ['serve'], /switchyard serving/, { cwd: dir });
  const second = await runCli(['serve'], { cwd: dir });
  assert.equal(second.code, 2);
  assert.match(second.stderr, /another switchyard server \(pid \d+\) is using data directory/);
});
