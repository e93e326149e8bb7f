/**
 * The store's leased queue (src/store/leased-queue.ts) over a table of its own, on both engines:
 * due rows claimed earliest first with a lease, by row number and by id; a lease that holds keeps
 * the row from anyone else, one that ran out frees it; give-back by owner only; an owner's
 * leftovers released; the next wake. Concurrent claimers (several connections, and on PostgreSQL
 * the asynchronous pool, where FOR UPDATE SKIP LOCKED is what keeps them apart) never take a row
 * twice. Runs on PostgreSQL too (test/postgres-suites.test.ts).
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { connectStore, openStore } from '../src/store/index.ts';
import { statement, type Database, type Queries } from '../src/store/contract.ts';
import { leasedQueue } from '../src/store/leased-queue.ts';
import { createPostgresDatabase } from '../src/store/postgres/pool.ts';
import { freshPostgresDatabase, tmpDir } from './helpers/index.ts';

const pg = process.env.SWITCHYARD_TEST_PG_URL;

const jobs = {
  module: 'jobs',
  steps: [
    `CREATE TABLE jobs (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE, kind TEXT NOT NULL, status TEXT NOT NULL,
       next_at INTEGER, lease_owner TEXT, lease_until INTEGER, updated_at INTEGER);
     CREATE INDEX jobs_due ON jobs (kind, next_at, seq) WHERE next_at IS NOT NULL;`,
  ],
  postgres: [
    `CREATE TABLE jobs (seq BIGSERIAL PRIMARY KEY, id TEXT NOT NULL UNIQUE, kind TEXT NOT NULL, status TEXT NOT NULL,
       next_at BIGINT, lease_owner TEXT, lease_until BIGINT, updated_at BIGINT);
     CREATE INDEX jobs_due ON jobs (kind, next_at, seq) WHERE next_at IS NOT NULL;`,
  ],
};

type Job = { seq: number; id: string; kind: string; status: string; next_at: number | null };
const queue = leasedQueue<Job>({
  table: 'jobs',
  seq: 'seq',
  nextAt: 'next_at',
  leaseOwner: 'lease_owner',
  leaseUntil: 'lease_until',
  updatedAt: 'updated_at',
  id: 'id',
  byIdWhen: "status != 'cancelled'",
  group: 'kind',
  dueIndex: 'jobs_due',
  returning: 'seq, id, kind, status, next_at',
});

const insert = statement('INSERT INTO jobs (id, kind, status, next_at) VALUES (?, ?, ?, ?)');
const row = statement<{ lease_owner: string | null; lease_until: number | null; next_at: number | null; updated_at: number | null }>(
  'SELECT lease_owner, lease_until, next_at, updated_at FROM jobs WHERE id = ?',
);

/** A store with the jobs table; `connections` more connections to it (another process's, on SQLite). */
async function open(t: TestContext) {
  const dir = tmpDir(t);
  const url = pg ? freshPostgresDatabase(dir) : undefined;
  const store = await connectStore(dir, { url, migrations: [jobs] });
  t.after(() => store.close());
  const another = (): Database => {
    if (pg) {
      const pool = createPostgresDatabase({ url: url!, name: 'test', max: 4 });
      t.after(() => pool.close());
      return pool;
    }
    const other = openStore(dir);
    t.after(() => other.close());
    return other.database;
  };
  return { db: store.database, another };
}

async function fill(db: Queries, rows: Array<[id: string, kind: string, nextAt: number | null, status?: string]>): Promise<void> {
  for (const [id, kind, nextAt, status] of rows) await db.run(insert, [id, kind, status ?? 'pending', nextAt]);
}

const T = 1_000_000;
const ids = (rows: Job[]) => rows.map((r) => r.id);

test('claimDue: due rows earliest first (ties in row order), up to the limit, leased; a lease that holds keeps them, one that ran out frees them', async (t) => {
  const { db } = await open(t);
  await fill(db, [
    ['c', 'a', T + 30],
    ['a', 'a', T + 10],
    ['b', 'a', T + 10],
    ['later', 'a', T + 500],
    ['held', 'a', null],
  ]);
  const first = await queue.claimDue(db, { now: T + 100, limit: 2, owner: 'w1.1', until: T + 1_000 });
  assert.deepEqual(ids(first), ['a', 'b']);
  assert.deepEqual(Object.keys(first[0]).sort(), ['id', 'kind', 'next_at', 'seq', 'status'], 'the row as `returning` names it');
  assert.deepEqual(await db.get(row, ['a']), { lease_owner: 'w1.1', lease_until: T + 1_000, next_at: T + 10, updated_at: null });
  assert.deepEqual(ids(await queue.claimDue(db, { now: T + 100, limit: 10, owner: 'w2.1', until: T + 1_000 })), ['c'], "leased rows are nobody else's");
  assert.deepEqual(await queue.claimDue(db, { now: T + 100, limit: 10, owner: 'w2.1', until: T + 1_000 }), []);
  // The leases of w1 and w2 run out at T + 1000: their rows are due again, with `later`.
  assert.deepEqual(ids(await queue.claimDue(db, { now: T + 1_000, limit: 10, owner: 'w3.1', until: T + 2_000 })), ['a', 'b', 'c', 'later']);
  assert.deepEqual(await queue.claimDue(db, { now: T + 1_000, limit: 0, owner: 'w3.1', until: T + 2_000 }), [], 'a limit of 0 claims nothing');
});

