/**
 * Deliveries leased at their ingest beyond their endpoint's free slots (sender-ahead.ts): stored
 * once, leased to the ingesting process, and sent as slots free without a claim of their own; in
 * event order; as many as the endpoint's slots send in a second at their pace, the rest stored due
 * and claimed (in bulk, a line at a time, while the endpoint keeps pace), after which new ones are
 * stored due until those are taken; none while the
 * endpoint's attempts hang; a pause, a removal or a new URL reaches those waiting; a manual
 * attempt takes one that waits. Runs on PostgreSQL too (SWITCHYARD_TEST_PG_URL).
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { statement } from '../src/store/contract.ts';
import { samplePayload } from '../src/events/index.ts';
import { ASSUMED_HOLD_MS, ingestAhead, INGEST_AHEAD_MS as W, MAX_INGEST_AHEAD } from '../src/webhooks/sender-ahead.ts';
import { testConfig, waitFor } from './helpers/index.ts';
import { countedSender, scriptedReceiver } from './webhooks-support.ts';
import { dueStatements } from '../src/webhooks/queue-due.ts';
import { createDueSignals } from '../src/webhooks/due-signals.ts';
import { createAheadQueue } from '../src/webhooks/sender-ahead.ts';
import { createQueue, originOf } from '../src/webhooks/queue.ts';
import { createSlots } from '../src/webhooks/sender-slots.ts';
import { shownSql } from './helpers/counting.ts';
import { inspectionServer } from './inspection-support.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** A claim of due deliveries (by origin, or by their numbers), as the counter shows it (its first 80 characters). */
const isClaim = (sql: string) => sql.startsWith('UPDATE webhook_deliveries SET lease_until = @until, lease_owner = @owner WHERE s');
const leased = statement<{ n: number }>('SELECT COUNT(*) AS n FROM webhook_deliveries WHERE lease_owner IS NOT NULL');
const arrivals = (requests: Array<{ body: string }>) => requests.map((r) => JSON.parse(r.body).sourceEventId as string);

type Server = Awaited<ReturnType<typeof inspectionServer>>;
const siteViews = (n: number) => Array.from({ length: n }, () => samplePayload('site_view'));

/** A webhook installation for `types` at `url`, through the API; returns its id. */
async function install(s: Server, url: string, types = 'site_view'): Promise<string> {
  const installed = await s.api('POST', '/api/v1/installations', { integration: 'webhook', configuration: { webhook_url: url, event_types: types } });
  assert.equal(installed.status, 201, JSON.stringify(installed.body));
  return installed.body.installation.id as string;
}

/** Three single events delivered one by one (the endpoint's pace is learnt), then `settleMs` for the last one's record. */
async function warm(s: Server, rx: { requests: unknown[] }, settleMs: number): Promise<void> {
  for (let i = 0; i < 3; i++) assert.equal((await s.api('POST', '/api/v1/events', siteViews(1))).status, 202);
  await waitFor(() => rx.requests.length === 3);
  await sleep(settleMs);
}

/** A one-slot endpoint answering 200 after `ms`, its pace learnt from three deliveries one by one; the counters then reset. */
async function oneSlotPaced(t: TestContext, ms: number) {
  const s = await countedSender(
    t,
    async () => {
      await sleep(ms);
      return 200;
    },
    { per_endpoint_concurrency: 1 },
  );
  for (const i of [1, 2, 3]) {
    await s.send(i);
    await waitFor(() => s.recorded.length === i);
  }
  s.reset();
  return s;
}

test("leased at ingest: as many as the endpoint's slots send in a second at their pace, at most MAX_INGEST_AHEAD; before its pace is known, as if an exchange took ASSUMED_HOLD_MS", () => {
  assert.equal(ingestAhead(4, undefined), (4 * W) / ASSUMED_HOLD_MS);
  assert.equal(ingestAhead(1, 20), W / 20);
  assert.equal(ingestAhead(4, 10), (4 * W) / 10);
  assert.equal(ingestAhead(32, 0.1), MAX_INGEST_AHEAD);
  assert.equal(ingestAhead(2, 0), MAX_INGEST_AHEAD, 'an exchange measured at 0 ms is not a division by zero');
  assert.equal(ingestAhead(1, 5_000), 0, 'an endpoint that takes seconds gets its free slots only');
});

