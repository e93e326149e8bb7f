/**
 * GitBook compatibility: integrations written in GitBook's shape (gitbook-manifest.yaml,
 * '@gitbook/runtime', GitBook's API client and installation model) load unchanged and run end to
 * end against a real server. The fixtures in test/fixtures/gitbook are our own code in that shape.
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { cpSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { encodeEnvelope } from '../src/runtime/index.ts';
import { ROOT, runCli, startTestServer, tmpDir, type TestServer } from './helpers/index.ts';

const FIXTURES = join(ROOT, 'test/fixtures/gitbook');

/** A copy of the GitBook fixtures, with a stand-in of the npm `@gitbook/runtime` installed in each. */
function gitbookFolder(t: TestContext): string {
  const dir = tmpDir(t);
  cpSync(FIXTURES, dir, { recursive: true });
  for (const name of ['gb-analytics']) {
    // The real package is a Worker entry point: bundled, it answers every request with a
    // ReferenceError. This stand-in fails louder; the bundler must never pick it up.
    const pkg = join(dir, name, 'node_modules/@gitbook/runtime');
    mkdirSync(pkg, { recursive: true });
    writeFileSync(join(pkg, 'package.json'), JSON.stringify({ name: '@gitbook/runtime', type: 'module', exports: { '.': './index.js', './jsx-runtime': './index.js' } }));
    writeFileSync(join(pkg, 'index.js'), "throw new Error('the npm @gitbook/runtime package was bundled');\n");
  }
  return dir;
}

/** A working folder whose config.yaml gives `check` room to start an isolate on a busy machine. */
function roomyCwd(t: TestContext): string {
  const cwd = tmpDir(t);
  writeFileSync(join(cwd, 'config.yaml'), 'sandbox:\n  cpu_time: 5s\n  startup_time: 15s\n');
  return cwd;
}

function envelope(s: TestServer, name: string, body: Parameters<typeof encodeEnvelope>[0]) {
  return fetch(`${s.url}/v1/integrations/${name}`, { method: 'POST', headers: { authorization: `Bearer ${s.token}` }, body: encodeEnvelope(body) });
}

test('check: a gitbook-manifest.yaml folder importing @gitbook/runtime passes unchanged, saying what will not run here', async (t) => {
  const dir = gitbookFolder(t);
  const r = await runCli(['check', join(dir, 'gb-analytics'), '--json'], { cwd: roomyCwd(t) });
  const j = JSON.parse(r.stdout);
  assert.equal(r.code, 0, JSON.stringify(j.errors));
  assert.equal(j.ok, true);
  assert.equal(j.name, 'GB-Analytics');
  assert.deepEqual(j.sandbox.exports.unsupported.map((u: any) => u.handler), ['fetch_published_script']);
  const warnings = j.warnings.map((w: any) => `${w.where.split('/').pop()} ${w.message}`).join('\n');
  assert.match(warnings, /gitbook-manifest\.yaml:\d+:\d+ scopes\[1\]: "site:script:inject" is an internal scope here/);
  assert.match(warnings, /gitbook-manifest\.yaml:\d+:\d+ icon: "\.\/assets\/icon\.png" is a JPEG image with a \.png name/);
  assert.match(warnings, /fetch_published_script: not supported here, its invocations are answered 501: injecting scripts/);
});

test('check: the spec\'s platform-manifest.yaml keeps its stricter rules (internal scopes, lowercase names)', async (t) => {
  const dir = gitbookFolder(t);
  const folder = join(dir, 'gb-analytics');
  const { readFileSync, renameSync } = await import('node:fs');
  renameSync(join(folder, 'gitbook-manifest.yaml'), join(folder, 'platform-manifest.yaml'));
  const r = await runCli(['check', folder, '--json'], { cwd: roomyCwd(t) });
  const j = JSON.parse(r.stdout);
  assert.equal(r.code, 1);
  const errors = j.errors.map((e: any) => e.message).join('\n');
  assert.match(errors, /name: "GB-Analytics" does not have the required form/);
  assert.match(errors, /"site:script:inject" is an internal scope: integrations cannot inject scripts/);
  assert.ok(readFileSync(join(folder, 'platform-manifest.yaml'), 'utf8').includes('GB-Analytics'));
});

test('createIntegration: an unknown key is a load error naming it and the nearest known key', async (t) => {
  const dir = gitbookFolder(t);
  const file = join(dir, 'gb-analytics/src/index.ts');
  const { readFileSync } = await import('node:fs');
  writeFileSync(file, readFileSync(file, 'utf8').replace('events: {', 'event: {'));
  const r = await runCli(['check', join(dir, 'gb-analytics'), '--json'], { cwd: roomyCwd(t) });
  const j = JSON.parse(r.stdout);
  assert.equal(r.code, 1);
  assert.match(j.errors[0].message, /createIntegration\(\): unknown key "event" \(did you mean "events"\?\)/);
});

test('serve: the GitBook-shaped integration runs (MODE, .raw.js as text, ExposableError codes) and its script-injection handler answers 501', async (t) => {
  const dir = gitbookFolder(t);
  const s = await startTestServer(t, { integrations_dir: dir });
  const inst = await s.api('POST', '/api/v1/installations', { integration: 'GB-Analytics', site: 'site_a', configuration: { collector_url: 'https://collector.example/a', label: '' } });
  assert.equal(inst.status, 201, JSON.stringify(inst.body));
  const endpoint = inst.body.installation.urls.publicEndpoint;
  const res = await fetch(`${endpoint}/info`);
  assert.equal(res.status, 200);
  const info = (await res.json()) as any;
  assert.equal(info.mode, 'production');
  assert.ok(info.scriptBytes > 20);
  assert.equal(info.site, 'site_a');
  assert.equal(info.configuration.collector_url, 'https://collector.example/a');
  const fail = await fetch(`${endpoint}/fail`);
  assert.equal(fail.status, 409);
  assert.deepEqual(await fail.json(), { error: 'asked to fail' });

  const script = await envelope(s, 'GB-Analytics', { event: { type: 'fetch_published_script' }, environment: { installation: { id: inst.body.installation.id } } });
  assert.equal(script.status, 501);
  assert.match(((await script.json()) as any).error, /"fetch_published_script" events are not supported here \(the integration's fetch_published_script handler does not run\): injecting scripts/);
});
