import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { openStore } from '../src/store/index.ts';
import { join } from 'node:path';
import { configSchema, consoleUrlOf, defaultConfig, loadConfig, parseConfigText } from '../src/config/index.ts';
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

test('__proto__ is refused as an unknown key like constructor, at the top level and inside a section, with its position', () => {
  for (const [text, where, key] of [
    ['__proto__:\n  admin_token: abcdefghijklmnopqrstuvwxyz123456\n', 'c.yaml:1:1', '__proto__'],
    ['"__proto__": 1\n', 'c.yaml:1:1', '__proto__'],
    ['server:\n  port: 8080\n  __proto__:\n    port: 1234\n', 'c.yaml:3:3', 'server.__proto__'],
    ['webhooks:\n  __proto__: {timeout: 1s}\n', 'c.yaml:2:3', 'webhooks.__proto__'],
    ['constructor: 1\n', 'c.yaml:1:1', 'constructor'],
    ['server:\n  constructor: 1\n', 'c.yaml:2:3', 'server.constructor'],
  ] as const) {
    const err = problemsOf(() => parseConfigText(text, 'c.yaml', {}));
    assert.equal(err.code, 'config_invalid', text);
    assert.deepEqual(
      err.problems.map((p) => [p.where, p.message]),
      [[where, `${key}: unknown key "${key.split('.').pop()}"`]],
      text,
    );
  }
});

test('${{ env.NAME }} names a variable, never a member every object has: ${{ env.constructor }} is not set', () => {
  const err = problemsOf(() => parseConfigText('admin_token: "${{ env.constructor }}"\n', 'c.yaml', {}));
  assert.match(err.problems[0].message, /admin_token: environment variable constructor is not set/);
  assert.equal(parseConfigText('admin_token: "${{ env.constructor }}"\n', 'c.yaml', { constructor: '0123456789012345' }).admin_token, '0123456789012345');
});

test('${{ env.NAME }} is interpolated; a missing variable names the variable and the key', () => {
  const ok = parseConfigText('admin_token: ${{ env.TOKEN }}\n', 'c.yaml', { TOKEN: '0123456789012345' });
  assert.equal(ok.admin_token, '0123456789012345');
  const err = problemsOf(() => parseConfigText('log:\n  level: info\nadmin_token: "${{ env.NOPE }}"\n', 'c.yaml', {}));
  assert.equal(err.problems.length, 1);
  assert.match(err.problems[0].message, /admin_token: environment variable NOPE is not set/);
  assert.equal(err.problems[0].where, 'c.yaml:3:14');
});