test('a backlog at a fast endpoint is stored leased at its ingest and sent in event order without a claim', async (t) => {
  // One slot: arrival order is sending order.
  const s = await countedSender(t, () => 200, { per_endpoint_concurrency: 1 });
  // Its pace is learnt from the first exchanges.
  const WARM = 10;
  for (let i = 1; i <= WARM; i++) {
    await s.send(i);
    await waitFor(() => s.recorded.length === i);
  }
  s.reset();
  // Batches of 10, each sent once the ones before are delivered: at most ten wait, within what one
  // slot sends in a second at its pace even while an exchange on loopback takes 100 ms (a loaded
  // machine: 25 a batch, two waiting, needed 20 ms or less and once found a claim on PostgreSQL
  // with the suite's files running side by side).
  const ids = Array.from({ length: 200 }, (_, i) => 100 + i);
  for (let b = 0; b < ids.length; b += 10) {
    await waitFor(() => s.recorded.length >= WARM + b, 10_000);
    await s.sendMany(ids.slice(b, b + 10));
  }
  await waitFor(() => s.recorded.length === WARM + ids.length, 20_000);
  assert.deepEqual(
    arrivals(s.rx.requests).slice(WARM),
    ids.map((i) => `evt_${i}`),
    'in event order',
  );
  assert.equal(s.n.sql.filter(isClaim).length, 0, `no claims: ${s.n.sql.filter(isClaim).join(' | ')}`);
  assert.ok(s.recorded.every((o) => o === 'success'));
  assert.equal(s.rx.requests.length, WARM + ids.length, 'each sent once');
});

test('beyond what its slots send in half the attempt time-out (a second here) they are stored due and claimed; later ones wait behind them, in event order', async (t) => {
  const s = await oneSlotPaced(t, 20);
  // About 50 a second at 20 ms an exchange: 120 are more than that.
  const first = Array.from({ length: 120 }, (_, i) => 100 + i);
  await s.sendMany(first);
  const atIngest = (await s.store.database.get(leased))!.n;
  assert.ok(atIngest >= 2 && atIngest <= 52, `its free slot and up to a second's worth leased at ingest (${atIngest} of ${first.length})`);
  // Some of the first batch are due in the store: these are stored due behind them, not leased.
  await s.sendMany([300, 301, 302]);
  assert.equal((await s.store.database.get(leased))!.n, atIngest - (s.recorded.length - 3), 'stored due behind the due ones');
  await waitFor(() => s.recorded.length === 3 + first.length + 3, 20_000);
  assert.deepEqual(
    arrivals(s.rx.requests).slice(3),
    [...first, 300, 301, 302].map((i) => `evt_${i}`),
  );
  assert.ok(s.n.sql.filter(isClaim).length > 0, `the ones stored due were claimed: ${[...new Set(s.n.sql)].join('\n')}`);
});

