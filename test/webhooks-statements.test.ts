/**
 * The delivery sender's record turn against the store: what one delivery costs, held to a budget
 * (one event with one subscriber, stored in one statement, its attempt started at commit and answered
 * 200, recorded in one commit: on SQLite a transaction of two statements, the delivery's state and
 * the attempt's row; on PostgreSQL one statement with the feed's order lock, no BEGIN or COMMIT; no
 * read of the store to arm the scheduler's timer, however many events go by), and
 * a retry that is due by the time its failure is recorded is sent, not left for a wake that never
 * comes. Runs on PostgreSQL too (SWITCHYARD_TEST_PG_URL).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { connectStore } from '../src/store/index.ts';
import { allMigrations } from '../src/server/migrations.ts';
import { createQueue } from '../src/webhooks/index.ts';
import { dueStatements } from '../src/webhooks/queue-due.ts';
import { statement, type Engine } from '../src/store/contract.ts';
import { freshPostgresDatabase, tmpDir, waitFor } from './helpers/index.ts';
import { shownSql } from './helpers/counting.ts';
import { countedSender } from './webhooks-support.ts';
import { samplePayload } from '../src/events/index.ts';
import { createEvents } from '../src/events/service.ts';
import { memoryLogger } from '../src/log/index.ts';

/**
 * Not an event's: the once-a-second look at what other processes made due (a turn slowed by load
 * can span one), and on SQLite the caches' check of other processes' commits, once per event-loop
 * turn whatever asks (store/generations.ts).
 */
const periodicIn = (sql: string[], engine: Engine) =>
  sql.filter(
    (s) =>
      isLook(s, engine) ||
      s === shownSql(dueStatements.leasedNow, engine) ||
      s === shownSql(dueStatements.firstUnleased, engine) ||
      s === 'PRAGMA data_version',
  ).length;
/** The look at due origins, as the counter shows it. */
const isLook = (s: string, engine: Engine) => s === shownSql(dueStatements.liveOrigins, engine);

test('a delivered event costs one commit and a fixed few statements after its ingest, and the scheduler asks the store nothing to arm its timer', async (t) => {
  const { store, rx, recorded, send, n, reset } = await countedSender(t, () => 200);
  const engine = store.database.engine;
  const pg = engine === 'postgres';
  // The first ones also read the installation's signing secret into the caches (on PostgreSQL the
  // caches are dropped once more when the store's listening connection opens: store/generations.ts).
  await send(100);
  await waitFor(() => recorded.length === 1);
  await send(0);
  await waitFor(() => recorded.length === 2);

  const EVENTS = 20;
  for (let i = 1; i <= EVENTS; i++) {
    reset();
    await send(i);
    // Its ingest: the delivery's INSERT, which reads the installation's paused flag itself.
    assert.equal(n.statements - periodicIn(n.sql, engine), 1, `event ${i}: its delivery is stored in one statement (${n.sql.join(' | ')})`);
    reset(); // from here: what the sender does for it
    await waitFor(() => recorded.length === i + 2);
    await new Promise((r) => setTimeout(r, 20)); // and anything it does after its record
    const periodic = periodicIn(n.sql, engine);
    // A look is its scan, its read of what is leased, and one read per origin with an attempt in
    // flight (this event's, when the look comes while it is sent): count the looks, not their reads.
    const looks = n.sql.filter((s) => isLook(s, engine)).length;
    const turns = n.sql.filter((s) => s === 'PRAGMA data_version').length;
    assert.ok(looks <= 2 && turns <= 2, `event ${i}: the periodic looks ran ${looks} times, the caches' check ${turns} times in one event's turn`);
    // PostgreSQL: the state, the feed's order lock and the attempt in one statement, its own commit
    // (no BEGIN and COMMIT round trips); SQLite: the state and the attempt in one transaction.
    const [transactions, budget] = pg ? [0, 1] : [1, 2];
    assert.equal(n.commits, transactions, `event ${i}: ${transactions} transaction records its attempt (${n.sql.join(' | ')})`);
    assert.ok(n.statements - periodic <= budget, `event ${i}: at most ${budget} statements, got ${n.statements - periodic}: ${n.sql.join(' | ')}`);
  }
  assert.equal(rx.requests.length, EVENTS + 2);
});