test('a .env file beside config.yaml is read; the real environment wins', (t) => {
  const dir = tmpDir(t);
  writeFileSync(join(dir, 'config.yaml'), 'admin_token: ${{ env.A }}\ndata_dir: ${{ env.B }}\n');
  writeFileSync(join(dir, '.env'), '# comment\nA="from-dotenv-0123456"\nexport B=./state # trailing\n');
  const c = loadConfig({ path: join(dir, 'config.yaml'), env: { B: '/abs/state' } });
  assert.equal(c.admin_token, 'from-dotenv-0123456');
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

test('server.tls: the PEM paths resolve against the config file folder (env interpolated); public_url and console_url default to https; one without the other is refused', (t) => {
  const dir = tmpDir(t);
  writeFileSync(join(dir, 'config.yaml'), 'server:\n  tls:\n    cert: tls/${{ env.CERT }}\n    key: /etc/keys/server.key\n');
  const c = loadConfig({ path: join(dir, 'config.yaml'), env: { CERT: 'fullchain.pem' } });
  assert.deepEqual(c.server.tls, { cert: join(dir, 'tls/fullchain.pem'), key: '/etc/keys/server.key' });
  assert.equal(c.publicUrl, 'https://127.0.0.1:8787');
  assert.equal(consoleUrlOf(c), 'https://localhost:8787');
  assert.deepEqual(defaultConfig().server.tls, { cert: '', key: '' }, 'off by default');

  const err = problemsOf(() => parseConfigText('server:\n  tls:\n    cert: a.pem\n', 'c.yaml', {}));
  assert.equal(err.problems.length, 1);
  assert.match(err.problems[0].message, /server\.tls\.key: is empty while server\.tls\.cert is set/);
});

test('malformed YAML is reported with its position', () => {
  const err = problemsOf(() => parseConfigText('server:\n  port: [1,\n', 'c.yaml', {}));
  assert.match(err.problems[0].where, /^c\.yaml:\d+:\d+$/);
});

test('an explicit --config that does not exist is an error, not the defaults', () => {
  const err = problemsOf(() => loadConfig({ path: '/nonexistent/config.yaml' }));
  assert.match(err.message, /does not exist/);
});

test('values that would start a broken server are refused with their path: short or spaced tokens, absurd sizes, non-http URLs', () => {
  const messages = (text: string) => problemsOf(() => parseConfigText(text, 'c.yaml', {})).problems!.map((p) => `${p.where} ${p.message}`);
  assert.match(messages('admin_token: short\n')[0], /^c\.yaml:1:14 admin_token: "short" does not have the required form/);
  assert.match(messages('admin_token: "has spaces in the middle"\n')[0], /admin_token: .* does not have the required form/);
  assert.match(messages('server:\n  body_limit: 99999999999999999999999\n')[0], /^c\.yaml:2:15 server\.body_limit: .*too large for a size/);
  assert.match(messages('server:\n  body_limit: 2gb\n')[0], /server\.body_limit: must be at most 1073741824 bytes/);
  assert.match(messages('server:\n  public_url: "javascript:alert(1)"\n')[0], /server\.public_url: "javascript:alert\(1\)" must use http or https/);
  assert.match(messages('server:\n  public_url: "not a url"\n')[0], /server\.public_url: "not a url" is not a valid URL/);
  assert.equal(parseConfigText('server:\n  public_url: https://hooks.example.com\n', 'c.yaml', {}).server.public_url, 'https://hooks.example.com');
  // A heartbeat shorter than a long garbage collection would kill healthy processes.
  assert.match(messages('server:\n  heartbeat_timeout: 500ms\n')[0], /^c\.yaml:2:22 server\.heartbeat_timeout: must be at least 2s, got 500ms/);
  // A schedule croner cannot read is found with the rest of the file, not when the job starts.
  assert.match(messages('retention:\n  schedule: "every day"\n')[0], /^c\.yaml:2:13 retention\.schedule: "every day" is not a cron expression/);
  assert.equal(parseConfigText('retention:\n  schedule: "0 4 * * 1"\n', 'c.yaml', {}).retention.schedule, '0 4 * * 1');
  assert.equal(parseConfigText('server:\n  heartbeat_timeout: 3s\n', 'c.yaml', {}).server.heartbeat_timeout, 3000);
});

test('numbers and booleans may come from the environment, as the README says', () => {
  const c = parseConfigText('server:\n  port: "${{ env.P }}"\n  trust_proxy: ${{ env.T }}\nwebhooks:\n  allow_private_networks: "${{ env.A }}"\n', 'c.yaml', {
    P: '8080',
    T: 'true',
    A: 'false',
  });
  assert.equal(c.server.port, 8080);
  assert.equal(c.server.trust_proxy, 1);
  assert.equal(c.webhooks.allow_private_networks, false);
  assert.match(
    problemsOf(() => parseConfigText('server:\n  port: "${{ env.P }}"\n', 'c.yaml', { P: 'eighty' })).problems![0].message,
    /server\.port: must be a number, got the string "eighty"/,
  );
});

test('hostile YAML is a clear error with a position, never a crash: recursive aliases and alias bombs', () => {
  const recursive = problemsOf(() => parseConfigText('a: &a [*a]\nserver: *a\n', 'c.yaml', {}));
  assert.match(recursive.problems![0].message, /a\[0\]: an alias refers to a node that contains it/);
  assert.equal(recursive.problems![0].where, 'c.yaml:1:8');
  let bomb = 'a: &a ["x","x","x","x","x","x","x","x","x"]\n';
  let prev = 'a';
  for (const n of 'bcdefghi') {
    bomb += `${n}: &${n} [${Array(9).fill(`*${prev}`).join(',')}]\n`;
    prev = n;
  }
  assert.match(problemsOf(() => parseConfigText(bomb, 'c.yaml', {})).problems![0].message, /too many aliases/);
  // Shared (not recursive) aliases stay fine.
  assert.equal(parseConfigText('webhooks:\n  concurrency: &c 8\n  per_endpoint_concurrency: *c\n', 'c.yaml', {}).webhooks.per_endpoint_concurrency, 8);
});

test('--config naming a folder, and a data_dir that cannot be made, are one-line errors', (t) => {
  const dir = tmpDir(t);
  assert.match(problemsOf(() => loadConfig({ path: dir })).message, /config path .* is not a file/);
  // Node's recursive mkdir spins forever under /proc; the store makes one level at a time.
  if (existsSync('/proc/1')) assert.equal(problemsOf(() => openStore('/proc/1/switchyard-nope/data')).code, 'data_dir_unwritable');
});

/** Every leaf key of the config schema, dotted (`server.port`, `store`, `gitbook.api_url`). */
function schemaKeys(schema: unknown, prefix = ''): string[] {
  const shape = (schema as { kind?: string; shape?: Record<string, unknown> }).shape;
  if ((schema as { kind?: string }).kind !== 'object' || !shape) return [prefix];
  return Object.entries(shape).flatMap(([k, sub]) => schemaKeys(sub, prefix ? `${prefix}.${k}` : k));
}

test("every key is in the shipped config.yaml (an optional one commented out, with an example) and in docs/configuration.md's table", () => {
  const keys = schemaKeys(configSchema);
  assert.ok(keys.includes('store') && keys.includes('gitbook.api_url') && keys.includes('server.port'));
  const lines = readFileSync(join(ROOT, 'config.yaml'), 'utf8').split('\n');
  const docs = readFileSync(join(ROOT, 'docs/configuration.md'), 'utf8');
  const missing: string[] = [];
  for (const key of keys) {
    const path = key.split('.');
    // The key's line, under its section's line when it has one (indented two spaces per level).
    let from = 0;
    for (let depth = 0; depth < path.length; depth++) {
      const indent = '  '.repeat(depth);
      const at = lines.findIndex((l, i) => i >= from && new RegExp(`^${indent}(# )?${path[depth]}:`).test(l));
      if (at < 0) {
        missing.push(`config.yaml: ${key}`);
        break;
      }
      from = at + 1;
    }
    if (!docs.includes(`| \`${key}\` |`)) missing.push(`docs/configuration.md: ${key}`);
  }
  assert.deepEqual(missing, []);
});
