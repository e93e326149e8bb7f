/**
 * Standard Webhooks signatures, chosen per webhook installation (`signature_scheme`): the
 * specification's own library (npm `standardwebhooks`) verifies real deliveries from a running
 * server, across retries and a secret rotation; the reference receiver, `sign` and `verify` follow
 * the choice; a secret its receivers could not read is refused.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';
import { runCli, spawnCli } from './helpers/index.ts';
import { samplePayload } from '../src/events/index.ts';
import {
  createReceiver,
  sentEventId,
  signatureHeader,
  signStandard,
  standardKey,
  standardSecretProblem,
  standardSignatureHeader,
  verifyStandardSignature,
} from '../src/webhooks/index.ts';
import { deliveryServer, scriptedReceiver, type DeliveryTestServer, type Received } from './webhooks-support.ts';

const fast = { webhooks: { base_delay: 50, jitter: 0 } } as const;

/** The specification's published example (its libraries' test vector). */
const PUBLISHED = {
  secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
  id: 'msg_p5jXN8AQM9LWM0D4loKWxJek',
  t: 1614265330,
  body: '{"test": 2432232314}',
  signature: 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=',
};

/** The library's verdict on one request received (it throws when the signature does not hold). */
function libraryVerifies(secret: string, r: Pick<Received, 'body' | 'headers'>): boolean {
  try {
    new Webhook(secret).verify(r.body, r.headers as Record<string, string>);
    return true;
  } catch {
    return false;
  }
}

async function installStandard(s: DeliveryTestServer, url: string, extra: Record<string, unknown> = {}) {
  const r = await s.api('POST', '/api/v1/installations', {
    integration: 'webhook',
    configuration: { webhook_url: url, event_types: 'site_view', signature_scheme: 'standard-webhooks' },
    ...extra,
  });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  return { installationId: r.body.installation.id as string, secret: r.body.webhookSecret as string, installation: r.body.installation };
}

test('the published vector, and the library agrees with our signer both ways', () => {
  const key = standardKey(PUBLISHED.secret)!;
  assert.equal(`v1,${signStandard(key, PUBLISHED.id, PUBLISHED.t, PUBLISHED.body)}`, PUBLISHED.signature);
  assert.equal(standardSignatureHeader([PUBLISHED.secret], PUBLISHED.id, PUBLISHED.t, Buffer.from(PUBLISHED.body)), PUBLISHED.signature);
  const wh = new Webhook(PUBLISHED.secret);
  const at = new Date(PUBLISHED.t * 1000);
  assert.equal(wh.sign(PUBLISHED.id, at, PUBLISHED.body), PUBLISHED.signature);
  const body = JSON.stringify({ eventId: 'dlv_1', comment: 'très bien ✓' });
  assert.equal(wh.sign('dlv_1', at, body), standardSignatureHeader([PUBLISHED.secret], 'dlv_1', PUBLISHED.t, body), 'UTF-8 bodies alike');
  const headers = { id: PUBLISHED.id, timestamp: String(PUBLISHED.t), signature: PUBLISHED.signature };
  assert.deepEqual(verifyStandardSignature(headers, PUBLISHED.body, PUBLISHED.secret, { now: PUBLISHED.t + 10 }), { ok: true, t: PUBLISHED.t });
  // Fails closed, saying why.
  const why = (h: Partial<typeof headers>, body = PUBLISHED.body, secret = PUBLISHED.secret, now = PUBLISHED.t) => {
    const v = verifyStandardSignature({ ...headers, ...h }, body, secret, { now });
    return v.ok ? 'ok' : v.reason;
  };
  assert.match(why({ id: undefined }), /missing webhook-id header/);
  assert.match(why({ timestamp: '' }), /missing webhook-timestamp header/);
  assert.match(why({ signature: undefined }), /missing webhook-signature header/);
  assert.match(why({ timestamp: '16142653e0' }), /not unix seconds/);
  assert.match(why({}, PUBLISHED.body, PUBLISHED.secret, PUBLISHED.t + 301), /outside the tolerance window/);
  assert.match(why({ signature: 'v2,abc' }), /no v1, signature/);
  assert.match(why({}, `${PUBLISHED.body} `), /no signature matches/);
  assert.match(why({ id: 'msg_other' }), /no signature matches/, 'the id is signed');
  assert.match(why({ timestamp: String(PUBLISHED.t + 1) }, PUBLISHED.body, PUBLISHED.secret, PUBLISHED.t), /no signature matches/, 'the timestamp is signed');
  assert.match(why({}, PUBLISHED.body, 'whsec_not-base64_'), /no secret to verify with/);
  assert.equal(why({ signature: `v1,bogus ${PUBLISHED.signature}` }), 'ok', 'any entry may match (a rotation)');
});