test('an ingested event is stored with its delivery in one statement on PostgreSQL (two on SQLite); a repeated eventId stores neither again and gives back the slot it reserved', async (t) => {
  const { store, rx, recorded, events, n, reset } = await countedSender(t, () => 200, { per_endpoint_concurrency: 1 });
  const engine = store.database.engine;
  const site = (eventId: string) => samplePayload('site_view', { eventId });
  // The first ones read the installation's signing secret into the caches (on PostgreSQL dropped
  // once more when the store's listening connection opens, as above).
  await events.ingest(site('evt_warm'));
  await waitFor(() => recorded.length === 1);
  await events.ingest(site('evt_0'));
  await waitFor(() => recorded.length === 2);
  for (let i = 1; i <= 5; i++) {
    reset();
    const r = await events.ingest(site(`evt_${i}`));
    assert.equal(r.duplicate, false);
    assert.equal(r.deliveries.length, 1);
    const own = n.sql.filter((s) => !periodicIn([s], engine));
    assert.equal(n.commits, 1, `event ${i}: one transaction (${n.sql.join(' | ')})`);
    assert.equal(own.length, engine === 'postgres' ? 1 : 2, `event ${i}: ${own.join(' | ')}`);
    assert.match(own[0], engine === 'postgres' ? /^WITH ev AS \(INSERT INTO events/ : /^INSERT INTO events/);
    await waitFor(() => recorded.length === i + 2);
  }
  // Repeats, alone and in a batch with a new event and itself twice: nothing stored again, and the
  // one slot of the endpoint is free for the new one (a repeat's reservation given back).
  assert.equal((await events.ingest(site('evt_3'))).duplicate, true);
  const batch = await events.ingestBatch([site('evt_2'), site('evt_new'), site('evt_new'), site('evt_5')]);
  assert.deepEqual(
    batch.results.map((r) => ('duplicate' in r ? [r.duplicate, r.deliveries.length] : r.status)),
    [
      [true, 0],
      [false, 1],
      [true, 0],
      [true, 0],
    ],
  );
  await waitFor(() => recorded.length === 8);
  await new Promise((r) => setTimeout(r, 50));
  assert.deepEqual(
    rx.requests.map((q) => JSON.parse(q.body).sourceEventId),
    ['evt_warm', 'evt_0', 'evt_1', 'evt_2', 'evt_3', 'evt_4', 'evt_5', 'evt_new'],
    'each event delivered once',
  );
  const count = statement<{ n: number }>('SELECT COUNT(*) AS n FROM webhook_deliveries');
  assert.equal(Number((await store.database.get(count))!.n), 8);
});

test('a repeat of an eventId inside a batch is a duplicate whatever it names: one naming no installation gets no delivery to the installations the first left out', async (t) => {
  const { store, rx, recorded, service, url } = await countedSender(t, () => 200);
  await store.database.transaction((tx) => service.webhooks.createSecret(tx, 'inst_2'));
  // Two subscribers; the first copy names inst_1 (its alone), the second names none.
  const events = createEvents({
    database: store.database,
    log: memoryLogger(),
    subscriptions: {
      forEventType: () => [
        { installationId: 'inst_1', url },
        { installationId: 'inst_2', url },
      ],
    },
    deliveries: service.deliveries,
  });
  const batch = await events.ingestBatch([
    samplePayload('site_view', { eventId: 'evt_dup', installationId: 'inst_1' }),
    samplePayload('site_view', { eventId: 'evt_dup' }),
  ]);
  assert.deepEqual(
    batch.results.map((r) => ('duplicate' in r ? [r.duplicate, r.deliveries.length] : r.status)),
    [
      [false, 1],
      [true, 0],
    ],
  );
  await waitFor(() => recorded.length === 1);
  await new Promise((r) => setTimeout(r, 100));
  const rows = await store.database.all<{ installation_id: string }>(statement("SELECT installation_id FROM webhook_deliveries WHERE event_id = 'evt_dup'"));
  assert.deepEqual(
    rows.map((r) => r.installation_id),
    ['inst_1'],
    'no delivery stored for the repeat',
  );
  assert.equal(rx.requests.length, 1, 'and none sent');
  assert.equal(Number((await store.database.get(statement<{ n: number }>("SELECT delivery_count AS n FROM events WHERE id = 'evt_dup'")))!.n), 1);
});

test('a retry due by the time its failure is recorded is sent at once (no timer is armed for a time already past)', async (t) => {
  // No delay between attempts: every retry is due when its failure is recorded.
  const { rx, recorded, send } = await countedSender(t, (n) => (n < 3 ? 500 : 200), { base_delay: 0, jitter: 0, max_retries: 5 });
  await send(1);
  await waitFor(() => recorded.length === 3, 3_000);
  assert.deepEqual(recorded, ['retry', 'retry', 'success']);
  assert.equal(rx.requests.length, 3);
});

test('an attempt in flight is not work due: the look at what other processes made due sees its origin claimable when its lease runs out', async (t) => {
  const dir = tmpDir(t);
  const store = await connectStore(dir, { migrations: allMigrations(), url: process.env.SWITCHYARD_TEST_PG_URL ? freshPostgresDatabase(dir) : undefined });
  t.after(() => store.close());
  const queue = createQueue(store.database, { maxAttempts: () => 5 });
  const now = Date.now();
  const until = now + 30_000;
  const delivery = (i: number, url: string, lease?: { owner: string; until: number }) => ({
    eventId: `evt_${i}`,
    eventType: 'site_view',
    installationId: 'inst_1',
    url,
    body: '{}',
    now,
    ...(lease ? { lease } : {}),
  });
  // Stored already leased (as ingest does when this process sends it at once): in flight, not due.
  // Two of one origin, one leased longer (as deliveries waiting in a process's line are): the earliest lease's end counts.
  await store.database.transaction((tx) =>
    queue.enqueueMany(tx, [
      delivery(1, 'http://a.test/hook', { owner: 'another-process', until: until + 10_000 }),
      delivery(3, 'http://a.test/hook', { owner: 'another-process', until }),
    ]),
  );
  await queue.refreshDue(store.database);
  assert.equal(
    queue.mayHaveDue(now + 1, () => 4),
    false,
    'a leased delivery is no work due',
  );
  assert.equal(queue.nextDueAfter(now + 1), until, 'its origin is looked at again when the lease runs out');
  // The look reads indexes, not the backlog: each origin is a search of the due index (the next
  // origin past the last one, then its earliest time), never a scan of every due row.
  if (store.database.engine === 'sqlite') {
    const plan = (await store.database.all<{ detail: string }>(statement(`EXPLAIN QUERY PLAN ${dueStatements.liveOrigins.sql as string}`)))
      .map((p) => p.detail)
      .join(' | ');
    assert.match(plan, /SEARCH d USING COVERING INDEX webhook_deliveries_due_by_origin \(origin>\?\)/);
    assert.match(plan, /SEARCH d USING COVERING INDEX webhook_deliveries_due_by_origin \(origin=\?/);
    assert.doesNotMatch(plan, /SCAN webhook_deliveries|SCAN d\b/);
  }
  // One of another origin that no one holds is due at once.
  await store.database.transaction((tx) => queue.enqueueMany(tx, [delivery(2, 'http://b.test/hook')]));
  await queue.refreshDue(store.database);
  assert.equal(
    queue.mayHaveDue(now + 1, () => 4),
    true,
  );
});
