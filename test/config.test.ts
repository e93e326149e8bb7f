import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { defaultConfig, loadConfig, parseConfigText } from '../src/config/index.ts';
import { SwitchyardError } from '../src/errors.ts';
import { parseDotenv } from '../src/config/env.ts';
import { ROOT, tmpDir } from './helpers/index.ts';

function problemsOf(fn: () => unknown): SwitchyardError {
  try {
    fn();
  } catch (e) {
    assert.ok(e instanceof SwitchyardError, `expected SwitchyardError, got ${e}`);
    return e;
  }
  assert.fail('expected an error');
}

test('the shipped config.yaml equals the embedded defaults', () => {
  const shipped = parseConfigText(readFileSync(join(ROOT, 'config.yaml'), 'utf8'), 'config.yaml', {});
  assert.deepEqual(shipped, defaultConfig());
});

test('defaults carry the spec retry schedule and Workers-style sandbox limits', () => {
  const c = defaultConfig();
  assert.equal(c.webhooks.max_retries, 3);
  assert.equal(c.webhooks.base_delay, 1000);
  assert.equal(c.webhooks.jitter, 0.1);
  assert.equal(c.webhooks.timeout, 10_000);
  assert.equal(c.sandbox.memory_mb, 128);
  assert.equal(c.webhooks.allow_private_networks, false);
});

test('durations and sizes are parsed into ms and bytes', () => {
  const c = parseConfigText('webhooks:\n  timeout: 2m\nserver:\n  body_limit: 512kb\nsandbox:\n  cpu_time: 250ms\n', 'c.yaml', {});
  assert.equal(c.webhooks.timeout, 120_000);
  assert.equal(c.server.body_limit, 512 * 1024);
  assert.equal(c.sandbox.cpu_time, 250);
});

test('every problem is reported at once with key path, line and column', () => {
  const text = ['server:', '  port: 99999', '  hostt: x', 'webhooks:', '  timeout: soon', 'log:', '  format: xml', ''].join('\n');
  const err = problemsOf(() => parseConfigText(text, 'bad.yaml', {}));
  assert.equal(err.code, 'config_invalid');
  const byWhere = Object.fromEntries(err.problems.map((p) => [p.where, p]));
  assert.match(byWhere['bad.yaml:2:9'].message, /server\.port: must be at most 65535/);
  assert.match(byWhere['bad.yaml:3:3'].message, /server\.hostt: unknown key "hostt"/);
  assert.equal(byWhere['bad.yaml:3:3'].hint, 'did you mean "host"?');
  assert.match(byWhere['bad.yaml:5:12'].message, /webhooks\.timeout: must be a duration/);
  assert.match(byWhere['bad.yaml:7:11'].message, /log\.format: .*expected one of/);
  assert.equal(err.problems.length, 4);
});

test('an unknown top-level key gets a did-you-mean hint', () => {
  const err = problemsOf(() => parseConfigText('webhook:\n  timeout: 1s\n', 'c.yaml', {}));
  assert.equal(err.problems[0].hint, 'did you mean "webhooks"?');
});

test('${{ env.NAME }} is interpolated; a missing variable names the variable and the key', () => {
  const ok = parseConfigText('admin_token: ${{ env.TOKEN }}\n', 'c.yaml', { TOKEN: 'abc' });
  assert.equal(ok.admin_token, 'abc');
  const err = problemsOf(() => parseConfigText('log:\n  level: info\nadmin_token: "${{ env.NOPE }}"\n', 'c.yaml', {}));
  assert.equal(err.problems.length, 1);
  assert.match(err.problems[0].message, /admin_token: environment variable NOPE is not set/);
  assert.equal(err.problems[0].where, 'c.yaml:3:14');
});

test('a .env file beside config.yaml is read; the real environment wins', (t) => {
  const dir = tmpDir(t);
  writeFileSync(join(dir, 'config.yaml'), 'admin_token: ${{ env.A }}\ndata_dir: ${{ env.B }}\n');
  writeFileSync(join(dir, '.env'), '# comment\nA="from-dotenv"\nexport B=./state # trailing\n');
  const c = loadConfig({ path: join(dir, 'config.yaml'), env: { B: '/abs/state' } });
  assert.equal(c.admin_token, 'from-dotenv');
  assert.equal(c.data_dir, '/abs/state');
  assert.deepEqual(parseDotenv("X='a b'\nY=1"), { X: 'a b', Y: '1' });
});

test('relative directories resolve against the config file folder', (t) => {
  const dir = tmpDir(t);
  writeFileSync(join(dir, 'config.yaml'), 'data_dir: ./d\n');
  const c = loadConfig({ path: join(dir, 'config.yaml'), env: {} });
  assert.equal(c.data_dir, join(dir, 'd'));
  assert.equal(c.integrations_dir, join(dir, 'integrations'));
  assert.equal(c.publicUrl, 'http://127.0.0.1:8787');
});

test('malformed YAML is reported with its position', () => {
  const err = problemsOf(() => parseConfigText('server:\n  port: [1,\n', 'c.yaml', {}));
  assert.match(err.problems[0].where, /^c\.yaml:\d+:\d+$/);
});

test('an explicit --config that does not exist is an error, not the defaults', () => {
  const err = problemsOf(() => loadConfig({ path: '/nonexistent/config.yaml' }));
  assert.match(err.message, /does not exist/);
});
