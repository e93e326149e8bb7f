/**
 * A live tail that reads by row number misses nothing while transactions commit out of order
 * (src/store/feed-order.ts): writers on a pool of their own take row numbers and commit after
 * random pauses, a reader follows `id > cursor` meanwhile; every row committed is read once.
 * On PostgreSQL (real server) without appendInOrder the reader skips rows (checked below, so the
 * test can tell); on SQLite commits are in row order anyway.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { statement, type Database } from '../src/store/contract.ts';
import { appendInOrder } from '../src/store/feed-order.ts';
import { createPostgresDatabase } from '../src/store/postgres/pool.ts';
import { postgresFor } from './helpers/postgres.ts';

const create = statement('CREATE TABLE IF NOT EXISTS feed (id BIGSERIAL PRIMARY KEY, writer INTEGER NOT NULL)');
const insert = statement('INSERT INTO feed (writer) VALUES (?)');
const after = statement<{ id: number }>('SELECT id FROM feed WHERE id > ? ORDER BY id LIMIT 50');
const all = statement<{ id: number }>('SELECT id FROM feed ORDER BY id');

/** WRITERS writers, each ROUNDS transactions (its row, then a pause, then the commit), and one tail reading as it goes. */
async function follow(db: Database, inOrder: boolean): Promise<{ committed: number; read: number; missed: number }> {
  const WRITERS = 8;
  const ROUNDS = 25;
  let writing = true;
  const seen = new Set<number>();
  const tail = (async () => {
    let cursor = 0;
    for (let quiet = 0; writing || quiet < 2; ) {
      const rows = await db.all(after, [cursor]);
      for (const r of rows) seen.add(r.id);
      if (rows.length) cursor = rows.at(-1)!.id;
      if (!writing && !rows.length) quiet++;
      await new Promise((r) => setTimeout(r, 1));
    }
  })();
  await Promise.all(
    Array.from({ length: WRITERS }, async (_, w) => {
      for (let i = 0; i < ROUNDS; i++)
        await db.transaction(async (tx) => {
          if (inOrder) await appendInOrder(tx, 'attempts');
          await tx.run(insert, [w]);
          // Something else the transaction does before its commit, for a random while.
          await tx.get(statement(`SELECT pg_sleep(${(Math.random() * 0.004).toFixed(4)})`));
        });
    }),
  );
  writing = false;
  await tail;
  const committed = (await db.all(all)).length;
  return { committed, read: seen.size, missed: committed - seen.size };
}

test('on PostgreSQL a tail by row number reads every row when writers append in order; without, it skips rows', { timeout: 120_000 }, async (t) => {
  const server = await postgresFor(t);
  if (!server) return;
  const db = createPostgresDatabase({ url: server.url, name: 'feed-order', max: 10 });
  t.after(() => db.close());
  await db.run(create);

  const unordered = await follow(db, false);
  t.diagnostic(`without appendInOrder: ${unordered.committed} rows committed, ${unordered.missed} skipped by the tail`);
  assert.ok(unordered.missed > 0, 'the race is real here: without the lock the tail skips some rows (else this test shows nothing)');

  await db.run(statement('TRUNCATE feed'));
  const ordered = await follow(db, true);
  assert.equal(ordered.committed, 200);
  assert.equal(ordered.missed, 0, `every committed row read (${ordered.read} of ${ordered.committed})`);
});