test('a backlog stored due at an endpoint that keeps pace is claimed in bulk, a line at a time, and once it is all taken new deliveries are leased at their ingest again', async (t) => {
  const s = await oneSlotPaced(t, 5);
  // At about 6 ms an exchange one slot sends ~160 in a second: 600 are well beyond its line.
  const burst = Array.from({ length: 600 }, (_, i) => 1000 + i);
  await s.sendMany(burst);
  const atIngest = (await s.store.database.get(leased))!.n;
  assert.ok(atIngest < 400, `most of the burst is stored due (${atIngest} leased at ingest)`);
  await waitFor(() => s.recorded.length === 3 + burst.length, 30_000);
  const claims = s.n.sql.filter(isClaim).length;
  t.diagnostic(`${burst.length - atIngest} of ${burst.length} stored due, taken in ${claims} claims`);
  // Claims of a few slots' worth (aheadWaiting: two rows here) took one statement per one or two
  // deliveries; a claim in bulk takes at least half a line.
  assert.ok(claims >= 1 && claims <= Math.ceil((burst.length - atIngest) / 40), `${burst.length - atIngest} stored due, taken in ${claims} claims`);
  s.reset();
  await s.sendMany([2000, 2001, 2002, 2003, 2004]);
  await waitFor(() => s.recorded.length === 3 + burst.length + 5, 10_000);
  assert.equal(s.n.sql.filter(isClaim).length, 0, 'the backlog all taken, new deliveries are leased at their ingest, not stored due and claimed');
  assert.deepEqual(
    arrivals(s.rx.requests).slice(3),
    [...burst, 2000, 2001, 2002, 2003, 2004].map((i) => `evt_${i}`),
    'in event order',
  );
});

test('an endpoint whose attempt hangs: what waits for its slot goes back to the store, and nothing more is leased beyond its slots until it moves', async (t) => {
  let hang: (() => void) | undefined;
  const s = await countedSender(
    t,
    async (n) => {
      if (n === 4) await new Promise<void>((r) => (hang = r));
      return 200;
    },
    { per_endpoint_concurrency: 1 },
  );
  for (const i of [1, 2, 3]) {
    await s.send(i);
    await waitFor(() => s.recorded.length === i);
  }
  await s.send(4);
  await waitFor(() => hang !== undefined);
  await s.sendMany([5, 6, 7, 8]);
  // Leased at ingest behind the attempt in flight; given back once its exchange is seen stalled.
  await waitFor(async () => (await s.store.database.get(leased))!.n === 1, 5_000).catch(() => {
    throw new Error('the line behind a hung attempt was not given back');
  });
  await s.sendMany([9, 10]);
  assert.equal((await s.store.database.get(leased))!.n, 1, 'only the attempt in flight holds a lease');
  hang!();
  await waitFor(() => s.recorded.length === 10, 10_000);
  assert.deepEqual(
    arrivals(s.rx.requests),
    [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].map((i) => `evt_${i}`),
    'in event order',
  );
});

test('a pause reaches deliveries leased at ingest and waiting for a slot; resume sends them at once', async (t) => {
  const s = await inspectionServer(t, { webhooks: { per_endpoint_concurrency: 1 } });
  // 100 ms an exchange, one slot: about ten a second, so a batch of 20 waits well past the pause.
  const r = await scriptedReceiver(t, async () => {
    await sleep(100);
    return 200;
  });
  const inst = await install(s, r.url);
  const db = s.services.store.database;
  await warm(s, r, 150);

  const batch = await s.api('POST', '/api/v1/events', siteViews(20));
  assert.equal(batch.status, 202, JSON.stringify(batch.body));
  const waiting = (await db.get(leased))!.n;
  assert.ok(waiting > 2, `leased at ingest beyond the one slot: ${waiting}`);
  const paused = await s.api('POST', `/api/v1/installations/${inst}/pause`);
  assert.equal(paused.status, 200, JSON.stringify(paused.body));
  const atPause = r.requests.length;
  await sleep(500);
  // The attempt in flight at the pause ends; nothing that waited for a slot goes out.
  assert.ok(r.requests.length <= atPause + 1, `sent after the pause: ${r.requests.length - atPause}`);
  const held = (await s.api('GET', `/api/v1/deliveries?installation=${inst}&status=held&limit=100`)).body.deliveries as unknown[];
  assert.equal(held.length, 23 - r.requests.length, 'the rest are held');
  assert.ok(held.length >= 5, `most of the batch was still waiting at the pause: ${held.length} held`);
  assert.equal((await db.get(leased))!.n, 0, 'their leases given back');

  const resumed = await s.api('POST', `/api/v1/installations/${inst}/resume`);
  assert.equal(resumed.status, 200);
  // Due at once, not when a lease of theirs runs out (40 s).
  await waitFor(() => r.requests.length === 23, 10_000);
});

