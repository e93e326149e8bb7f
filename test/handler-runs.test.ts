/**
 * The handler queue on a real SQLite file with an injected clock: the retry schedule is the
 * webhooks' (base_delay * 2^(n-1) plus jitter, max_retries), and the work is owned by SQL leases:
 * a process that claimed a run and died loses it when the lease runs out, and another process
 * sharing the store runs it. With SWITCHYARD_TEST_PG_URL (the PostgreSQL suites) the store is a
 * PostgreSQL database, and the two processes are two connections to it.
 */
import { test } from 'node:test';
import pg from 'pg';
import assert from 'node:assert/strict';
import { memoryLogger, type Logger } from '../src/log/index.ts';
import type { Database, Queries, Statement } from '../src/store/contract.ts';
import { createHandlerQueue, type EventHandlers, type HandlerQueue, type RunOutcome } from '../src/events/index.ts';
import { connectStore, type Store } from '../src/store/index.ts';
import { freshPostgresDatabase, tmpDir, waitFor } from './helpers/index.ts';
import { allMigrations } from '../src/server/migrations.ts';

/** The store of a test's data directory: its SQLite file, or its database on the suites' PostgreSQL. */
const storeOf = (dir: string): Promise<Store> =>
  connectStore(dir, { migrations: allMigrations(), url: process.env.SWITCHYARD_TEST_PG_URL ? freshPostgresDatabase(dir) : undefined });

const RETRY = { max_retries: 3, base_delay: 1000, jitter: 0.1, retry_after_max: 60_000 };
const LEASE_MS = 40_000;

function queueOn(
  store: Store,
  clock: { now: number },
  run: EventHandlers['run'],
  recorded: string[],
  opts: { installations?: number; database?: Database; log?: Logger } = {},
): HandlerQueue {
  const event = { eventId: 'evt_1', type: 'site_view' };
  const targets = Array.from({ length: opts.installations ?? 1 }, (_, i) => ({ installationId: `inst_${i + 1}`, integration: 'recorder' }));
  return createHandlerQueue({
    database: opts.database ?? store.database,
    log: opts.log ?? memoryLogger(),
    handlers: () => ({ targets: () => targets, run }),
    event: (id) => (id === event.eventId ? event : undefined),
    config: () => ({ ...RETRY, concurrency: 4, leaseMs: LEASE_MS }),
    now: () => clock.now,
    random: () => 0.5,
    onRecorded: (c, next) => recorded.push(next === 'dropped' ? 'dropped' : next.status),
  });
}

/** Enqueue the event's runs in a transaction, as ingest does, then wake the runner. */
async function ingest(store: Store, q: HandlerQueue, at: number): Promise<void> {
  const event = { eventId: 'evt_1', type: 'site_view' };
  await store.database.transaction((tx) => q.enqueue(tx, event, at));
  q.wake();
}

