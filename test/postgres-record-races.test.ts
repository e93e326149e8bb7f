/**
 * Recording a turn's outcomes on PostgreSQL while other transactions hold what it needs (real
 * server, two transactions at once): a pause committed while the record waits for the delivery's
 * row still holds the retry; two records of one delivery get distinct attempt numbers; a record that
 * waits for a delivery's row does not hold every node's feed-order lock meanwhile (nor deadlocks
 * with a turn that holds the row and then wants that lock); an ingest waits for an uncommitted
 * pause and stores its delivery held. Skipped where PostgreSQL is absent.
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { connectStore } from '../src/store/index.ts';
import { statement } from '../src/store/contract.ts';
import { allMigrations } from '../src/server/migrations.ts';
import { postgresFor } from './helpers/postgres.ts';
import { freshPostgresDatabase, tmpDir, waitFor } from './helpers/index.ts';
import { createQueue } from '../src/webhooks/queue.ts';

/** The attempts feed's lock key (store/feed-order.ts). */
const FEED = 0x73776661;

/** A store with one leased delivery of `inst_r` (owner o1), and a failed attempt of it to record as a retry. */
async function setup(t: TestContext) {
  const pg = await postgresFor(t);
  if (!pg) return undefined;
  const store = await connectStore(tmpDir(t), { url: freshPostgresDatabase(tmpDir(t), pg.url), migrations: allMigrations() });
  t.after(() => store.close());
  const db = store.database;
  await db.run(statement('INSERT INTO webhook_endpoints (installation_id, created_at) VALUES (?, ?)'), ['inst_r', Date.now()]);
  const queue = createQueue(db, { maxAttempts: () => 4 });
  const now = Date.now();
  const c = (await db.transaction((tx) =>
    queue.enqueue(tx, {
      eventId: 'evt_r',
      eventType: 'site_view',
      installationId: 'inst_r',
      url: 'http://127.0.0.1:9/hook',
      body: '{}',
      now,
      lease: { owner: 'o1', until: now + 60_000 },
    }),
  ))!;
  const retry = (owner: string | undefined = 'o1') => ({
    seq: c.seq,
    origin: c.origin,
    owner,
    attempt: {
      manual: false,
      startedAt: now,
      durationMs: 5,
      url: c.url,
      signatureHeader: null,
      status: 500,
      outcome: 'retry' as const,
      error: 'HTTP 500',
      errorCode: null,
      responseExcerpt: null,
      responseTruncated: false,
      nextAttemptAt: now + 5_000,
    },
    next: { status: 'retrying' as const, attempts: 1, nextAttemptAt: now + 5_000, completedAt: null },
    now: now + 10,
  });
  /** Some statement of this database waits for a lock. */
  const someoneWaits = () =>
    waitFor(
      async () =>
        Number(await db.value(statement(`SELECT COUNT(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()`))) > 0,
      10_000,
    );
  return { db, queue, c, retry, someoneWaits };
}

/** A promise and the function that resolves it. */
function gate() {
  let open!: () => void;
  const p = new Promise<void>((r) => (open = r));
  return { p, open };
}

for (const path of ['alone', 'after claims'] as const)
  test(`a pause committed while a record (${path}) waits for the delivery's row: the retry is held`, async (t) => {
    const s = await setup(t);
    if (!s) return;
    const { db, queue, c, retry, someoneWaits } = s;
    const release = gate();
    const held = gate();
    const pause = db.transaction(async (tx) => {
      await tx.run(statement('UPDATE webhook_endpoints SET paused = 1 WHERE installation_id = ?'), ['inst_r']);
      assert.equal(await queue.holdInstallation(tx, 'inst_r', Date.now()), 1, 'the pause holds the delivery in flight (it kept its next attempt)');
      held.open();
      await release.p;
    });
    await held.p;
    const recorded =
      path === 'alone'
        ? queue.recordOutcomes(db, [retry()])
        : db.transaction(async (tx) => {
            await queue.claimDue(tx, Date.now(), 10, () => 4, 'o1', Date.now() + 60_000);
            return queue.completeMany(tx, [retry()]);
          });
    await someoneWaits();
    release.open();
    await pause;
    assert.notEqual(await recorded, undefined);
    const row = await db.get<{ status: string; next_attempt_at: number | null }>(
      statement('SELECT status, next_attempt_at FROM webhook_deliveries WHERE seq = ?'),
      [c.seq],
    );
    assert.deepEqual({ ...row }, { status: 'held', next_attempt_at: null }, 'a paused installation: the retry waits for the resume');
  });

