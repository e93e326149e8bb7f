/**
 * What integration code prints is stored within bounds (per invocation, per integration per
 * minute, not at all when the disk runs short) and without the secrets the runtime knows.
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startTestServer, tmpDir, type TestServer, sql } from './helpers/index.ts';
import { createLogBudget } from '../src/runtime/log-budget.ts';
import { createRedactor } from '../src/runtime/redact.ts';

const API_KEY = 'sk_live_chatty_0123456789';
const CONFIG_TOKEN = 'cfg-token-abcdef123456';
const OAUTH_TOKEN = 'oauth-access-zyxwvu987654';
process.env.CHATTY_API_KEY = API_KEY;

const MANIFEST = `name: chatty
title: Chatty
description: Prints a lot, and prints its secrets
organization: o
visibility: private
scopes: []
script: ./index.ts
secrets:
  API_KEY: \${{ env.CHATTY_API_KEY }}
configurations:
  account:
    properties:
      api_token:
        type: string
        title: API token
        description: A credential
      channel:
        type: string
        title: Channel
        description: Not a credential
`;

const SCRIPT = `import { createIntegration } from '@switchyard/runtime';
export default createIntegration({
  fetch: async (request, context) => {
    const url = new URL(request.url);
    const path = url.pathname.split('/').pop();
    const n = Number(url.searchParams.get('n') ?? 0);
    const size = Number(url.searchParams.get('size') ?? 0);
    const flood = (tag) => { for (let i = 0; i < n; i++) console.log(tag + 'x'.repeat(size - tag.length)); };
    const env = context.environment;
    if (path === 'flood') { flood(''); return new Response('flooded'); }
    if (path === 'late') {
      context.waitUntil((async () => {
        await new Promise((r) => setTimeout(r, 5));
        flood('');
        console.log('late ' + env.secrets.API_KEY);
      })());
      return new Response('answered');
    }
    if (path === 'nul') {
      const nul = String.fromCharCode(0);
      console.log('before' + nul + 'answer');
      context.waitUntil((async () => {
        await new Promise((r) => setTimeout(r, 5));
        console.log('late' + nul + 'one');
        console.log('late two ' + String.fromCharCode(0xd800));
        console.log('late three');
      })());
      return new Response('answered');
    }
    if (path === 'secrets') {
      console.log(env.secrets.API_KEY);
      console.log('config', env.installation.configuration.api_token, env.installation.configuration.channel);
      console.log(JSON.stringify(env.installation.configuration.oauth_credentials));
      console.warn('token ' + env.apiTokens.installation);
      throw new Error('failed with ' + env.secrets.API_KEY + ' and ' + env.installation.configuration.api_token);
    }
    return new Response('?', { status: 404 });
  },
});
`;

async function chatty(t: TestContext, sandbox: Record<string, unknown> = {}): Promise<TestServer & { call(path: string): Promise<string> }> {
  const dir = tmpDir(t);
  mkdirSync(join(dir, 'chatty'));
  writeFileSync(join(dir, 'chatty/platform-manifest.yaml'), MANIFEST);
  writeFileSync(join(dir, 'chatty/index.ts'), SCRIPT);
  const s = await startTestServer(t, { integrations_dir: dir, sandbox: { cpu_time: 1000, ...sandbox } as never });
  const inst = await s.api('POST', '/api/v1/installations', {
    integration: 'chatty',
    configuration: { api_token: CONFIG_TOKEN, channel: 'general', oauth_credentials: { access_token: OAUTH_TOKEN, expires_at: 1 } },
  });
  assert.equal(inst.status, 201, JSON.stringify(inst.body));
  const base = `${s.url}/v1/integrations/chatty/installations/${inst.body.installation.id}`;
  return Object.assign(s, {
    async call(path: string) {
      const res = await fetch(`${base}/${path}`);
      await res.arrayBuffer();
      return res.headers.get('x-request-id')!;
    },
  });
}

const record = async (s: TestServer, id: string) => (await s.api('GET', `/api/v1/logs/${id}`)).body;
const messageBytes = (logs: Array<{ message: string }>) => logs.reduce((n, l) => n + Buffer.byteLength(l.message), 0);

test('an invocation stores at most sandbox.log_bytes of output, then one line counting what was dropped, and a metric', async (t) => {
  const s = await chatty(t, { log_bytes: 8 * 1024 });
  const id = await s.call('flood?n=100&size=1000');
  const r = await record(s, id);
  assert.equal(r.status, 200);
  assert.equal(r.logs.length, 9, 'eight lines of 1000 bytes fit in 8 kB, then the marker');
  assert.ok(messageBytes(r.logs.slice(0, -1)) <= 8 * 1024);
  assert.equal(r.logs.at(-1).level, 'warn');
  assert.match(r.logs.at(-1).message, /^log output dropped: 92 lines \/ 92000 bytes not stored \(more than sandbox\.log_bytes = 8 kB in this invocation\)$/);
  const metrics = await (await fetch(`${s.url}/metrics`, { headers: { authorization: `Bearer ${s.token}` } })).text();
  assert.match(metrics, /switchyard_sandbox_log_lines_dropped(_total)?\{integration="chatty",reason="invocation"\} 92\n/);
  assert.match(metrics, /switchyard_sandbox_log_bytes_dropped(_total)?\{integration="chatty",reason="invocation"\} 92000\n/);
});

test('an integration stores at most sandbox.log_bytes_per_minute of output', async (t) => {
  const s = await chatty(t, { log_bytes_per_minute: 10 * 1024 });
  const r = await record(s, await s.call('flood?n=30&size=1000'));
  assert.equal(r.logs.length, 11, 'ten lines of 1000 bytes fit in the minute, then the marker');
  assert.match(
    r.logs.at(-1).message,
    /^log output dropped: 20 lines \/ 20000 bytes not stored \(this integration printed more than sandbox\.log_bytes_per_minute = 10 kB\)$/,
  );
});

test('no output is stored while the disk has less than sandbox.log_disk_reserve free; the invocation still is (on PostgreSQL no local disk holds the store: stored)', async (t) => {
  const s = await chatty(t, { log_disk_reserve: 2 ** 60 });
  const r = await record(s, await s.call('flood?n=3&size=10'));
  assert.equal(r.status, 200);
  assert.deepEqual(
    r.logs.map((l: { message: string }) => l.message),
    s.services.store.localDir
      ? [`log output dropped: 3 lines / 30 bytes not stored (the data directory's disk has less than sandbox.log_disk_reserve = ${2 ** 40} MB free)`]
      : ['x'.repeat(10), 'x'.repeat(10), 'x'.repeat(10)],
  );
});

test('lines printed after the answer count against the same cap and grow the same marker', async (t) => {
  const s = await chatty(t, { log_bytes: 2 * 1024 });
  const id = await s.call('late?n=5&size=1000');
  let r = await record(s, id);
  for (let i = 0; i < 500 && !/4 lines \/ 3\d{3} bytes/.test(r.logs.at(-1)?.message ?? ''); i++) {
    await new Promise((done) => setTimeout(done, 20));
    r = await record(s, id);
  }
  assert.equal(r.logs.length, 3, JSON.stringify(r.logs.map((l: { message: string }) => l.message.slice(0, 60))));
  assert.match(r.logs.at(-1).message, /^log output dropped: 4 lines \/ 3\d{3} bytes not stored \(more than sandbox\.log_bytes = 2 kB/);
  assert.doesNotMatch(JSON.stringify(r), new RegExp(API_KEY));
});

test('a NUL (or a lone surrogate) in a printed line is stored as U+FFFD on either engine, and the lines printed after it (after the answer too) are all kept', async (t) => {
  const s = await chatty(t);
  const id = await s.call('nul');
  let r = await record(s, id);
  for (let i = 0; i < 250 && r.logs.length < 4; i++) {
    await new Promise((done) => setTimeout(done, 20));
    r = await record(s, id);
  }
  // Once the last line is in, a moment for any line that would come after it.
  await new Promise((done) => setTimeout(done, 100));
  r = await record(s, id);
  assert.deepEqual(
    r.logs.map((l: { message: string }) => l.message),
    ['before\uFFFDanswer', 'late\uFFFDone', 'late two \uFFFD', 'late three'],
    "a lone surrogate, which PostgreSQL's json refuses as a NUL, too",
  );
  const stored = JSON.parse(String(await sql.value(s.services.store, 'SELECT logs FROM invocations WHERE id = ?', [id]))) as Array<{ message: string }>;
  assert.deepEqual(
    stored.map((l) => l.message),
    r.logs.map((l: { message: string }) => l.message),
    'the record holds what the API shows',
  );
  assert.ok(!s.logs.some((l) => /unsupported Unicode escape/.test(JSON.stringify(l))), 'no write failed');
});

test('secrets the runtime knows never reach stored lines, errors or the server log', async (t) => {
  const s = await chatty(t);
  const id = await s.call('secrets');
  const r = await record(s, id);
  assert.equal(r.error.kind, 'exception');
  const text = JSON.stringify(r);
  for (const secret of [API_KEY, CONFIG_TOKEN, OAUTH_TOKEN]) assert.ok(!text.includes(secret), `${secret} in ${text}`);
  assert.doesNotMatch(text, /sy_inv_/, 'the invocation token');
  assert.match(r.logs[0].message, /^\[redacted\]$/);
  assert.match(r.logs[1].message, /^config \[redacted\] general$/, 'what is not a credential stays');
  assert.match(r.error.message, /^(Error: )?failed with \[redacted\] and \[redacted\]$/);
  assert.match(r.error.stack, /failed with \[redacted\]/);
  const logged = JSON.stringify(s.logs);
  assert.match(logged, /integration code threw/);
  for (const secret of [API_KEY, CONFIG_TOKEN]) assert.ok(!logged.includes(secret), `${secret} in the server log`);
});

test('the log budget: refills over a minute, stops at the first dropped line, checks the disk at most once a second', () => {
  let now = 0;
  let statfs = 0;
  let free = 10_000;
  const budget = createLogBudget({ perInvocation: 1000, perMinute: 600, diskReserve: 5000, dataDir: '/', now: () => now, freeBytes: () => (statfs++, free) });
  const line = (n: number) => ({ time: 0, level: 'log' as const, message: 'x'.repeat(n) });
  const a = budget.admit('i', [line(500), line(200), line(50)]);
  assert.equal(a.lines.length, 2, 'the 200-byte line is over the minute; the 50-byte one after it is dropped too');
  assert.deepEqual(a.dropped, { lines: 2, bytes: 250, reason: 'integration' });
  now += 20_000; // a third of a minute: 200 bytes back
  assert.equal(budget.admit('i', [line(200)]).dropped, undefined);
  assert.equal(budget.admit('other', [line(600)]).dropped, undefined, 'each integration has its own');
  assert.deepEqual(budget.admit('j', [line(300)], 800).dropped, { lines: 1, bytes: 300, reason: 'invocation' });
  free = 10;
  assert.equal(budget.admit('k', [line(1)]).dropped, undefined, 'the free space measured this second still holds');
  now += 1000;
  assert.equal(budget.admit('k', [line(1)]).dropped?.reason, 'disk');
  assert.equal(statfs, 3, 'at 0 s, 20 s and 21 s');
});

test('the redactor hides each known value and every token shape, and leaves short values alone', () => {
  const r = createRedactor(['secret-value-1', 'secret-value-12', 'abc']);
  assert.equal(r('a secret-value-12 b secret-value-1 c abc'), 'a [redacted] b [redacted] c abc');
  assert.equal(r('Bearer sy_inv_aW5zdC4xMjM.mac-9_x and sy_inst_QWxhZGRpbg'), 'Bearer [redacted] and [redacted]');
  assert.equal(r('a.b*c'), 'a.b*c');
});
