/** Signing, verification, the retry policy and the reference receiver: the parts that are pure or local. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import Stripe from 'stripe';
import {
  classifyOutcome,
  createReceiver,
  nextAttemptDelay,
  parseRetryAfter,
  parseSignatureHeader,
  retryDelay,
  signatureHeader,
  signPayload,
  verifySignature,
} from '../src/webhooks/index.ts';

const vectors = JSON.parse(readFileSync(new URL('./fixtures/signatures.json', import.meta.url), 'utf8'));

test('the published vector: secret "secret", t 1636936200, body "hello !"', () => {
  assert.equal(signPayload('secret', 1636936200, 'hello !'), '1b3d69df55f1e52f05224ba94a5162abeb17ef52cd7f4948c390f810d6a87e98');
  assert.equal(
    signatureHeader(['secret'], 1636936200, Buffer.from('hello !')),
    't=1636936200,v1=1b3d69df55f1e52f05224ba94a5162abeb17ef52cd7f4948c390f810d6a87e98',
  );
});

test('every signature vector in test/fixtures/signatures.json (computed by an independent HMAC)', () => {
  for (const v of vectors.signatures) {
    assert.equal(signPayload(v.secret, v.t, v.body), v.v1, v.name);
    assert.equal(signPayload(v.secret, v.t, Buffer.from(v.body, 'utf8')), v.v1, `${v.name} (bytes)`);
  }
  const r = vectors.rotation;
  assert.equal(signatureHeader(r.secrets, r.t, r.body), r.header);
});

test('verification vectors: timestamps, tampering, missing parts, rotation', () => {
  for (const v of vectors.verify) {
    const got = verifySignature(v.header, v.body, v.secret, { now: v.now, toleranceSec: 300 });
    assert.equal(got.ok, v.ok, v.name);
    if (!got.ok) assert.match(got.reason, new RegExp(v.reason.replace(/[.=]/g, '\\$&')), v.name);
  }
  assert.equal(verifySignature(undefined, 'x', 'secret').ok, false);
  assert.equal(verifySignature(null, 'x', 'secret').ok, false);
});

test("Stripe's official library verifies our header (same format, different header name)", () => {
  const stripe = new Stripe('sk_test_not_used');
  const body = JSON.stringify({ eventId: 'evt_stripe', type: 'site_view', installationId: 'inst_1' });
  const t = Math.floor(Date.now() / 1000);
  const header = signatureHeader(['whsec_current_000000001', 'whsec_previous_00000001'], t, body);
  for (const secret of ['whsec_current_000000001', 'whsec_previous_00000001']) {
    const event = stripe.webhooks.constructEvent(body, header, secret, 300) as unknown as { eventId: string };
    assert.equal(event.eventId, 'evt_stripe');
  }
  assert.throws(() => stripe.webhooks.constructEvent(`${body} `, header, 'whsec_current_000000001', 300), /signature/i);
  assert.throws(() => stripe.webhooks.constructEvent(body, header, 'whsec_other_0000000001', 300), /signature/i);
  // And we verify what Stripe's library signs.
  const theirs = stripe.webhooks.generateTestHeaderString({ payload: body, secret: 'whsec_theirs_000000001', timestamp: t });
  assert.equal(verifySignature(theirs, body, 'whsec_theirs_000000001').ok, true);
});

test('the header parser keeps every v1 and ignores unknown schemes', () => {
  assert.deepEqual(parseSignatureHeader('t=5,v0=aa,v1=bb, v1=cc ,x'), { t: 5, v1: ['bb', 'cc'] });
  assert.deepEqual(parseSignatureHeader('t=abc,v1=bb'), { t: undefined, v1: ['bb'] });
});

const cfg = { max_retries: 3, base_delay: 1000, jitter: 0.1, retry_after_max: 60_000 };

test('retry delays are 1.0-1.1 s, 2.0-2.2 s, 4.0-4.4 s (not off by one)', () => {
  assert.equal(
    retryDelay(1, cfg, () => 0),
    1000,
  );
  assert.equal(
    retryDelay(1, cfg, () => 1),
    1100,
  );
  assert.equal(
    retryDelay(2, cfg, () => 0),
    2000,
  );
  assert.equal(
    retryDelay(2, cfg, () => 1),
    2200,
  );
  assert.equal(
    retryDelay(3, cfg, () => 0),
    4000,
  );
  assert.equal(
    retryDelay(3, cfg, () => 1),
    4400,
  );
  for (let i = 0; i < 1000; i++) {
    const d = retryDelay(2, cfg);
    assert.ok(d >= 2000 && d <= 2200, String(d));
  }
  assert.throws(() => retryDelay(0, cfg), RangeError);
  assert.equal(retryDelay(2, { base_delay: 500, jitter: 0 }), 1000, 'configurable');
});

test('classification: 2xx success; 429, 5xx and network errors retried; 3xx, 400 and other 4xx fail', () => {
  for (const s of [200, 201, 204, 299]) assert.equal(classifyOutcome({ status: s }), 'success', String(s));
  for (const s of [429, 500, 502, 503, 504, 599]) assert.equal(classifyOutcome({ status: s }), 'retry', String(s));
  for (const s of [301, 302, 307, 308, 400, 401, 403, 404, 405, 409, 410, 413, 422]) assert.equal(classifyOutcome({ status: s }), 'failed', String(s));
  for (const code of ['ETIMEDOUT', 'ECONNREFUSED', 'ECONNRESET', 'ENOTFOUND', 'EAI_AGAIN', 'EPROTO']) assert.equal(classifyOutcome({ code }), 'retry', code);
  assert.equal(classifyOutcome(Object.assign(new Error('x'), { code: 'EPRIVATEADDR' })), 'failed');
});

test('never more than max_retries + 1 attempts, whatever the mix of failures', () => {
  const outcomes: Array<'retry'> = ['retry', 'retry', 'retry', 'retry', 'retry', 'retry'];
  let attempts = 0;
  for (const o of outcomes) {
    attempts++;
    if (nextAttemptDelay(attempts, o, cfg) === null) break;
  }
  assert.equal(attempts, 4);
  assert.equal(nextAttemptDelay(1, 'failed', cfg), null);
  assert.equal(nextAttemptDelay(1, 'success', cfg), null);
  assert.equal(nextAttemptDelay(1, 'retry', { ...cfg, max_retries: 0 }), null);
});

test('by default Retry-After leaves the spec schedule as it is: a 429 with Retry-After: 3 waits 1.0-1.1, 2.0-2.2, 4.0-4.4 s', () => {
  for (const random of [() => 0, () => 1, Math.random]) {
    const waits = [1, 2, 3].map((n) => nextAttemptDelay(n, 'retry', cfg, 3000, random)!);
    const bands = [
      [1000, 1100],
      [2000, 2200],
      [4000, 4400],
    ];
    waits.forEach((w, i) => assert.ok(w >= bands[i][0] && w <= bands[i][1], `retry ${i + 1} waited ${w} ms`));
    assert.equal(nextAttemptDelay(4, 'retry', cfg, 3000, random), null);
  }
  assert.equal(
    nextAttemptDelay(1, 'retry', { ...cfg, honor_retry_after: false }, 30_000, () => 0),
    1000,
  );
});

test('with honor_retry_after, Retry-After lengthens the wait up to retry_after_max, never shortens it', () => {
  const r = () => 0;
  const honoring = { ...cfg, honor_retry_after: true };
  assert.equal(nextAttemptDelay(1, 'retry', honoring, 30_000, r), 30_000);
  assert.equal(nextAttemptDelay(1, 'retry', honoring, 500, r), 1000);
  assert.equal(nextAttemptDelay(1, 'retry', honoring, 3_600_000, r), 60_000);
  assert.deepEqual(
    [1, 2, 3].map((n) => nextAttemptDelay(n, 'retry', honoring, 3000, r)),
    [3000, 3000, 4000],
  );
  assert.equal(parseRetryAfter('7'), 7000);
  assert.equal(parseRetryAfter(new Date(10_000 + 5000).toUTCString(), 10_000), 5000);
  assert.equal(parseRetryAfter('soon'), undefined);
});

async function receiver(t: any, opts: Parameters<typeof createReceiver>[0]) {
  const server = http.createServer(createReceiver(opts));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.after(() => server.close());
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
}

test('reference receiver: 405 for non-POST, 401 JSON for bad signatures, 200 {received:true} otherwise', async (t) => {
  const seen: unknown[] = [];
  const url = await receiver(t, { secrets: 'whsec_receiver_0000001', onEvent: (e) => void seen.push(e.payload) });
  const get = await fetch(url);
  assert.equal(get.status, 405);
  assert.equal(await get.text(), 'Method not allowed');

  const body = '{"eventId":"evt_r1","type":"site_view"}';
  const now = Math.floor(Date.now() / 1000);
  const cases: Array<[string | undefined, string]> = [
    [undefined, 'missing'],
    [`v1=${signPayload('whsec_receiver_0000001', now, body)}`, 't='],
    [`t=${now}`, 'v1='],
    [signatureHeader(['whsec_receiver_0000001'], now - 301, body), 'tolerance'],
    [signatureHeader(['whsec_wrong_00000000001'], now, body), 'no signature matches'],
  ];
  for (const [header, reason] of cases) {
    const r = await fetch(url, { method: 'POST', body, headers: header ? { 'x-platform-signature': header } : {} });
    assert.equal(r.status, 401, reason);
    assert.equal(r.headers.get('content-type'), 'application/json');
    assert.match(((await r.json()) as { error: string }).error, new RegExp(reason.replace('=', '\\=')));
  }
  // A re-serialized body (a space added) no longer matches: verification is on the raw bytes.
  const bad = await fetch(url, {
    method: 'POST',
    body: body.replace(',', ', '),
    headers: { 'x-platform-signature': signatureHeader(['whsec_receiver_0000001'], now, body) },
  });
  assert.equal(bad.status, 401);

  const ok = await fetch(url, { method: 'POST', body, headers: { 'x-platform-signature': signatureHeader(['whsec_receiver_0000001'], now, body) } });
  assert.equal(ok.status, 200);
  assert.deepEqual(await ok.json(), { received: true });
  await new Promise((r) => setTimeout(r, 20));
  assert.deepEqual(seen, [{ eventId: 'evt_r1', type: 'site_view' }]);
});

test('reference receiver: dedup by eventId for 2 minutes, reprocessing allowed after a failure', async (t) => {
  let clock = 1_700_000_000_000;
  const processed: string[] = [];
  let failNext = true;
  const secret = 'whsec_dedup_000000001';
  const url = await receiver(t, {
    secrets: secret,
    now: () => clock,
    onEvent(e) {
      processed.push(e.eventId!);
      if (e.eventId === 'evt_fail' && failNext) {
        failNext = false;
        throw new Error('processing failed');
      }
    },
  });
  const post = async (eventId: string) => {
    const body = JSON.stringify({ eventId, type: 'site_view' });
    const r = await fetch(url, { method: 'POST', body, headers: { 'x-platform-signature': signatureHeader([secret], Math.floor(clock / 1000), body) } });
    const json = (await r.json()) as Record<string, unknown>;
    await new Promise((res) => setTimeout(res, 10));
    return json;
  };
  assert.deepEqual(await post('evt_a'), { received: true });
  assert.deepEqual(await post('evt_a'), { received: true, duplicate: true });
  clock += 119_000;
  assert.deepEqual(await post('evt_a'), { received: true, duplicate: true });
  clock += 2_000; // past 2 minutes since first seen
  assert.deepEqual(await post('evt_a'), { received: true });
  assert.deepEqual(await post('evt_fail'), { received: true });
  assert.deepEqual(await post('evt_fail'), { received: true }, 'processing failed: the redelivery is processed');
  assert.deepEqual(await post('evt_fail'), { received: true, duplicate: true });
  assert.deepEqual(processed, ['evt_a', 'evt_a', 'evt_fail', 'evt_fail']);
});

test('reference receiver: a rehearsed failure rate answers that share with the status, unprocessed and not remembered', async () => {
  const secret = 'whsec_rehearse_000001';
  const rolls = [0.1, 0.9, 0.1];
  const processed: string[] = [];
  const failed: number[] = [];
  const handler = createReceiver({
    secrets: secret,
    fail: { status: 429, rate: 0.5, random: () => rolls.shift() ?? 0.9 },
    onEvent: (e) => void processed.push(e.eventId!),
    onFail: (status) => void failed.push(status),
  });
  const server = http.createServer(handler);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  try {
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
    const body = JSON.stringify({ eventId: 'evt_r1', type: 'site_view' });
    const send = () =>
      fetch(url, { method: 'POST', body, headers: { 'x-platform-signature': signatureHeader([secret], Math.floor(Date.now() / 1000), body) } });
    assert.equal((await send()).status, 429, 'roll 0.1 < 0.5: rehearsed failure');
    const ok = await send();
    assert.equal(ok.status, 200, 'roll 0.9: processed');
    assert.deepEqual(await ok.json(), { received: true }, 'the failed one was not remembered as a duplicate');
    assert.equal((await send()).status, 429);
    await new Promise((r) => setTimeout(r, 20));
    assert.deepEqual(processed, ['evt_r1']);
    assert.deepEqual(failed, [429, 429]);
  } finally {
    server.close();
  }
});

test("docs/webhooks.md's receiver runs on Node alone (no import from this checkout): a signed delivery is taken, a tampered or stale one refused", async (t) => {
  const doc = readFileSync(new URL('../docs/webhooks.md', import.meta.url), 'utf8');
  const code = /```js\n(\/\/ receiver\.mjs\n[\s\S]*?)```/.exec(doc)?.[1];
  assert.ok(code, 'docs/webhooks.md has the receiver.mjs example');
  for (const m of code.matchAll(/from '([^']+)'/g)) assert.match(m[1], /^node:/, `imports only Node's own modules, not ${m[1]}`);
  const dir = mkdtempSync(join(tmpdir(), 'receiver-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(join(dir, 'receiver.mjs'), code);
  const free = http.createServer();
  await new Promise<void>((r) => free.listen(0, '127.0.0.1', r));
  const port = (free.address() as AddressInfo).port;
  await new Promise((r) => free.close(r));
  const secret = 'whsec_doc_example_secret';
  const child = spawn(process.execPath, [join(dir, 'receiver.mjs')], {
    env: { ...process.env, WEBHOOK_SECRET: secret, PORT: String(port) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  t.after(() => child.kill('SIGKILL'));
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (out += d));
  const body = JSON.stringify({ eventId: 'evt_doc1', type: 'site_view' });
  const post = async (header: string, sent = body) => {
    for (let i = 0; ; i++) {
      try {
        return (await fetch(`http://127.0.0.1:${port}/hook`, { method: 'POST', headers: { 'x-platform-signature': header }, body: sent })).status;
      } catch (e) {
        if (i > 100) throw e; // not listening yet
        await new Promise((r) => setTimeout(r, 50));
      }
    }
  };
  const now = Math.floor(Date.now() / 1000);
  assert.equal(await post(signatureHeader(['an old secret', secret], now, body)), 200, 'a rotation: one v1 of two matches');
  assert.equal(await post(signatureHeader([secret], now, body), body.replace('site_view', 'page_view')), 401, 'tampered');
  assert.equal(await post(signatureHeader([secret], now - 3600, body)), 401, 'stale');
  assert.equal(await post(`t=${now}`), 401, 'no v1');
  assert.equal(await post(signatureHeader(['wrong'], now, body)), 401, 'another secret');
  await new Promise((r) => setTimeout(r, 100));
  assert.equal(out, 'site_view evt_doc1\n');
});
