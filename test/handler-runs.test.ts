/**
 * The handler queue on a real SQLite file with an injected clock: the retry schedule is the
 * webhooks' (base_delay * 2^(n-1) plus jitter, max_retries), and the work is owned by SQL leases:
 * a process that claimed a run and died loses it when the lease runs out, and another process
 * sharing the store runs it.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { memoryLogger } from '../src/log/index.ts';
import { createHandlerQueue, type EventHandlers, type HandlerQueue, type RunOutcome } from '../src/events/index.ts';
import { openStore, type Store } from '../src/store/index.ts';
import { tmpDir, waitFor } from './helpers/index.ts';
import { allMigrations } from '../src/server/migrations.ts';

const RETRY = { max_retries: 3, base_delay: 1000, jitter: 0.1, retry_after_max: 60_000 };
const LEASE_MS = 40_000;

function queueOn(store: Store, clock: { now: number }, run: EventHandlers['run'], recorded: string[]): HandlerQueue {
  const event = { eventId: 'evt_1', type: 'site_view' };
  return createHandlerQueue({
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

/** Enqueue the event's runs in a transaction, as ingest does, then wake the worker. */
function ingest(store: Store, q: HandlerQueue, at: number): void {
  store.db.transaction(() => q.enqueueEvent({ eventId: 'evt_1', type: 'site_view' }, at))();
  q.wake();
}

test('a handler that keeps failing is retried on the webhook schedule, then failed and replayable', async (t) => {
  const store = openStore(tmpDir(t), { migrations: allMigrations() });
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
  ingest(store, q, clock.now);
  const run = () => q.ofEvent('evt_1')[0];
  // Each retry waits base_delay * 2^(n-1) plus jitter * that * random (0.5 here): 1050, 2100, 4200 ms.
  for (const delay of [1050, 2100, 4200]) {
    await waitFor(() => recorded.length === attemptsAt.length && run().status === 'retrying' && run().attemptCount === attemptsAt.length);
    const due = Date.parse(run().nextAttemptAt!);
    assert.equal(due - clock.now, delay);
    clock.now = due - 1;
    q.wake();
    await new Promise((r) => setTimeout(r, 20));
    assert.equal(attemptsAt.length, recorded.length, 'nothing runs before its time');
    clock.now = due;
    q.wake();
    await waitFor(() => attemptsAt.length === recorded.length + 1);
  }
  await waitFor(() => run().status === 'failed');
  assert.deepEqual(
    attemptsAt.map((a) => a - attemptsAt[0]),
    [0, 1050, 3150, 7350],
  );
  assert.equal(run().attemptCount, 4, 'max_retries (3) after the first attempt');
  assert.equal(run().nextAttemptAt, null);
  assert.equal(run().lastInvocation, 'req_4');
  assert.equal(run().lastError, 'exception: boom');

  assert.deepEqual(q.replay({ since: 0, until: clock.now }), [run().id]);
  assert.equal(run().status, 'pending');
  await waitFor(() => attemptsAt.length === 5);
  await waitFor(() => run().attemptCount === 1 && run().status === 'retrying');
});

test('a run claimed by a process that died is taken by another process once its lease runs out', async (t) => {
  const dir = tmpDir(t);
  const storeA = openStore(dir, { migrations: allMigrations() });
  const storeB = openStore(dir, { migrations: allMigrations() }); // a second process on the same SQLite file
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
  ingest(storeA, a, clock.now);
  await waitFor(() => ranBy.length === 1);
  assert.equal(b.ofEvent('evt_1')[0].running, true, 'the run is leased, in the store');

  clock.now += LEASE_MS - 1;
  b.wake();
  await new Promise((r) => setTimeout(r, 20));
  assert.deepEqual(ranBy, ['a'], 'another process leaves a leased run alone');

  clock.now += 1;
  b.wake();
  await waitFor(() => recordedB.length === 1);
  assert.deepEqual(ranBy, ['a', 'b']);
  const run = b.ofEvent('evt_1')[0];
  assert.equal(run.status, 'delivered');
  assert.equal(run.lastInvocation, 'req_b');

  // The first process coming back late does not overwrite what the lease holder recorded.
  finishA();
  await new Promise((r) => setTimeout(r, 20));
  assert.equal(b.ofEvent('evt_1')[0].lastInvocation, 'req_b');
  assert.equal(b.ofEvent('evt_1')[0].attemptCount, 1);
  await a.stop(0);
});