test('secrets: generated ones are whsec_ and base64 of 24 bytes; the rule for the standard-webhooks scheme', async (t) => {
  const s = await deliveryServer(t, fast);
  for (let i = 0; i < 20; i++) {
    const { secret } = await s.subscribe('https://hooks.example.com/x');
    assert.match(secret, /^whsec_[A-Za-z0-9+/]{32}$/);
    assert.equal(standardKey(secret)!.length, 24);
    assert.doesNotThrow(() => new Webhook(secret), 'the library reads it');
  }
  assert.equal(standardSecretProblem(PUBLISHED.secret), undefined);
  assert.match(standardSecretProblem('MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw')!, /whsec_ followed by base64/);
  assert.match(standardSecretProblem('whsec_cli_receiver_0001')!, /whsec_ followed by base64/);
  assert.match(standardSecretProblem(`whsec_${Buffer.alloc(16).toString('base64')}`)!, /24 to 64 bytes .*this one has 16/);
  assert.match(standardSecretProblem(`whsec_${Buffer.alloc(65).toString('base64')}`)!, /this one has 65/);
});

test('a standard-webhooks installation: the library verifies real deliveries; webhook-id is the eventId, the same on the retry', async (t) => {
  const s = await deliveryServer(t, fast);
  const r = await scriptedReceiver(t, (n) => (n === 1 ? 500 : 200));
  const { installationId, secret, installation } = await installStandard(s, r.url);
  assert.equal(installation.configuration.signature_scheme, 'standard-webhooks');
  const event = samplePayload('site_view');
  const sent = await s.send(event);
  const d = await s.settled(sent.body.deliveries[0].id);
  assert.equal(d.status, 'delivered');
  assert.equal(r.requests.length, 2);
  const [first, retry] = r.requests;
  for (const q of r.requests) {
    assert.equal(libraryVerifies(secret, q), true, 'the library verifies it');
    assert.equal(q.headers['webhook-id'], d.id);
    assert.equal(JSON.parse(q.body).eventId, d.id, 'webhook-id is the body eventId');
    assert.equal(JSON.parse(q.body).sourceEventId, event.eventId);
    assert.equal(JSON.parse(q.body).installationId, installationId);
    assert.match(String(q.headers['webhook-timestamp']), /^\d{10}$/);
    assert.match(String(q.headers['webhook-signature']), /^v1,[A-Za-z0-9+/]{43}=$/);
    assert.equal(q.headers['x-platform-signature'], undefined, 'one scheme at a time');
    assert.equal(q.headers['x-platform-event-id'], d.id);
    assert.equal(q.body, d.body);
  }
  assert.equal(first.headers['webhook-id'], retry.headers['webhook-id'], 'stable across the retry');
  // What the library refuses: another secret, a changed body, a changed id.
  assert.equal(libraryVerifies('whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', retry), false);
  assert.equal(libraryVerifies(secret, { ...retry, body: retry.body.replace('site_view', 'site_vieW') }), false);
  assert.equal(libraryVerifies(secret, { ...retry, headers: { ...retry.headers, 'webhook-id': 'dlv_other' } }), false);
  // The attempts record the webhook-signature sent, and the API says which header it was.
  assert.equal(d.signatureHeader, retry.headers['webhook-signature']);
  assert.equal(d.attempts[0].signatureHeader, first.headers['webhook-signature']);
  const shown = await runCli(['deliveries', 'show', d.id], { env: { SWITCHYARD_URL: s.url, SWITCHYARD_ADMIN_TOKEN: s.token } });
  assert.equal(shown.code, 0, shown.stderr);
  assert.match(shown.stdout, /signature {4}webhook-signature: v1,\S+\n/);
});