test("claimDue of one group takes that group's rows alone", async (t) => {
  const { db } = await open(t);
  await fill(db, [
    ['x1', 'x', T],
    ['y1', 'y', T - 5],
    ['x2', 'x', T + 1],
  ]);
  assert.deepEqual(ids(await queue.claimDue(db, { group: 'x', now: T + 10, limit: 10, owner: 'w.1', until: T + 100 })), ['x1', 'x2']);
  assert.deepEqual(ids(await queue.claimDue(db, { group: 'y', now: T + 10, limit: 10, owner: 'w.1', until: T + 100 })), ['y1']);
});

test('claim by row numbers: those still due and unleased, in the order given; claimById whatever the schedule, unless leased or refused', async (t) => {
  const { db } = await open(t);
  await fill(db, [
    ['a', 'k', T],
    ['b', 'k', T],
    ['c', 'k', T + 1_000],
    ['done', 'k', null, 'delivered'],
    ['gone', 'k', null, 'cancelled'],
  ]);
  const seqs = (await queue.claimDue(db, { now: T + 5_000, limit: 10, owner: 'peek', until: T })).map((r) => r.seq); // leases that ran out already
  assert.equal(seqs.length, 3);
  const [a, b, c] = seqs;
  assert.deepEqual(ids(await queue.claim(db, [c, b, a], { now: T, owner: 'w.1', until: T + 100 })), ['b', 'a'], 'c is not due yet; order as given');
  assert.deepEqual(await queue.claim(db, [a, b], { now: T + 50, owner: 'w.2', until: T + 150 }), [], 'w.1 holds them');
  assert.deepEqual(await queue.claim(db, [], { now: T, owner: 'w.2', until: T + 150 }), []);
  assert.equal((await queue.claimById(db, 'done', { now: T, owner: 'm.1', until: T + 100 }))?.id, 'done', 'by id: whatever the schedule');
  assert.equal(await queue.claimById(db, 'done', { now: T + 10, owner: 'm.2', until: T + 100 }), undefined, 'not while leased');
  assert.equal(await queue.claimById(db, 'gone', { now: T, owner: 'm.1', until: T + 100 }), undefined, 'byIdWhen refuses it');
  assert.equal(await queue.claimById(db, 'nothing', { now: T, owner: 'm.1', until: T + 100 }), undefined);
});

test('give-back by owner only: a lease that ran out and was taken since stays with its new owner', async (t) => {
  const { db } = await open(t);
  await fill(db, [
    ['a', 'k', T],
    ['b', 'k', T],
  ]);
  const [a, b] = (await queue.claimDue(db, { now: T, limit: 10, owner: 'old.1', until: T + 100 })).map((r) => r.seq);
  // old.1's lease on b runs out and new.1 takes it.
  assert.equal((await queue.claim(db, [b], { now: T + 100, owner: 'new.1', until: T + 200 })).length, 1);
  assert.equal((await queue.giveBack(db, [a, b], 'old.1', T + 150)).length, 1, "a alone was still old.1's");
  assert.deepEqual(await db.get(row, ['a']), { lease_owner: null, lease_until: null, next_at: T, updated_at: T + 150 });
  assert.equal((await db.get(row, ['b']))?.lease_owner, 'new.1');
  assert.equal((await queue.giveBack(db, [], 'old.1', T + 150)).length, 0);
  assert.deepEqual(ids(await queue.claimDue(db, { now: T + 150, limit: 10, owner: 'x.1', until: T + 300 })), ['a'], 'given back: due again at once');
});

