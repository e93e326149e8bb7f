/**
 * Spec 6.2: each delivery has a unique eventId. One event sent to two webhook installations makes
 * two deliveries a receiver must both process (it deduplicates by eventId), while a retry of one
 * delivery keeps its eventId (so the receiver still recognizes it). Real server, real SQLite, the
 * real `switchyard receive` process.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnCli, waitFor } from './helpers/index.ts';
import { samplePayload } from '../src/events/index.ts';
import { deliveryServer, scriptedReceiver, type Received } from './webhooks-support.ts';

test('one event to two webhook installations behind one reference receiver: both processed, each under its own eventId, stable across a retry', async (t) => {
  const s = await deliveryServer(t, { webhooks: { base_delay: 50, jitter: 0 } });
  // The reference receiver, as a person runs it, knowing both installations' secrets.
  const secrets = ['whsec_event_ids_first_0001', 'whsec_event_ids_second_002'];
  const { child, match, output } = await spawnCli(
    t,
    ['receive', '--port', '0', '--json', ...secrets.flatMap((x) => ['--secret', x])],
    /receiving on (http:\/\/[^ ]+)/,
  );
  t.after(() => void child.kill('SIGTERM'));
  // In front of it: every request is handed on as it came; the first one for installation `a`
  // is answered 500 whatever the receiver said (it processed it: an answer lost on the way back),
  // so the sender retries a delivery the receiver already has.
  const answers: Array<{ body: string; eventIdHeader: string; answer: unknown }> = [];
  let cutFirst: string | undefined;
  const front = await scriptedReceiver(t, async (_n, r: Received, res) => {
    const got = await fetch(match[1], { method: 'POST', body: r.body, headers: { 'x-platform-signature': String(r.headers['x-platform-signature']) } });
    const answer = await got.json();
    answers.push({ body: r.body, eventIdHeader: String(r.headers['x-platform-event-id']), answer });
    const installationId = JSON.parse(r.body).installationId;
    if (installationId === cutFirst) {
      cutFirst = undefined;
      return 500;
    }
    res.writeHead(got.status, { 'content-type': 'application/json' }).end(JSON.stringify(answer));
  });
  const install = async (secret: string) => {
    const r = await s.api('POST', '/api/v1/installations', {
      integration: 'webhook',
      configuration: { webhook_url: front.url, event_types: 'site_view' },
      webhook_secret: secret,
    });
    assert.equal(r.status, 201, JSON.stringify(r.body));
    return r.body.installation.id as string;
  };
  const a = await install(secrets[0]);
  const b = await install(secrets[1]);
  cutFirst = a;

  const event = samplePayload('site_view');
  const sent = await s.send(event);
  assert.equal(sent.status, 202);
  assert.equal(sent.body.deliveries.length, 2);
  const idOf = (inst: string) => sent.body.deliveries.find((d: { installationId: string }) => d.installationId === inst).id as string;
  const [da, db] = await Promise.all([s.settled(idOf(a)), s.settled(idOf(b))]);
  assert.equal(da.status, 'delivered');
  assert.equal(db.status, 'delivered');
  assert.deepEqual(
    da.attempts.map((x) => x.status),
    [500, 200],
    'a was retried once',
  );
  assert.deepEqual(
    db.attempts.map((x) => x.status),
    [200],
  );

  const ofInstallation = (inst: string) => answers.filter((x) => JSON.parse(x.body).installationId === inst);
  // The receiver processed both; the retry of a was recognized as the duplicate it is.
  assert.deepEqual(
    ofInstallation(a).map((x) => x.answer),
    [{ received: true }, { received: true, duplicate: true }],
  );
  assert.deepEqual(
    ofInstallation(b).map((x) => x.answer),
    [{ received: true }],
  );
  // Each delivery names itself: its eventId is its own id, in the body and the header, on every attempt.
  for (const [inst, d, attempts] of [
    [a, da, 2],
    [b, db, 1],
  ] as const) {
    const seen = ofInstallation(inst);
    assert.equal(seen.length, attempts);
    for (const x of seen) {
      const body = JSON.parse(x.body);
      assert.equal(body.eventId, d.id, 'the delivery id is its eventId');
      assert.equal(x.eventIdHeader, d.id, 'X-Platform-Event-Id says the same');
      assert.equal(body.sourceEventId, event.eventId, 'the event it comes from is named');
      assert.equal(body.installationId, inst);
    }
    assert.equal(d.payload && (d.payload as { eventId: string }).eventId, d.id);
    assert.equal(d.eventId, event.eventId, 'the API keeps the source event as eventId');
  }
  assert.notEqual(da.id, db.id);
  const lines = await waitFor(() => {
    const l = output()
      .split('\n')
      .filter((x) => x.startsWith('{'))
      .map((x) => JSON.parse(x));
    // Both processed, and the retry's duplicate said (the receiver writes its lines as they come).
    return l.filter((x) => x.event).length === 2 && l.some((x) => x.duplicate) ? l : undefined;
  });
  const processed = lines
    .filter((x) => x.event)
    .map((x) => x.event.eventId)
    .sort();
  assert.deepEqual(processed, [da.id, db.id].sort());
  assert.deepEqual(
    lines.filter((x) => x.duplicate).map((x) => x.eventId),
    [da.id],
  );
});

test('the source event stays findable: deliveries list --event, show, and a sent sourceEventId of its own is replaced', async (t) => {
  const s = await deliveryServer(t, { webhooks: { base_delay: 50, jitter: 0 } });
  const r = await scriptedReceiver(t, () => 200);
  await s.subscribe(r.url, ['site_view']);
  await s.subscribe(r.url, ['site_view']);
  const event: Record<string, unknown> & { eventId: string } = { ...samplePayload('site_view'), sourceEventId: 'forged' } as any;
  const sent = await s.send(event);
  const ids = sent.body.deliveries.map((d: { id: string }) => d.id).sort();
  await Promise.all(ids.map((id: string) => s.settled(id)));
  const bodies = r.requests.map((q) => JSON.parse(q.body));
  assert.deepEqual(bodies.map((b) => b.eventId).sort(), ids);
  for (const b of bodies) {
    assert.equal(b.sourceEventId, event.eventId);
    assert.deepEqual(Object.keys(b).slice(0, 4), ['eventId', 'type', 'installationId', 'sourceEventId'], 'common fields first');
  }
  const listed = await s.api('GET', `/api/v1/deliveries?event=${event.eventId}`);
  assert.deepEqual(listed.body.deliveries.map((d: { id: string }) => d.id).sort(), ids);
});