test('a manual retry of a delivery waiting for its slot is not refused as busy, and is its only attempt', async (t) => {
  let gate: (() => void) | undefined;
  const s = await inspectionServer(t, { webhooks: { per_endpoint_concurrency: 1 } });
  const r = await scriptedReceiver(t, async (n) => {
    if (n === 4) await new Promise<void>((done) => (gate = done)); // the batch's first holds the slot
    return 200;
  });
  await install(s, r.url);
  await warm(s, r, 50);
  const batch = await s.api('POST', '/api/v1/events', siteViews(5));
  assert.equal(batch.status, 202);
  await waitFor(() => gate !== undefined);
  const last = batch.body.results.at(-1).deliveries[0].id as string;
  const retried = await s.api('POST', `/api/v1/deliveries/${last}/retry`);
  assert.equal(retried.status, 200, JSON.stringify(retried.body));
  assert.equal(retried.body.attempt.outcome, 'success');
  gate!();
  await waitFor(() => r.requests.length === 3 + 5, 10_000);
  await sleep(300);
  const sent = r.requests.filter((q) => JSON.parse(q.body).eventId === last).length;
  assert.equal(sent, 1, 'the manual attempt is its only one: it left the line it waited in');
  assert.equal(r.requests.length, 3 + 5, 'each sent once');
});

test('a new URL reaches deliveries leased at ingest and waiting for a slot: they go to the new one', async (t) => {
  const s = await inspectionServer(t, { webhooks: { per_endpoint_concurrency: 1 } });
  const slow = async () => {
    await sleep(30);
    return 200;
  };
  const before = await scriptedReceiver(t, slow);
  const after = await scriptedReceiver(t, slow);
  const other = await scriptedReceiver(t, () => 200);
  const inst = await install(s, before.url);
  await install(s, other.url, 'page_feedback');
  await warm(s, before, 50);

  const batch = await s.api('POST', '/api/v1/events', siteViews(20));
  assert.equal(batch.status, 202);
  assert.ok((await s.services.store.database.get(leased))!.n > 2, 'leased at ingest beyond the one slot');
  const patched = await s.api('PATCH', `/api/v1/installations/${inst}`, { configuration: { webhook_url: after.url } });
  assert.equal(patched.status, 200, JSON.stringify(patched.body));
  const atChange = before.requests.length;
  // An event for another endpoint at once: its ingest wakes the scheduler, which looks at the new
  // origin while the moved deliveries are still leased here (given back next): they must still be found.
  assert.equal((await s.api('POST', '/api/v1/events', [samplePayload('page_feedback')])).status, 202);
  await waitFor(() => before.requests.length + after.requests.length === 23, 10_000);
  assert.ok(before.requests.length <= atChange + 1, `sent to the old URL after the change: ${before.requests.length - atChange}`);
  assert.ok(after.requests.length >= 20 - (atChange - 3) - 1, `the rest went to the new URL: ${after.requests.length}`);
});

test('deliveries stored due at ingest are announced to the serving processes beside this one once their transaction commits; none for what is leased here', async (t) => {
  let announced = 0;
  let deliveriesOnly: boolean | undefined;
  // Two processes share the endpoint's two slots: one here. Each exchange takes 100 ms.
  const s = await countedSender(
    t,
    async (_n, _r, res) => {
      await sleep(100);
      res.end('ok');
    },
    { per_endpoint_concurrency: 2 },
    {
      index: 0,
      count: 2,
      onDue: () => {},
      announceDue: (only) => {
        announced++;
        deliveriesOnly = only;
      },
    },
  );
  await s.send(1); // the free slot here: leased and sent, nothing to tell
  await waitFor(() => s.rx.requests.length === 1);
  assert.equal(announced, 0, 'a delivery started here is not announced');
  await s.sendMany(Array.from({ length: 100 }, (_, i) => 100 + i)); // beyond the slot and the line: stored due
  assert.ok(announced >= 1, 'told at its commit');
  assert.equal(deliveriesOnly, true, 'as deliveries alone: the other processes do not look for handler runs');
});