test('rotation: both secrets sign during the overlap, the library verifies with either; a given secret must be in the form', async (t) => {
  const s = await deliveryServer(t, fast);
  const r = await scriptedReceiver(t, () => 200);
  const { installationId, secret: old } = await installStandard(s, r.url);
  const refused = await s.api('POST', `/api/v1/webhooks/${installationId}/secret/rotate`, { secret: 'a-perfectly-long-secret-1' });
  assert.equal(refused.status, 400);
  assert.equal(refused.body.error.where, 'secret');
  assert.match(refused.body.error.message, /signs with standard-webhooks: a standard-webhooks secret is whsec_ followed by base64/);
  assert.ok(!JSON.stringify(refused.body).includes('a-perfectly-long-secret-1'), 'the secret is not repeated');

  const rotated = await s.api('POST', `/api/v1/webhooks/${installationId}/secret/rotate`);
  assert.equal(rotated.status, 200);
  const fresh = rotated.body.secret as string;
  assert.match(fresh, /^whsec_[A-Za-z0-9+/]{32}$/);
  const sent = await s.send(samplePayload('site_view'));
  await s.settled(sent.body.deliveries[0].id);
  const q = r.requests.at(-1)!;
  assert.equal(String(q.headers['webhook-signature']).split(' ').length, 2, 'one v1, entry per live secret');
  assert.equal(libraryVerifies(fresh, q), true, 'the new secret verifies');
  assert.equal(libraryVerifies(old, q), true, 'the old one too, during the overlap');
  assert.equal(libraryVerifies('whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', q), false);

  // A secret of one's own, in the form, is taken.
  const own = `whsec_${Buffer.alloc(32, 7).toString('base64')}`;
  assert.equal((await s.api('POST', `/api/v1/webhooks/${installationId}/secret/rotate`, { secret: own })).status, 200);
  const again = await s.send(samplePayload('site_view'));
  await s.settled(again.body.deliveries[0].id);
  const last = r.requests.at(-1)!;
  assert.equal(String(last.headers['webhook-signature']).split(' ').length, 3, 'own, fresh, and the first one are all live');
  for (const secret of [own, fresh, old]) assert.equal(libraryVerifies(secret, last), true);
});

test('choosing the scheme: the manifest default, an unknown one refused, a switch refused while the secret is not in the form, then taken at the next attempt', async (t) => {
  const s = await deliveryServer(t, fast);
  const r = await scriptedReceiver(t, () => 200);
  const legacy = 'whsec_cli_receiver_0001'; // a secret of one's own, given before there was a choice
  const inst = await s.api('POST', '/api/v1/installations', {
    integration: 'webhook',
    configuration: { webhook_url: r.url, event_types: 'site_view' },
    webhook_secret: legacy,
  });
  assert.equal(inst.status, 201);
  const id = inst.body.installation.id as string;
  assert.equal(inst.body.installation.configuration.signature_scheme, 'platform', 'the default');

  const unknown = await s.api('PATCH', `/api/v1/installations/${id}`, { configuration: { signature_scheme: 'stripe' } });
  assert.equal(unknown.status, 400);
  assert.match(JSON.stringify(unknown.body.error.problems), /signature_scheme/);
  assert.match(JSON.stringify(unknown.body.error.problems), /platform.*standard-webhooks/);

  const blocked = await s.api('PATCH', `/api/v1/installations/${id}`, { configuration: { signature_scheme: 'standard-webhooks' } });
  assert.equal(blocked.status, 400, JSON.stringify(blocked.body));
  assert.equal(blocked.body.error.where, 'configuration.signature_scheme');
  assert.match(blocked.body.error.message, /cannot sign with standard-webhooks: its signing secret is not in that form/);
  assert.match(blocked.body.error.hint, new RegExp(`switchyard installations secret ${id} --rotate`));
  assert.ok(!JSON.stringify(blocked.body).includes(legacy));
  assert.equal((await s.api('GET', `/api/v1/installations/${id}`)).body.installation.configuration.signature_scheme, 'platform', 'nothing stored');

  const badInstall = await s.api('POST', '/api/v1/installations', {
    integration: 'webhook',
    configuration: { webhook_url: r.url, event_types: 'site_view', signature_scheme: 'standard-webhooks' },
    webhook_secret: legacy,
  });
  assert.equal(badInstall.status, 400);
  assert.equal(badInstall.body.error.where, 'webhook_secret');

  // Rotate, then switch: the next delivery carries the webhook-* headers, signed by the new secret
  // alone (the old one, still live, is not in the form); back to platform, both sign again.
  const fresh = (await s.api('POST', `/api/v1/webhooks/${id}/secret/rotate`)).body.secret as string;
  const switched = await s.api('PATCH', `/api/v1/installations/${id}`, { configuration: { signature_scheme: 'standard-webhooks' } });
  assert.equal(switched.status, 200, JSON.stringify(switched.body));
  const one = await s.send(samplePayload('site_view'));
  await s.settled(one.body.deliveries[0].id);
  const q = r.requests.at(-1)!;
  assert.equal(String(q.headers['webhook-signature']).split(' ').length, 1);
  assert.equal(libraryVerifies(fresh, q), true);
  assert.equal(q.headers['x-platform-signature'], undefined);

  assert.equal((await s.api('PATCH', `/api/v1/installations/${id}`, { configuration: { signature_scheme: 'platform' } })).status, 200);
  const two = await s.send(samplePayload('site_view'));
  await s.settled(two.body.deliveries[0].id);
  const p = r.requests.at(-1)!;
  assert.equal(p.headers['webhook-signature'], undefined);
  assert.match(String(p.headers['x-platform-signature']), /^t=\d+,v1=[0-9a-f]{64},v1=[0-9a-f]{64}$/);
});