test('a handler that keeps failing is retried on the webhook schedule, then failed and replayable', async (t) => {
  const store = await storeOf(tmpDir(t));
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

test('a retry already due when its failure is recorded (the turn began after its delay) is run, not left for the lease timer', async (t) => {
  const store = await storeOf(tmpDir(t));
  t.after(() => store.close());
  // The clock jumps past the retry's delay (1,050 ms) right after the failed run's end is read:
  // as when a loaded process starts the recording turn late.
  const clock = {
    at: 1_000_000,
    jump: 0,
    get now() {
      const v = this.at;
      this.at += this.jump;
      this.jump = 0;
      return v;
    },
  };
  const attemptsAt: number[] = [];
  const q = queueOn(
    store,
    clock,
    async (): Promise<RunOutcome> => {
      attemptsAt.push(clock.at);
      if (attemptsAt.length > 1) return { kind: 'ran', ok: true, invocationId: 'req_2' };
      clock.jump = 5_000;
      return { kind: 'ran', ok: false, invocationId: 'req_1', error: 'exception: boom' };
    },
    [],
  );
  t.after(() => q.stop(0));
  // Enqueued as ingest does, woken only by its commit (no extra wake that could find the retry).
  await store.database.transaction((tx) => q.enqueue(tx, { eventId: 'evt_1', type: 'site_view' }, clock.at));
  await waitFor(() => attemptsAt.length === 2, 5_000);
  await waitFor(async () => (await q.ofEvent('evt_1'))[0].status === 'delivered');
});

test('a due run skipped while another transaction held it (PostgreSQL) is looked at again, not left for a wake that never comes', async (t) => {
  if (!process.env.SWITCHYARD_TEST_PG_URL) return t.skip("SKIP LOCKED is PostgreSQL's (SQLite serialises claims on its write lock)");
  const store = await storeOf(tmpDir(t));
  t.after(() => store.close());
  const clock = { now: 1_000_000 };
  const attemptsAt: number[] = [];
  const q = queueOn(
    store,
    clock,
    async (): Promise<RunOutcome> => {
      attemptsAt.push(clock.now);
      return attemptsAt.length > 1
        ? { kind: 'ran', ok: true, invocationId: 'req_2' }
        : { kind: 'ran', ok: false, invocationId: 'req_1', error: 'exception: boom' };
    },
    [],
  );
  t.after(() => q.stop(0));
  await ingest(store, q, clock.now);
  await waitFor(async () => (await q.ofEvent('evt_1'))[0]?.status === 'retrying');
  // Another transaction holds the run's row while the queue looks: its claim skips it.
  const other = new pg.Client({ connectionString: store.postgres!.url });
  await other.connect();
  t.after(() => other.end());
  await other.query('BEGIN');
  await other.query('SELECT seq FROM event_handler_runs FOR UPDATE');
  clock.now = Date.parse((await q.ofEvent('evt_1'))[0].nextAttemptAt!);
  q.wake();
  await new Promise((r) => setTimeout(r, 300));
  assert.equal(attemptsAt.length, 1, 'skipped while held');
  await other.query('ROLLBACK');
  await waitFor(() => attemptsAt.length === 2, 5_000);
});

test('a run claimed by a process that died is taken by another process once its lease runs out', async (t) => {
  const dir = tmpDir(t);
  const storeA = await storeOf(dir);
  const storeB = await storeOf(dir); // a second process on the same store
  t.after(() => (storeA.close(), storeB.close()));
  const clock = { now: 5_000_000 };
  // A's time stands still: a process killed mid-invocation never sees the lease it holds run out
  // (with the shared clock, A's queue, alive in this test, could take its own expired run again
  // before B: seen under load in CI).
  const clockA = { now: clock.now };
  const ranBy: string[] = [];
  let finishA!: () => void;
  // A claims the run and never comes back (as if its process were killed mid-invocation).
  const a = queueOn(
    storeA,
    clockA,
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
  await ingest(storeA, a, clock.now);
  // Waits are generous: on PostgreSQL beside the other suites a turn's round trips take a while.
  await waitFor(() => ranBy.length === 1, 15_000);
  assert.equal((await b.ofEvent('evt_1'))[0].running, true, 'the run is leased, in the store');

  clock.now += LEASE_MS - 1;
  b.wake();
  await new Promise((r) => setTimeout(r, 20));
  assert.deepEqual(ranBy, ['a'], 'another process leaves a leased run alone');

  clock.now += 1;
  b.wake();
  await waitFor(() => recordedB.length === 1, 15_000);
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

/**
 * The store as the queue sees it, watched: the statements it runs (their SQLite text) and its
 * commits; `refuse` transactions in a row fail as a store that went away would.
 */
function watched(database: Database) {
  const seen = { statements: [] as Array<{ sql: string; inTransaction: boolean }>, commits: 0, refuse: 0 };
  const text = (s: Statement) => (typeof s.sql === 'string' ? s.sql : s.sql.sqlite);
  const wrap = <Q extends Queries>(q: Q, inTransaction: boolean): Q => ({
    ...q,
    all: (s, p) => (seen.statements.push({ sql: text(s), inTransaction }), q.all(s, p)),
    get: (s, p) => (seen.statements.push({ sql: text(s), inTransaction }), q.get(s, p)),
    value: (s, p) => (seen.statements.push({ sql: text(s), inTransaction }), q.value(s, p)),
    run: (s, p) => (seen.statements.push({ sql: text(s), inTransaction }), q.run(s, p)),
  });
  const transaction: Database['transaction'] = async (fn) => {
    if (seen.refuse > 0) {
      seen.refuse--;
      throw new Error('the store went away');
    }
    const value = await database.transaction((tx) => fn(wrap(tx, true)));
    seen.commits++;
    return value;
  };
  return { seen, database: { ...wrap(database, false), transaction, transactionUnlessBusy: transaction } as Database };
}

const isOutcomes = (sql: string) => /^UPDATE event_handler_runs SET status = o\.status/.test(sql.trim());

test('runs that end in the same turn have their outcomes recorded together: one statement, one commit', async (t) => {
  const store = await storeOf(tmpDir(t));
  t.after(() => store.close());
  const w = watched(store.database);
  const clock = { now: 2_000_000 };
  const recorded: string[] = [];
  let open!: () => void;
  let gate = new Promise<void>((r) => (open = r));
  let started = 0;
  const q = queueOn(
    store,
    clock,
    async (installationId): Promise<RunOutcome> => {
      started++;
      await gate;
      return { kind: 'ran', ok: true, invocationId: `req_${installationId}` };
    },
    recorded,
    { installations: 4, database: w.database },
  );
  t.after(() => q.stop(0));
  await ingest(store, q, clock.now);
  await waitFor(() => started === 4);
  const before = w.seen.statements.length;
  const commits = w.seen.commits;
  open();
  await waitFor(() => recorded.length === 4);
  const turn = w.seen.statements.slice(before);
  assert.equal(turn.filter((s) => isOutcomes(s.sql)).length, 1, 'four outcomes, one statement');
  assert.ok(turn.filter((s) => isOutcomes(s.sql)).every((s) => s.inTransaction));
  assert.equal(w.seen.commits - commits, 1, 'one commit');
  const runs = await q.ofEvent('evt_1');
  assert.deepEqual(
    runs.map((r) => [r.installationId, r.status, r.attemptCount, r.lastInvocation, r.running]),
    [1, 2, 3, 4].map((i) => [`inst_${i}`, 'delivered', 1, `req_inst_${i}`, false]),
  );
  assert.deepEqual(await q.counts(), { pending: 0, retrying: 0, held: 0, delivered: 4, failed: 0, cancelled: 0 });

  // A delivered run runs again when replayed alone; one still scheduled (or running: held at the
  // gate here, so the runner cannot finish it first) is refused, naming its status.
  gate = new Promise<void>((r) => (open = r));
  const again = await q.replayOne(runs[0].id);
  assert.equal(again.status, 'pending');
  await assert.rejects(q.replayOne(runs[0].id), (e: Error & { code?: string }) => e.code === 'conflict' && /is pending/.test(e.message));
  open();
  await waitFor(() => recorded.length === 5);
  assert.equal((await q.get(runs[0].id))?.status, 'delivered');
  await assert.rejects(q.replayOne('hdl_none'), (e: Error & { code?: string }) => e.code === 'not_found');
});

test('outcomes the store refused to record are recorded by a later turn, not lost until their lease runs out', async (t) => {
  const store = await storeOf(tmpDir(t));
  t.after(() => store.close());
  const w = watched(store.database);
  const log = memoryLogger();
  const clock = { now: 3_000_000 };
  const recorded: string[] = [];
  let finish!: () => void;
  let ran = 0;
  const q = queueOn(
    store,
    clock,
    () =>
      new Promise<RunOutcome>((resolve) => {
        ran++;
        finish = () => resolve({ kind: 'ran', ok: true, invocationId: 'req_1' });
      }),
    recorded,
    { database: w.database, log },
  );
  t.after(() => q.stop(0));
  await ingest(store, q, clock.now);
  await waitFor(() => ran === 1);
  w.seen.refuse = 1;
  finish();
  await waitFor(() => log.lines.some((l) => l.msg === 'handler scheduler failed; retrying in 1 s'));
  // The outcome waits, ours (the lease has not run out: the clock stands still), for the next turn.
  await waitFor(() => recorded.length === 1, 5000);
  const run = (await q.ofEvent('evt_1'))[0];
  assert.deepEqual([run.status, run.lastInvocation, run.running, ran], ['delivered', 'req_1', false, 1]);
});

test("enqueue joins the caller's transaction: rolled back, nothing is stored or run and the reserved slots come back", async (t) => {
  const store = await storeOf(tmpDir(t));
  t.after(() => store.close());
  const clock = { now: 4_000_000 };
  const recorded: string[] = [];
  const ran: string[] = [];
  const q = queueOn(
    store,
    clock,
    async (installationId): Promise<RunOutcome> => {
      ran.push(installationId);
      return { kind: 'ran', ok: true, invocationId: null };
    },
    recorded,
    { installations: 2 },
  );
  t.after(() => q.stop(0));
  const event = { eventId: 'evt_1', type: 'site_view' };
  await assert.rejects(
    store.database.transaction(async (tx) => {
      assert.equal((await q.enqueue(tx, event, clock.now)).length, 2);
      assert.equal(q.inFlight(), 2, 'both slots reserved: the runs start at commit');
      throw new Error('ingest failed after the enqueue');
    }),
    /ingest failed/,
  );
  assert.equal(q.inFlight(), 0);
  assert.deepEqual(await q.ofEvent('evt_1'), []);
  q.wake();
  await new Promise((r) => setTimeout(r, 20));
  assert.deepEqual(ran, []);

  // A savepoint that rolls back alone gives its slots back; the enclosing transaction commits what it stored.
  await store.database.transaction(async (tx) => {
    await assert.rejects(
      tx.transaction(async (inner) => {
        await q.enqueue(inner, { eventId: 'evt_2', type: 'site_view' }, clock.now);
        throw new Error('this one fails');
      }),
    );
    assert.equal(q.inFlight(), 0);
    await q.enqueue(tx, event, clock.now);
  });
  await waitFor(() => recorded.length === 2);
  assert.deepEqual(ran.sort(), ['inst_1', 'inst_2']);
  assert.deepEqual(await q.ofEvent('evt_2'), []);
  assert.equal(q.inFlight(), 0);
});

test('stop: an outcome that comes in during the grace is recorded, a run still in flight after it is given back (due at once)', async (t) => {
  const store = await storeOf(tmpDir(t));
  t.after(() => store.close());
  const clock = { now: 6_000_000 };
  const recorded: string[] = [];
  const finish = new Map<string, () => void>();
  const q = queueOn(
    store,
    clock,
    (installationId) =>
      new Promise<RunOutcome>((resolve) => finish.set(installationId, () => resolve({ kind: 'ran', ok: true, invocationId: `req_${installationId}` }))),
    recorded,
    { installations: 2 },
  );
  await ingest(store, q, clock.now);
  await waitFor(() => finish.size === 2);
  const stopped = q.stop(200);
  finish.get('inst_1')!();
  await stopped;
  const [one, two] = await q.ofEvent('evt_1');
  assert.deepEqual([one.status, one.lastInvocation, one.running], ['delivered', 'req_inst_1', false]);
  assert.deepEqual([two.status, two.attemptCount, two.running], ['pending', 0, false]);
  assert.ok(Date.parse(two.nextAttemptAt!) <= clock.now, 'due again at once');
  finish.get('inst_2')!(); // too late: nothing is recorded over the given-back run
  await new Promise((r) => setTimeout(r, 20));
  assert.deepEqual((await q.ofEvent('evt_1'))[1].status, 'pending');
});
