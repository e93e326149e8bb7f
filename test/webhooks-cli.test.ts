/** The shell side: `switchyard sign`, `verify`, `receive` and `events send`, run as real processes. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { runCli, spawnCli, tmpDir } from './helpers/index.ts';
import { signatureHeader } from '../src/webhooks/index.ts';
import { samplePayload } from '../src/events/index.ts';
import { deliveryServer, scriptedReceiver } from './webhooks-support.ts';

test('sign prints the published vector; verify accepts it and rejects a changed body (exit 1)', async (t) => {
  const signed = await runCli(['sign', '--secret', 'secret', '--timestamp', '1636936200', '--data', 'hello !']);
  assert.equal(signed.code, 0, signed.stderr);
  assert.equal(signed.stdout.trim(), 't=1636936200,v1=1b3d69df55f1e52f05224ba94a5162abeb17ef52cd7f4948c390f810d6a87e98');

  const file = join(tmpDir(t), 'body.json');
  writeFileSync(file, 'hello !');
  const header = signed.stdout.trim();
  const ok = await runCli(['verify', '--header', header, '--file', file, '--now', '1636936260'], { env: { SWITCHYARD_WEBHOOK_SECRET: 'secret' } });
  assert.equal(ok.code, 0, ok.stdout + ok.stderr);
  assert.match(ok.stdout, /valid \(t=1636936200\)/);
  const tampered = await runCli(['verify', '--header', header, '--now', '1636936260', '--secret', 'secret'], { input: 'hello!' });
  assert.equal(tampered.code, 1);
  assert.match(tampered.stderr, /signature invalid: no signature matches/);
  const stale = await runCli(['verify', '--header', header, '--data', 'hello !', '--secret', 'secret']);
  assert.equal(stale.code, 1);
  assert.match(stale.stderr, /outside the tolerance window/);
  const rotated = await runCli(['sign', '--secret', 'new-secret-0000001', '--secret', 'secret', '--timestamp', '1636936200', '--data', 'hello !']);
  assert.match(rotated.stdout, /^t=1636936200,v1=[0-9a-f]{64},v1=1b3d69df/);
  const noSecret = await runCli(['sign', '--data', 'x'], { env: { SWITCHYARD_WEBHOOK_SECRET: '' } });
  assert.equal(noSecret.code, 2);
  assert.match(noSecret.stderr, /signing secret is needed/);
});

test('receive verifies, answers and prints events; rejects bad signatures and other methods', async (t) => {
  const secret = 'whsec_cli_receiver_0001';
  const { child, match, output } = await spawnCli(t, ['receive', '--port', '0', '--secret', secret], /receiving on (http:\/\/[^ ]+)/);
  const url = match[1];
  const body = JSON.stringify({ eventId: 'evt_cli_1', type: 'site_view', installationId: 'inst_1' });
  const now = Math.floor(Date.now() / 1000);
  const ok = await fetch(url, { method: 'POST', body, headers: { 'x-platform-signature': signatureHeader([secret], now, body) } });
  assert.equal(ok.status, 200);
  assert.deepEqual(await ok.json(), { received: true });
  const dup = await fetch(url, { method: 'POST', body, headers: { 'x-platform-signature': signatureHeader([secret], now, body) } });
  assert.deepEqual(await dup.json(), { received: true, duplicate: true });
  const forged = await fetch(url, { method: 'POST', body, headers: { 'x-platform-signature': signatureHeader(['whsec_other_0000000001'], now, body) } });
  assert.equal(forged.status, 401);
  assert.ok(((await forged.json()) as { error?: string }).error);
  const get = await fetch(url);
  assert.equal(get.status, 405);
  assert.equal(await get.text(), 'Method not allowed');
  await new Promise((r) => setTimeout(r, 100));
  const out = output();
  assert.match(out, /received site_view evt_cli_1/);
  assert.match(out, /duplicate evt_cli_1 ignored/);
  assert.match(out, /rejected 401 no signature matches/);
  assert.ok(!out.includes(secret), 'the secret is never printed');
  child.kill('SIGTERM');
});

test('receive --status / --fail-rate rehearse failures: the sender retries and a later attempt is processed', async (t) => {
  const secret = 'whsec_cli_receiver_0002';
  const bad = await runCli(['receive', '--port', '0', '--secret', secret, '--status', '200']);
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /--status must be an HTTP status from 300 to 599/);
  assert.match((await runCli(['receive', '--port', '0', '--secret', secret, '--fail-rate', '1.5'])).stderr, /--fail-rate must be a fraction from 0 to 1/);

  const s = await deliveryServer(t, { webhooks: { base_delay: 50, jitter: 0, max_retries: 3 } });
  const { child, match, output } = await spawnCli(
    t,
    ['receive', '--port', '0', '--secret', secret, '--status', '503', '--fail-rate', '1'],
    /receiving on http:\/\/127\.0\.0\.1:(\d+)\/ .*answering 503 to 100 % of events/,
  );
  const sub = await s.api('POST', '/api/v1/installations', {
    integration: 'webhook',
    configuration: { webhook_url: `http://127.0.0.1:${match[1]}/`, event_types: 'site_view' },
    webhook_secret: secret,
  });
  assert.equal(sub.status, 201);
  const sent = await s.send(samplePayload('site_view'));
  const d = await s.settled(sent.body.deliveries[0].id);
  assert.equal(d.status, 'failed');
  assert.deepEqual(
    d.attempts.map((a) => a.status),
    [503, 503, 503, 503],
  );
  assert.match(output(), new RegExp(`answered 503 site_view ${d.id} \\(rehearsed failure\\)`), "the delivery's own eventId");
  child.kill('SIGTERM');
});

test('events send posts a sample payload with --set overrides to the running server, which delivers it', async (t) => {
  const s = await deliveryServer(t);
  const r = await scriptedReceiver(t, () => 200);
  const sub = await s.subscribe(r.url, ['page_feedback']);
  const env = { SWITCHYARD_URL: s.url, SWITCHYARD_ADMIN_TOKEN: s.token };
  const sent = await runCli(['events', 'send', 'page_feedback', '--set', 'feedback.rating=bad', '--set', 'visitor.cookies={"k":"v"}', '--json'], { env });
  assert.equal(sent.code, 0, sent.stderr);
  const answer = JSON.parse(sent.stdout);
  assert.equal(answer.duplicate, false);
  assert.equal(answer.deliveries[0].installationId, sub.installationId);
  const d = await s.settled(answer.deliveries[0].id);
  assert.equal(d.status, 'delivered');
  const payload = JSON.parse(r.requests[0].body);
  assert.equal(payload.feedback.rating, 'bad');
  assert.deepEqual(payload.visitor.cookies, { k: 'v' });

  const invalid = await runCli(['events', 'send', 'site_view', '--data', '{"siteId": 5}'], { env });
  assert.equal(invalid.code, 2);
  assert.match(invalid.stderr, /siteId/);
  assert.match(invalid.stderr, /visitor/);
  const printed = await runCli(['events', 'send', 'space_content_updated', '--print', '--set', 'spaceId=space_42']);
  assert.equal(JSON.parse(printed.stdout).spaceId, 'space_42');
  const unknown = await runCli(['events', 'send', 'space_exploded'], { env });
  assert.equal(unknown.code, 2);
  assert.match(unknown.stderr, /not a platform event type/);
});

test('installations secret shows the signing secret masked, --reveal prints it, --rotate makes a new one while the old keeps signing', async (t) => {
  const s = await deliveryServer(t);
  const env = { SWITCHYARD_URL: s.url, SWITCHYARD_ADMIN_TOKEN: s.token };
  const { installationId, secret } = await s.subscribe('https://hooks.example.com/x');
  const masked = await runCli(['installations', 'secret', installationId], { env });
  assert.equal(masked.code, 0, masked.stderr);
  assert.ok(!masked.stdout.includes(secret));
  // Secrets are base64: + and / are theirs, and regular expressions take them for their own.
  const literal = (x: string) => x.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
  assert.match(masked.stdout, new RegExp(`…${literal(secret.slice(-4))}\\s+\\(masked`));
  const shown = await runCli(['installations', 'secret', installationId, '--reveal'], { env });
  assert.equal(shown.stdout.trim(), secret);
  const rotated = await runCli(['installations', 'secret', installationId, '--rotate', '--json'], { env });
  const r = JSON.parse(rotated.stdout);
  assert.notEqual(r.secret, secret);
  const after = await runCli(['installations', 'secret', installationId, '--reveal'], { env });
  assert.match(after.stdout, new RegExp(`^${literal(r.secret)}\\n${literal(secret)}  previous, signs until `));
  const none = await runCli(['installations', 'secret', 'inst_nope'], { env });
  assert.equal(none.code, 1);
  assert.match(none.stderr, /has no webhook signing secret/);
});