test('the reference receiver under standard-webhooks: verifies with the library-signed headers, deduplicates by webhook-id, refuses the other scheme', async (t) => {
  const processed: string[] = [];
  const server = http.createServer(
    createReceiver({ secrets: [PUBLISHED.secret], scheme: 'standard-webhooks', onEvent: (e) => void processed.push(e.eventId!) }),
  );
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.after(() => server.close());
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
  const wh = new Webhook(PUBLISHED.secret);
  const body = JSON.stringify({ eventId: 'dlv_rx_1', type: 'site_view', installationId: 'inst_1', sourceEventId: 'evt_1' });
  const now = new Date();
  const headers = {
    'webhook-id': 'dlv_rx_1',
    'webhook-timestamp': String(Math.floor(now.getTime() / 1000)),
    'webhook-signature': wh.sign('dlv_rx_1', now, body),
  };
  const ok = await fetch(url, { method: 'POST', body, headers });
  assert.equal(ok.status, 200);
  assert.deepEqual(await ok.json(), { received: true });
  const dup = await fetch(url, { method: 'POST', body, headers });
  assert.deepEqual(await dup.json(), { received: true, duplicate: true });
  const platform = await fetch(url, {
    method: 'POST',
    body,
    headers: { 'x-platform-signature': signatureHeader([PUBLISHED.secret], Number(headers['webhook-timestamp']), body) },
  });
  assert.equal(platform.status, 401);
  assert.deepEqual(await platform.json(), { error: 'missing webhook-id header' });
  const forged = await fetch(url, { method: 'POST', body, headers: { ...headers, 'webhook-id': 'dlv_rx_2' } });
  assert.equal(forged.status, 401);
  await new Promise((r) => setTimeout(r, 50));
  assert.deepEqual(processed, ['dlv_rx_1']);
});

