/**
 * A paused webhook installation's events wait: each makes a delivery in status `held` (one row, no
 * attempt, not a failure), kept across a restart and by retention; resume makes them due at once,
 * in event order, signed as usual, on a fresh retry schedule.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { verifySignature, type Delivery, type DeliveryDetail } from '../src/webhooks/index.ts';
import { tmpDir, waitFor } from './helpers/index.ts';
import { inspectionServer } from './inspection-support.ts';
import { scriptedReceiver } from './webhooks-support.ts';
import { capabilityOf } from '../src/module/capabilities.ts';

const DAY = 86_400_000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

test('pause holds new events as held deliveries, across a restart; resume sends them in event order, signed', async (t) => {
  const dataDir = join(tmpDir(t), 'data');
  // One attempt at a time per endpoint, so arrival order is sending order.
  const over = { data_dir: dataDir, webhooks: { per_endpoint_concurrency: 1, base_delay: 50, jitter: 0 } };
  let s = await inspectionServer(t, over);
  const r = await scriptedReceiver(t, () => 200);
  const installed = await s.api('POST', '/api/v1/installations', { integration: 'webhook', configuration: { webhook_url: r.url, event_types: 'site_view' } });
  assert.equal(installed.status, 201);
  const inst = installed.body.installation.id as string;
  const secret = installed.body.webhookSecret as string;

  const paused = await s.cli(['installations', 'pause', inst]);
  assert.equal(paused.code, 0, paused.stderr);
  const sent: Array<{ eventId: string; delivery: string }> = [];
  for (let i = 0; i < 3; i++) {
    const e = await s.send('site_view', { url: `https://docs.example.com/page-${i}` });
    assert.equal(e.deliveries.length, 1, 'an event to a paused installation still makes its delivery');
    sent.push({ eventId: e.eventId, delivery: e.deliveries[0].id });
  }
  await sleep(500);
  assert.equal(r.requests.length, 0, 'nothing is sent while paused');

  const held = await s.cliJson<{ deliveries: Delivery[] }>(['deliveries', 'list', '--status', 'held']);
  assert.deepEqual(
    held.deliveries.map((d) => d.id).reverse(),
    sent.map((x) => x.delivery),
  );
  for (const d of held.deliveries) {
    assert.deepEqual([d.status, d.held, d.nextAttemptAt, d.attemptCount], ['held', true, null, 0]);
  }
  const table = await s.cli(['deliveries', 'list', '--installation', inst]);
  assert.match(table.stdout, /held\s+0\s+0\/4\s+at resume\n/);
  // Not attempted, so not a failure: no attempt counted, and the queue gauge says held.
  const page = await (await fetch(`${s.url}/metrics`, { headers: { authorization: `Bearer ${s.token}` } })).text();
  assert.match(page, /^switchyard_webhook_deliveries\{state="held"\} 3$/m);
  assert.match(page, /^switchyard_webhook_attempts_total\{outcome="failed",trigger="automatic"\} 0$/m);
  // Retention never purges a queued delivery, held ones included, however old.
  const purged = await capabilityOf(s.services, 'retention').run({ now: Date.now() + 400 * DAY });
  assert.equal(purged.deliveries + purged.failedDeliveries, 0);

  // Stop and start the server on the same data directory: they are still held, still unsent.
  await s.close();
  s = await inspectionServer(t, over);
  await sleep(300);
  assert.equal(r.requests.length, 0, 'a restart does not send held deliveries');
  const afterRestart = (await s.api('GET', '/api/v1/deliveries?status=held')).body.deliveries as Delivery[];
  assert.equal(afterRestart.length, 3);

  const resumed = await s.cli(['installations', 'resume', inst]);
  assert.equal(resumed.code, 0, resumed.stderr);
  const done: DeliveryDetail[] = [];
  for (const x of sent) done.push(await s.settled(x.delivery));
  assert.deepEqual(
    done.map((d) => d.status),
    ['delivered', 'delivered', 'delivered'],
  );
  for (const d of done) assert.deepEqual([d.attemptCount, d.scheduledAttempts, d.attempts[0].outcome], [1, 1, 'success']);

  // In event order, each signed with the installation's secret over the exact bytes.
  assert.deepEqual(
    r.requests.map((q) => JSON.parse(q.body).sourceEventId),
    sent.map((x) => x.eventId),
  );
  for (const q of r.requests) {
    const v = verifySignature(q.headers['x-platform-signature'] as string, Buffer.from(q.body), [secret]);
    assert.equal(v.ok, true, JSON.stringify(v));
  }
  // A new event after the resume is sent at once, not held.
  const after = await s.send('site_view');
  assert.equal((await s.settled(after.deliveries[0].id)).status, 'delivered');
  assert.equal(r.requests.length, 4);
});

test('a pause holds queued retries and in-flight attempts end held; replaying into a paused installation holds too', async (t) => {
  const s = await inspectionServer(t, { webhooks: { max_retries: 3, base_delay: 100, jitter: 0 } });
  let answer = 500;
  let release: (() => void) | undefined;
  // The first request is held open until the pause is in place.
  const r = await scriptedReceiver(t, async (n) => {
    if (n === 1) await new Promise<void>((ok) => (release = ok));
    return answer;
  });
  const inst = await s.subscribe(r.url, ['site_view', 'page_feedback']);
  const inFlight = (await s.send('site_view')).deliveries[0].id;
  await waitFor(() => release);
  assert.equal((await s.api('POST', `/api/v1/installations/${inst}/pause`)).status, 200);
  release!();
  // Its attempt ends with a retry scheduled, but the installation is paused: held.
  const d = await waitFor(async () => {
    const x = (await s.api('GET', `/api/v1/deliveries/${inFlight}`)).body as DeliveryDetail;
    return x.attempts.length === 1 ? x : undefined;
  });
  assert.deepEqual([d.status, d.nextAttemptAt, d.attempts[0].outcome], ['held', null, 'retry']);
  await sleep(300);
  assert.equal(r.requests.length, 1, 'the retry waits for the resume');

  // A manual retry is the user's own choice: it goes out, and a failure leaves it held.
  const manual = await s.cli(['deliveries', 'retry', inFlight, '--json']);
  assert.equal(manual.code, 1);
  assert.equal(JSON.parse(manual.stdout).attempt.outcome, 'failed');
  assert.equal(JSON.parse(manual.stdout).delivery.status, 'held');

  answer = 200;
  assert.equal((await s.api('POST', `/api/v1/installations/${inst}/resume`)).status, 200);
  const sentAgain = await s.settled(inFlight);
  assert.equal(sentAgain.status, 'delivered');
  assert.deepEqual(
    sentAgain.attempts.map((a) => [a.manual, a.outcome]),
    [
      [false, 'retry'],
      [true, 'failed'],
      [false, 'success'],
    ],
  );
  assert.deepEqual([sentAgain.attemptCount, sentAgain.scheduledAttempts], [3, 2], 'the pause kept its schedule: this was its second automatic attempt');

  // Replaying a delivered delivery of a paused installation puts it back held, not sent.
  assert.equal((await s.api('POST', `/api/v1/installations/${inst}/pause`)).status, 200);
  const replayed = await s.cli(['deliveries', 'replay', inFlight, '--json']);
  assert.equal(replayed.code, 0, replayed.stderr);
  assert.deepEqual(JSON.parse(replayed.stdout).held, [inFlight]);
  assert.equal((await s.api('GET', `/api/v1/deliveries/${inFlight}`)).body.status, 'held');
  const before = r.requests.length;
  assert.equal((await s.api('POST', `/api/v1/installations/${inst}/resume`)).status, 200);
  await waitFor(async () => (await s.api('GET', `/api/v1/deliveries/${inFlight}`)).body.status === 'delivered');
  assert.equal(r.requests.length, before + 1);
});

test('removing webhook_url holds the queued deliveries, and a replay or manual retry is refused until a URL is set again', async (t) => {
  const s = await inspectionServer(t, { webhooks: { max_retries: 3, base_delay: 60_000, jitter: 0 } });
  let answer = 200;
  const r = await scriptedReceiver(t, () => answer);
  const inst = await s.subscribe(r.url, ['site_view', 'page_feedback']);
  const delivered = (await s.send('site_view')).deliveries[0].id;
  assert.equal((await s.settled(delivered)).status, 'delivered');
  answer = 500;
  const queued = (await s.send('page_feedback')).deliveries[0].id;
  await waitFor(async () => ((await s.api('GET', `/api/v1/deliveries/${queued}`)).body as DeliveryDetail).status === 'retrying');
  const sent = r.requests.length;

  const patched = await s.api('PATCH', `/api/v1/installations/${inst}`, { configuration: { webhook_url: null } });
  assert.equal(patched.status, 200);
  assert.equal(((await s.api('GET', `/api/v1/deliveries/${queued}`)).body as DeliveryDetail).status, 'held', 'the queued retry waits for a URL');

  const replay = await s.api('POST', '/api/v1/deliveries/replay', { status: 'delivered' });
  assert.equal(replay.status, 409);
  assert.match(replay.body.error.message, new RegExp(`installation ${inst} has no webhook_url any more`));
  const one = await s.api('POST', `/api/v1/deliveries/${delivered}/replay`);
  assert.equal(one.status, 409);
  assert.match(one.body.error.message, /has no webhook_url any more/);
  assert.equal(((await s.api('GET', `/api/v1/deliveries/${delivered}`)).body as DeliveryDetail).status, 'delivered', 'the refused replay changed nothing');
  const retry = await s.api('POST', `/api/v1/deliveries/${queued}/retry`);
  assert.equal(retry.status, 409);
  assert.match(retry.body.error.message, /has no webhook_url any more/);
  await sleep(200);
  assert.equal(r.requests.length, sent, 'nothing went to the old URL');

  // A URL set again releases what was held, to the new URL.
  answer = 200;
  const other = await scriptedReceiver(t, () => 200);
  assert.equal((await s.api('PATCH', `/api/v1/installations/${inst}`, { configuration: { webhook_url: other.url } })).status, 200);
  assert.equal((await s.settled(queued)).status, 'delivered');
  assert.equal(other.requests.length, 1);
  assert.equal(r.requests.length, sent);
});
