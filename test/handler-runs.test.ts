/**
 * The handler queue on a real SQLite file with an injected clock: the retry schedule is the
 * webhooks' (base_delay * 2^(n-1) plus jitter, max_retries), and the work is owned by SQL leases:
 * a process that claimed a run and died loses it when the lease runs out, and another process
 * sharing the store runs it. With SWITCHYARD_TEST_PG_URL (the PostgreSQL suites) the store is a
 * PostgreSQL database, and the two processes are two connections to it.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { memoryLogger } from '../src/log/index.ts';
import { createHandlerQueue, type EventHandlers, type HandlerQueue, type RunOutcome } from '../src/events/index.ts';
import { openStore, type Store } from '../src/store/index.ts';
import { freshPostgresDatabase, tmpDir, waitFor } from './helpers/index.ts';
import { allMigrations } from '../src/server/migrations.ts';

/** The store of a test's data directory: its SQLite file, or its database on the suites' PostgreSQL. */
const storeOf = (dir: string): Store =>
  openStore(dir, { migrations: allMigrations(), url: process.env.SWITCHYARD_TEST_PG_URL ? freshPostgresDatabase(dir) : undefined });

const RETRY = { max_retries: 3, base_delay: 1000, jitter: 0.1, retry_after_max: 60_000 };
const LEASE_MS = 40_000;

function queueOn(store: Store, clock: { now: number }, run: EventHandlers['run'], recorded: string[]): HandlerQueue {
  const event = { eventId: 'evt_1', type: 'site_view' };
  return createHandlerQueue({
    database: store.database,
    db: store.db,
    log: memoryLogger(),
    handlers: () => ({ targets: () => [{ installationId: 'inst_1', integration: 'recorder' }], run }),
    event: (id) => (id === event.eventId ? event : undefined),
    config: () => ({ ...RETRY, concurrency: 4, leaseMs: LEASE_MS }),
    now: () => clock.now,
    random: () => 0.5,
    onRecorded: (c, next) => recorded.push(next === 'dropped' ? 'dropped' : next.status),
  });
}

/**
 * Enqueue the event's runs in a transaction, as ingest does, then wake the worker: through the
 * store's contract, or (`sync`) on the synchronous connection ingest still uses.
 */
async function ingest(store: Store, q: HandlerQueue, at: number, sync = false): Promise<void> {
  const event = { eventId: 'evt_1', type: 'site_view' };
  if (sync) store.db.transaction(() => q.enqueueEvent(event, at))();
  else await store.database.transaction((tx) => q.enqueue(tx, event, at));
  q.wake();
}

test('a handler that keeps failing is retried on the webhook schedule, then failed and replayable', async (t) => {
  const store = storeOf(tmpDir(t));
  t.after(() => store.close());
  const clock = { now: 1_000_000 };
  const attemptsAt: number[] = [];
  const recorded: string[] = [];
  let n = 0;
  const q = queueOn(
    store,
    clock,
    async (): Promise<RunOutcome> => {
      attemptsAt.push(clock.now);
      return { kind: 'ran', ok: false, invocationId: `req_${++n}`, error: 'exception: boom' };
    },
    recorded,
  );
  t.after(() => q.stop(0));
  await ingest(store, q, clock.now);
  const run = async () => (await q.ofEvent('evt_1'))[0];
  // Each retry waits base_delay * 2^(n-1) plus jitter * that * random (0.5 here): 1050, 2100, 4200 ms.
  for (const delay of [1050, 2100, 4200]) {
    await waitFor(async () => recorded.length === attemptsAt.length && (await run()).status === 'retrying' && (await run()).attemptCount === attemptsAt.length);
    const due = Date.parse((await run()).nextAttemptAt!);
    assert.equal(due - clock.now, delay);
    clock.now = due - 1;
    q.wake();
    await new Promise((r) => setTimeout(r, 20));
    assert.equal(attemptsAt.length, recorded.length, 'nothing runs before its time');
    const made = attemptsAt.length;
    clock.now = due;
    q.wake();
    await waitFor(() => attemptsAt.length === made + 1);
  }
  await waitFor(async () => (await run()).status === 'failed');
  assert.deepEqual(
    attemptsAt.map((a) => a - attemptsAt[0]),
    [0, 1050, 3150, 7350],
  );
  const failed = await run();
  assert.equal(failed.attemptCount, 4, 'max_retries (3) after the first attempt');
  assert.equal(failed.nextAttemptAt, null);
  assert.equal(failed.lastInvocation, 'req_4');
  assert.equal(failed.lastError, 'exception: boom');

  assert.deepEqual(await q.replay({ since: 0, until: clock.now }), [failed.id]);
  assert.equal((await run()).status, 'pending');
  await waitFor(() => attemptsAt.length === 5);
  await waitFor(async () => (await run()).attemptCount === 1 && (await run()).status === 'retrying');
});

test('a run claimed by a process that died is taken by another process once its lease runs out', async (t) => {
  const dir = tmpDir(t);
  const storeA = storeOf(dir);
  const storeB = storeOf(dir); // a second process on the same store
  t.after(() => (storeA.close(), storeB.close()));
  const clock = { now: 5_000_000 };
  const ranBy: string[] = [];
  let finishA!: () => void;
  // A claims the run and never comes back (as if its process were killed mid-invocation).
  const a = queueOn(
    storeA,
    clock,
    () =>
      new Promise<RunOutcome>((resolve) => {
        ranBy.push('a');
        finishA = () => resolve({ kind: 'ran', ok: true, invocationId: 'req_a' });
      }),
    [],
  );
  const recordedB: string[] = [];
  const b = queueOn(
    storeB,
    clock,
    async () => {
      ranBy.push('b');
      return { kind: 'ran', ok: true, invocationId: 'req_b' };
    },
    recordedB,
  );
  t.after(() => b.stop(0));
  await ingest(storeA, a, clock.now, true);
  await waitFor(() => ranBy.length === 1);
  assert.equal((await b.ofEvent('evt_1'))[0].running, true, 'the run is leased, in the store');

  clock.now += LEASE_MS - 1;
  b.wake();
  await new Promise((r) => setTimeout(r, 20));
  assert.deepEqual(ranBy, ['a'], 'another process leaves a leased run alone');

  clock.now += 1;
  b.wake();
  await waitFor(() => recordedB.length === 1);
  assert.deepEqual(ranBy, ['a', 'b']);
  const run = (await b.ofEvent('evt_1'))[0];
  assert.equal(run.status, 'delivered');
  assert.equal(run.lastInvocation, 'req_b');

  // The first process coming back late does not overwrite what the lease holder recorded.
  finishA();
  await new Promise((r) => setTimeout(r, 20));
  assert.equal((await b.ofEvent('evt_1'))[0].lastInvocation, 'req_b');
  assert.equal((await b.ofEvent('evt_1'))[0].attemptCount, 1);
  await a.stop(0);
});