test('two records of one delivery committed back to back get distinct attempt numbers', async (t) => {
  const s = await setup(t);
  if (!s) return;
  const { db, queue, c, retry, someoneWaits } = s;
  const release = gate();
  const inserted = gate();
  // Another sender records an attempt of the same delivery under the feed lock, and commits later.
  const other = db.transaction(async (tx) => {
    await tx.get(statement('SELECT pg_advisory_xact_lock(?)'), [FEED]);
    await tx.run(statement(`INSERT INTO webhook_attempts (delivery_seq, number, started_at, url, outcome) VALUES (?, 1, ?, 'http://x', 'retry')`), [
      c.seq,
      Date.now(),
    ]);
    inserted.open();
    await release.p;
  });
  await inserted.p;
  const recorded = queue.recordOutcomes(db, [retry(undefined)]);
  await someoneWaits();
  release.open();
  await other;
  await recorded;
  const numbers = await db.all<{ number: number }>(statement('SELECT number FROM webhook_attempts WHERE delivery_seq = ? ORDER BY id'), [c.seq]);
  assert.deepEqual(
    numbers.map((r) => Number(r.number)),
    [1, 2],
  );
});

test("a record that waits for a delivery's row does not hold the feed lock meanwhile, and does not deadlock with a turn that holds the row and then records", async (t) => {
  const s = await setup(t);
  if (!s) return;
  const { db, queue, c, retry, someoneWaits } = s;
  const release = gate();
  const locked = gate();
  const errors: unknown[] = [];
  // Another node's turn: it holds the delivery's row (its claim), then records (the feed lock).
  const other = db
    .transaction(async (tx) => {
      await tx.get(statement('SELECT seq FROM webhook_deliveries WHERE seq = ? FOR UPDATE'), [c.seq]);
      locked.open();
      await release.p;
      await tx.get(statement('SELECT pg_advisory_xact_lock(?)'), [FEED]);
    })
    .catch((e) => errors.push(e));
  await locked.p;
  const recorded = Promise.resolve(queue.recordOutcomes(db, [retry()])).catch((e) => errors.push(e));
  await someoneWaits();
  const feedHolders = await db.all(statement(`SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND objid = ? AND granted`), [FEED]);
  release.open();
  await other;
  await recorded;
  assert.equal(feedHolders.length, 0, 'nobody holds the feed lock while the record waits for the row');
  assert.deepEqual(errors, [], 'no deadlock');
});

test('an ingest while a pause is uncommitted waits for it and stores its delivery held, without its lease', async (t) => {
  const s = await setup(t);
  if (!s) return;
  const { db, queue, someoneWaits } = s;
  const release = gate();
  const held = gate();
  const pause = db.transaction(async (tx) => {
    await tx.run(statement('UPDATE webhook_endpoints SET paused = 1 WHERE installation_id = ?'), ['inst_r']);
    await queue.holdInstallation(tx, 'inst_r', Date.now());
    held.open();
    await release.p;
  });
  await held.p;
  const now = Date.now();
  const stored = db.transaction((tx) =>
    queue.enqueue(tx, {
      eventId: 'evt_2',
      eventType: 'site_view',
      installationId: 'inst_r',
      url: 'http://127.0.0.1:9/hook',
      body: '{}',
      now,
      lease: { owner: 'o2', until: now + 60_000 },
    }),
  );
  await someoneWaits();
  release.open();
  await pause;
  assert.equal((await stored)?.status, 'held');
  const row = await db.get<Record<string, unknown>>(statement("SELECT status, next_attempt_at, lease_owner FROM webhook_deliveries WHERE event_id = 'evt_2'"));
  assert.deepEqual({ ...row }, { status: 'held', next_attempt_at: null, lease_owner: null });
});