test('releaseOwnedBy: the leases of a prefix (a dead process) or of everyone, returning the rows; dueNow makes queued ones due at once', async (t) => {
  const { db } = await open(t);
  await fill(db, [
    ['a', 'k', T],
    ['b', 'k', T],
    ['c', 'k', T],
    ['finished', 'k', null, 'delivered'],
  ]);
  const [a, b] = (await queue.claimDue(db, { now: T, limit: 10, owner: 'node.7.aa', until: T + 100 })).map((r) => r.seq);
  await queue.giveBack(db, [b], 'node.7.aa', T);
  await queue.claim(db, [b], { now: T, owner: 'node.8.bb', until: T + 100 });
  await queue.claimById(db, 'finished', { now: T, owner: 'node.7.cc', until: T + 100 });
  assert.ok(a);
  const released = await queue.releaseOwnedBy(db, 'node.7.', T + 10, { dueNow: true });
  assert.deepEqual(ids(released).sort(), ['a', 'c', 'finished']);
  assert.deepEqual(await db.get(row, ['a']), { lease_owner: null, lease_until: null, next_at: T + 10, updated_at: T + 10 });
  assert.equal((await db.get(row, ['finished']))?.next_at, null, 'a row not queued stays so');
  assert.equal((await db.get(row, ['b']))?.lease_owner, 'node.8.bb', "another process's lease stays");
  assert.deepEqual(ids(await queue.releaseOwnedBy(db, '', T + 20)), ['b'], 'every lease');
  assert.equal((await db.get(row, ['b']))?.next_at, T, 'without dueNow the schedule stays');
});

test('nextWake: the earliest scheduled row after now, or a lease running out, whichever comes first', async (t) => {
  const { db } = await open(t);
  assert.equal(await queue.nextWake(db, T), undefined, 'an empty queue wakes nobody');
  await fill(db, [
    ['soon', 'k', T + 500],
    ['late', 'k', T + 900],
    ['now', 'k', T],
  ]);
  assert.equal(await queue.nextWake(db, T), T + 500);
  await queue.claimDue(db, { now: T, limit: 1, owner: 'w.1', until: T + 300 });
  assert.equal(await queue.nextWake(db, T), T + 300, 'the lease of `now` runs out first');
  await queue.claimById(db, 'soon', { now: T, owner: 'w.1', until: T + 700 });
  assert.equal(await queue.nextWake(db, T + 400), T + 700, "a scheduled row under a lease wakes at its lease's end");
  assert.equal(await queue.nextWake(db, T + 800), T + 900);
});

test('concurrent claimers on several connections never take a row twice while its lease holds', async (t) => {
  const { db, another } = await open(t);
  const N = 300;
  await db.transaction(async (tx) => {
    for (let i = 0; i < N; i++) await tx.run(insert, [`j${i}`, i % 3 ? 'k' : 'l', 'pending', T + (i % 17)]);
  });
  const connections = [db, another(), another()];
  const taken = new Map<string, string>();
  const claimer = async (conn: Database, owner: string, grouped: boolean) => {
    for (let round = 0; round < 1_000; round++) {
      const rows = await conn.transaction((tx) =>
        queue.claimDue(tx, { now: T + 100, limit: 7, owner, until: T + 60_000, ...(grouped ? { group: round % 2 ? 'k' : 'l' } : {}) }),
      );
      for (const r of rows) {
        assert.equal(taken.get(r.id), undefined, `${r.id} claimed by ${owner} while ${taken.get(r.id)} holds its lease`);
        taken.set(r.id, owner);
      }
      if (!rows.length && taken.size === N) return;
      await new Promise((r) => setImmediate(r));
    }
  };
  await Promise.all(connections.flatMap((conn, c) => [claimer(conn, `c${c}.a`, false), claimer(conn, `c${c}.b`, true)]));
  assert.equal(taken.size, N, 'every row claimed once');
  assert.ok(new Set(taken.values()).size > 1, 'by more than one claimer');
});

test('PostgreSQL: a claimer skips the rows another is claiming in an open transaction (SKIP LOCKED), without waiting for it', {
  skip: !pg && 'PostgreSQL only',
}, async (t) => {
  const { db, another } = await open(t);
  await fill(db, [
    ['a', 'k', T],
    ['b', 'k', T],
    ['c', 'k', T],
  ]);
  const first = another();
  const second = another();
  let letGo!: () => void;
  const held = new Promise<void>((r) => (letGo = r));
  let claimedFirst: Job[] = [];
  const open1 = first.transaction(async (tx) => {
    claimedFirst = await queue.claimDue(tx, { now: T, limit: 2, owner: 'one.1', until: T + 100 });
    await held; // the transaction stays open, its rows locked
  });
  while (!claimedFirst.length) await new Promise((r) => setTimeout(r, 5));
  assert.deepEqual(ids(claimedFirst), ['a', 'b']);
  // Not committed yet: the lease is not visible, but the rows are locked, so they are skipped.
  const claimedSecond = await second.transaction((tx) => queue.claimDue(tx, { now: T, limit: 10, owner: 'two.1', until: T + 100 }));
  assert.deepEqual(ids(claimedSecond), ['c']);
  letGo();
  await open1;
  assert.deepEqual(await queue.claimDue(db, { now: T + 50, limit: 10, owner: 'three.1', until: T + 100 }), []);
});
