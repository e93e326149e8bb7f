/**
 * Change counters shared by the serving processes (src/store/generations.ts), through the store's
 * contract: a process's cache learns that another one changed what it holds, once, and not from its
 * own writes; a write rolled back tells no one. Two stores opened on one database stand for two
 * processes. Runs on PostgreSQL too (SWITCHYARD_TEST_PG_URL: notifications instead of a table).
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { connectStore } from '../src/store/index.ts';
import { generationsFor } from '../src/store/generations.ts';
import { createSessions } from '../src/console/index.ts';
import { allMigrations } from '../src/server/migrations.ts';
import { freshPostgresDatabase, tmpDir, waitFor } from './helpers/index.ts';

/** Two stores on one database, as two serving processes have. */
async function twoProcesses(t: TestContext) {
  const dir = tmpDir(t);
  const url = process.env.SWITCHYARD_TEST_PG_URL ? freshPostgresDatabase(dir) : undefined;
  const open = async () => {
    const s = await connectStore(dir, { url, migrations: allMigrations() });
    t.after(() => s.close());
    return s;
  };
  return [await open(), await open()] as const;
}

/** A check's answer once a notification had time to arrive (at once on SQLite). */
const settled = async (check: () => Promise<boolean>) => {
  await new Promise((r) => setTimeout(r, 150));
  return check();
};

test("another process's bump is seen once; one's own bumps and rolled-back ones are not", async (t) => {
  const [a, b] = await twoProcesses(t);
  const ga = generationsFor(a);
  const gb = generationsFor(b);
  await ga.ready();
  const seen = ga.watch('things');
  const other = ga.watch('other things');
  assert.equal(await settled(seen), false, 'nothing changed yet');

  await b.database.transaction((tx) => gb.bump(tx, 'things'));
  assert.equal(await waitFor(() => seen(), 3000), true, "B's commit is seen by A");
  assert.equal(await seen(), false, 'once');
  assert.equal(await settled(other), false, 'a watch of another name hears nothing of it');

  await a.database.transaction((tx) => ga.bump(tx, 'things'));
  assert.equal(await settled(seen), false, "A's own bump: A dropped its own copies already");

  await assert.rejects(
    b.database.transaction(async (tx) => {
      await gb.bump(tx, 'things');
      throw new Error('rolled back');
    }),
    /rolled back/,
  );
  assert.equal(await settled(seen), false, 'a bump rolled back tells no one');

  // Checks asked at the same moment share one answer.
  await b.database.transaction((tx) => gb.bump(tx, 'things'));
  await new Promise((r) => setTimeout(r, 150));
  assert.deepEqual(await Promise.all([seen(), seen()]), [true, true]);
  assert.equal(await seen(), false);
});

test('a bump sent while the other process is still opening its listening connection is not missed', async (t) => {
  const [a, b] = await twoProcesses(t);
  const gb = generationsFor(b);
  await b.database.transaction((tx) => gb.bump(tx, 'warm')); // B's connection is open: its commit is quick
  const seen = generationsFor(a).watch('things');
  // No wait for A to hear: on PostgreSQL its LISTEN is still being opened while B commits.
  await b.database.transaction((tx) => gb.bump(tx, 'things'));
  assert.equal(await waitFor(() => seen(), 3000), true, "B's commit is seen by A");
});

test('a console logout in one process ends the session in every other one', async (t) => {
  const [a, b] = await twoProcesses(t);
  const sessionsOf = (s: typeof a) => createSessions({ adminToken: 'the-token', store: { database: s.database, generations: generationsFor(s) } });
  const [sa, sb] = [await sessionsOf(a), await sessionsOf(b)];
  const { value, session } = sa.issue();
  assert.equal((await sb.verify(value))?.id, session.id, 'the other process accepts it');
  await sa.revoke(session);
  assert.equal(await sa.verify(value), undefined);
  await waitFor(async () => (await sb.verify(value)) === undefined, 3000);
  // And a process started afterwards reads the revocation at start.
  assert.equal(await (await sessionsOf(b)).verify(value), undefined);
});

test("a check that found nothing changed says so without waiting for the rest of its turn, and not in the next one after another process's bump", async (t) => {
  const [a, b] = await twoProcesses(t);
  const ga = generationsFor(a);
  const gb = generationsFor(b);
  await ga.ready();
  const seen = ga.watch('things');
  assert.equal(await settled(seen), false);
  // A later turn, in which no check ran: nothing is known of it.
  await new Promise((r) => setImmediate(r));
  assert.equal(seen.quiet(), false, 'not known for a turn no check ran in');
  // Asked and answered within one turn (SQLite's reads answer in microtasks): quiet for the rest of it.
  const answer = seen();
  assert.equal(await answer, false);
  if (!process.env.SWITCHYARD_TEST_PG_URL) assert.equal(seen.quiet(), true, 'quiet for the rest of the turn');
  await new Promise((r) => setImmediate(r));
  assert.equal(seen.quiet(), false, 'and only that turn');
  await b.database.transaction((tx) => gb.bump(tx, 'things'));
  assert.equal(await waitFor(() => seen(), 3000), true, "B's bump is seen");
  assert.equal(seen.quiet(), false, 'a check that found a change is no quiet');
});