test('deliveries stored due at ingest: the first commit of a burst is told at once, the others at most once a window (100 ms by default); a rolled-back one is not', async (t) => {
  const s = await countedSender(t, () => 200);
  let announced = 0;
  // A window of 500 ms, not 100: two commits inside it must not depend on how loaded the machine is.
  const due = createDueSignals({
    database: s.database,
    queue: { refreshDue: async () => {} },
    link: { onDue: () => {}, announceDue: () => void announced++ },
    wake: () => {},
    announceEveryMs: 500,
  });
  t.after(() => due.stop());
  const storedDue = () => s.database.transaction(async (tx) => due.storedDueAfter(tx));
  await storedDue();
  assert.equal(announced, 1, 'told at its commit');
  await storedDue();
  await storedDue();
  assert.equal(announced, 1, 'within the window of the last telling: not told again yet');
  await waitFor(() => announced === 2, 2_000);
  await sleep(700);
  assert.equal(announced, 2, 'the two commits inside the window were told once, after it');
  await assert.rejects(
    s.database.transaction(async (tx) => {
      due.storedDueAfter(tx);
      throw new Error('rolled back');
    }),
    /rolled back/,
  );
  await sleep(250);
  assert.equal(announced, 2, 'a rolled-back enqueue tells nobody');
});

test('a serving process told of due work many times at once looks in the store at once, then at most every 100 ms', async (t) => {
  let told: () => void = () => assert.fail('the sender did not listen for due work');
  const s = await countedSender(t, () => 200, {}, { index: 0, count: 2, onDue: (fn) => void (told = fn), announceDue: () => {} });
  const look = shownSql(dueStatements.liveOrigins, s.database.engine);
  const looks = () => s.n.sql.filter((q) => q === look).length;
  await sleep(150); // past the window of the look at start, if any
  s.reset();
  for (let i = 0; i < 20; i++) told();
  await waitFor(() => looks() >= 1, 1_000);
  for (let i = 0; i < 20; i++) told();
  await sleep(300);
  // The first telling looks at once, the other 39 in one look at the window's end (and the
  // once-a-second look may fall inside this wait).
  assert.ok(looks() >= 2 && looks() <= 3, `${looks()} looks for 40 tellings: ${s.n.sql.join(' | ')}`);
});

/** Events `ids` stored due at an endpoint of `perEndpoint` slots whose own sender is stopped: the test's queue claims them. */
async function storedDueWithSenderStopped(t: TestContext, perEndpoint: number, ids: number[]) {
  const s = await countedSender(t, () => 200, { per_endpoint_concurrency: perEndpoint });
  await s.service.stop(0);
  const now = Date.now();
  await s.database.transaction((tx) =>
    s.service.deliveries.enqueueEvents(
      tx,
      ids.map((i) => ({ event: { eventId: `evt_${i}`, type: 'site_view' }, subscriptions: [{ installationId: 'inst_1', url: s.url }] })),
      now,
      { startAtCommit: false }, // stored due
    ),
  );
  return { s, now };
}