test('switchyard sign / verify / receive --scheme standard-webhooks, against the published vector and a running server', async (t) => {
  const signed = await runCli([
    'sign',
    '--scheme',
    'standard-webhooks',
    '--secret',
    PUBLISHED.secret,
    '--id',
    PUBLISHED.id,
    '--timestamp',
    String(PUBLISHED.t),
    '--data',
    PUBLISHED.body,
  ]);
  assert.equal(signed.code, 0, signed.stderr);
  assert.equal(signed.stdout, `webhook-id: ${PUBLISHED.id}\nwebhook-timestamp: ${PUBLISHED.t}\nwebhook-signature: ${PUBLISHED.signature}\n`);
  const fromBody = await runCli(['sign', '--scheme', 'standard-webhooks', '--timestamp', String(PUBLISHED.t), '--data', '{"eventId":"dlv_x"}'], {
    env: { SWITCHYARD_WEBHOOK_SECRET: PUBLISHED.secret },
  });
  assert.match(fromBody.stdout, /^webhook-id: dlv_x\n/, "the id defaults to the body's eventId");
  const args = [
    'verify',
    '--scheme',
    'standard-webhooks',
    '--header',
    PUBLISHED.signature,
    '--id',
    PUBLISHED.id,
    '--timestamp',
    String(PUBLISHED.t),
    '--now',
    String(PUBLISHED.t + 5),
    '--secret',
    PUBLISHED.secret,
  ];
  const valid = await runCli([...args, '--data', PUBLISHED.body]);
  assert.equal(valid.code, 0, valid.stderr);
  assert.match(valid.stdout, new RegExp(`valid \\(t=${PUBLISHED.t}\\)`));
  const tampered = await runCli([...args, '--data', `${PUBLISHED.body} `]);
  assert.equal(tampered.code, 1);
  assert.match(tampered.stderr, /signature invalid: no signature matches/);
  for (const [bad, where] of [
    [['sign', '--scheme', 'svix', '--secret', PUBLISHED.secret, '--data', 'x'], /--scheme must be platform or standard-webhooks, got "svix"/],
    [['sign', '--scheme', 'standard-webhooks', '--secret', 'not base64!', '--id', 'a', '--data', 'x'], /secret 1 of 1 is not a standard-webhooks secret/],
    [['sign', '--scheme', 'standard-webhooks', '--secret', PUBLISHED.secret, '--data', 'not json'], /pass --id/],
    [['verify', '--scheme', 'standard-webhooks', '--header', 'v1,x', '--secret', PUBLISHED.secret, '--data', '{}', '--id', 'a'], /needs --timestamp/],
    [['verify', '--header', 't=1,v1=aa', '--secret', 's', '--data', 'x', '--id', 'a'], /--id and --timestamp go with --scheme standard-webhooks/],
  ] as const) {
    const r = await runCli([...bad]);
    assert.equal(r.code, 2, `${bad.join(' ')}: ${r.stdout}${r.stderr}`);
    assert.match(r.stderr, where);
    assert.ok(!r.stderr.includes('not base64!'), 'a secret is never printed');
  }

  // The reference receiver, run as a person would, verifies what a running server sends.
  const s = await deliveryServer(t, fast);
  const { child, match, output } = await spawnCli(
    t,
    ['receive', '--port', '0', '--scheme', 'standard-webhooks', '--json', '--secret', PUBLISHED.secret],
    /receiving on (http:\/\/[^ ]+) \(POST, webhook-signature checked/,
  );
  t.after(() => void child.kill('SIGTERM'));
  await installStandard(s, match[1], { webhook_secret: PUBLISHED.secret });
  const sent = await s.send(samplePayload('site_view'));
  const d = await s.settled(sent.body.deliveries[0].id);
  assert.equal(d.status, 'delivered');
  assert.equal(d.attempts[0].responseExcerpt, '{"received":true}');
  await new Promise((r) => setTimeout(r, 100));
  const line = output()
    .split('\n')
    .find((l) => l.startsWith('{"received"'));
  assert.ok(line, output());
  assert.equal(JSON.parse(line).event.eventId, d.id);
  assert.ok(!output().includes(PUBLISHED.secret), 'the secret is never printed');
});

test("a delivery queued before deliveries had their own eventId keeps its event's in the headers", () => {
  const legacy = { id: 'dlv_old', eventId: 'evt_old', body: '{"eventId":"evt_old","type":"site_view","installationId":"inst_1"}' };
  assert.equal(sentEventId(legacy), 'evt_old');
  assert.equal(sentEventId({ ...legacy, body: '{"eventId":"dlv_old","type":"site_view","installationId":"inst_1","sourceEventId":"evt_old"}' }), 'dlv_old');
});