test("one claim of due deliveries at a time in a process: one asked while another's transaction is open claims nothing, and the scheduler is woken when it ends", async (t) => {
  const { s, now } = await storedDueWithSenderStopped(t, 4, [1, 2, 3]);
  let woken = 0;
  const queue = createQueue(s.store.database, { maxAttempts: () => 5 });
  await queue.refreshDue(s.store.database); // its hints of due work, as at a start
  const ahead = createAheadQueue({
    queue,
    database: s.store.database,
    config: () => ({ ...testConfig(t).webhooks, per_endpoint_concurrency: 4 }),
    clock: () => now + 1,
    owner: 'test-owner',
    slots: createSlots(),
    start: () => {},
    stopped: () => false,
    wake: () => void woken++,
  });
  // Both claims in one transaction stand for two at once (on PostgreSQL, two transactions: the
  // scheduler's and a record turn's, each taking the next due row, sent in their commits' order).
  const [first, second] = await s.store.database.transaction(async (tx) => {
    const a = await ahead.claimDue(tx, now + 1);
    const b = await ahead.claimDue(tx, now + 1);
    assert.equal(woken, 0, 'not woken before the open claim ends');
    return [a, b];
  });
  assert.equal(first.length, 3, 'the first claim took every due delivery');
  assert.deepEqual(second, [], 'the one asked meanwhile claimed nothing');
  assert.equal(woken, 1, 'the scheduler is woken once the open claim commits');
  const again = await s.store.database.transaction((tx) => ahead.claimDue(tx, now + 1));
  assert.deepEqual(again, [], 'nothing left to claim');
  assert.equal(woken, 1, 'a claim with nobody waiting wakes nobody');
});

test('a bulk claim that takes the whole backlog: its endpoint counts as due until the deliveries are in its line, and one whose installation was removed meanwhile is not sent', async (t) => {
  const { s, now } = await storedDueWithSenderStopped(t, 1, [1, 2, 3, 4, 5]);
  const origin = originOf(s.url);
  const queue = createQueue(s.store.database, { maxAttempts: () => 5 });
  await queue.refreshDue(s.store.database);
  const slots = createSlots();
  slots.freed(origin, now, 5); // it keeps pace: a slot freed just now, 5 ms an exchange (a line of 200)
  const started: string[] = [];
  let sendable = true;
  const ahead = createAheadQueue({
    queue,
    database: s.store.database,
    config: () => ({ ...testConfig(t).webhooks, per_endpoint_concurrency: 1 }),
    clock: () => now + 1,
    owner: 'test-owner',
    slots,
    start: (c) => void started.push(c.id),
    stopped: () => false,
    sendable: () => sendable,
  });
  const claimed = await s.store.database.transaction(async (tx) => {
    const out = await ahead.claimDue(tx, now + 1);
    assert.ok(queue.dueBy(origin, now + 1), 'still due while the claim is open: a new delivery is stored due behind these');
    return out;
  });
  assert.equal(claimed.length, 5);
  assert.ok(
    claimed.every((a) => a.bulk),
    'claimed in bulk',
  );
  assert.ok(queue.dueBy(origin, now + 1), 'still due once committed, until they are in the line');
  ahead.add(claimed);
  assert.equal(queue.dueBy(origin, now + 1), false, 'in the line, the backlog all taken: new deliveries may be leased at their ingest');
  sendable = false; // its installation removed
  ahead.drainOrigin(origin);
  assert.deepEqual(started, [], 'none sent');
  await waitFor(async () => (await s.store.database.get(leased))!.n === 0);
});

test('once due signals are stopped, a telling that arrives looks at nothing and tells nobody', async (t) => {
  const s = await countedSender(t, () => 200);
  let told: () => void = () => assert.fail('not listening');
  let looks = 0;
  let announced = 0;
  const due = createDueSignals({
    database: s.database,
    queue: { refreshDue: async () => void looks++ },
    link: { onDue: (fn) => void (told = fn), announceDue: () => void announced++ },
    wake: () => {},
  });
  due.listen();
  told(); // a look at once
  await waitFor(() => looks === 1);
  due.stop();
  told(); // within 100 ms of the last look: it would have armed a look for the window's end
  await s.database.transaction(async (tx) => due.storedDueAfter(tx));
  await sleep(250);
  assert.equal(looks, 1, 'no look after stop');
  assert.equal(announced, 0, 'nobody told after stop');
});
