/**
 * The store's asynchronous contract (src/store/contract.ts) as both engines implement it: statements
 * declared once (or per engine), transactions with their hooks and savepoints, one transaction at a
 * time on the connection, and SQLite's write lock waited for on timers, never by blocking the event
 * loop. Runs on PostgreSQL too (test/postgres-suites.test.ts).
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import BetterSqlite from 'better-sqlite3';
import { afterCommit, connectStore, DB_FILE } from '../src/store/index.ts';
import { LOCK_BUSY, statement } from '../src/store/contract.ts';
import { createPostgresDatabase } from '../src/store/postgres/pool.ts';
import { freshPostgresDatabase, tmpDir } from './helpers/index.ts';

const pg = process.env.SWITCHYARD_TEST_PG_URL;
/**
 * The implementations under test: the store's own database (better-sqlite3, or on PostgreSQL its
 * pool), and on PostgreSQL a second pool of the test's own as well.
 */
const IMPLEMENTATIONS = pg ? (['connection', 'pool'] as const) : (['connection'] as const);
type Implementation = (typeof IMPLEMENTATIONS)[number];
async function open(t: TestContext, using: Implementation) {
  const dir = tmpDir(t);
  const url = pg ? freshPostgresDatabase(dir) : undefined;
  const store = await connectStore(dir, {
    url,
    migrations: [
      {
        module: 'things',
        steps: ['CREATE TABLE things (id INTEGER PRIMARY KEY AUTOINCREMENT, v TEXT NOT NULL)'],
        postgres: ['CREATE TABLE things (id BIGSERIAL PRIMARY KEY, v TEXT NOT NULL)'],
      },
    ],
  });
  t.after(() => store.close());
  if (using === 'pool') {
    const pool = createPostgresDatabase({ url: url!, name: 'test' });
    t.after(() => pool.close());
    return { dir, store, db: pool };
  }
  return { dir, store, db: store.database };
}

const insert = statement<{ rowId: number }>('INSERT INTO things (v) VALUES (?) RETURNING id AS "rowId"');
const insertNamed = statement('INSERT INTO things (v) VALUES (@v)');
const all = statement<{ id: number; v: string }>('SELECT id, v FROM things ORDER BY id');
const count = statement('SELECT COUNT(*) AS n FROM things');
const byEngine = statement<{ engine: string }>({ sqlite: "SELECT 'sqlite' AS engine", postgres: "SELECT 'postgres' AS engine" });

for (const implementation of IMPLEMENTATIONS) {
  const title = (name: string) => (implementation === 'pool' ? `[pool] ${name}` : name);
  test(title('statements: positional and named parameters, rows, the first column, changes and the row number'), async (t) => {
    const { db } = await open(t, implementation);
    assert.equal((await db.get(byEngine))?.engine, pg ? 'postgres' : 'sqlite', 'a statement written per engine runs its own text');
    const a = await db.get(insert, ['a']);
    const b = await db.run(insertNamed, { v: 'b' });
    assert.equal(b.changes, 1);
    // PostgreSQL gives it for the store's row-numbered tables only (postgres/dialect.ts), not this test's.
    if (!pg) assert.equal(b.lastId, Number(a!.rowId) + 1, 'the row number of the insert follows the first');
    assert.deepEqual(
      (await db.all(all)).map((r) => r.v),
      ['a', 'b'],
    );
    assert.equal(Number(await db.value(count)), 2);
    assert.equal(await db.value(statement('SELECT v FROM things WHERE v = ?'), ['none']), undefined);
    await assert.rejects(db.run(statement('INSERT INTO nothing VALUES (1)')), /nothing/, 'a failing statement rejects');
  });

  test(title('a transaction commits when its callback resolves and rolls back when it throws; hooks run on the outcome'), async (t) => {
    const { db } = await open(t, implementation);
    const seen: string[] = [];
    const value = await db.transaction(async (tx) => {
      await tx.run(insertNamed, { v: 'kept' });
      tx.afterCommit(() => seen.push('committed'));
      tx.onRollback(() => seen.push('rolled back (wrong)'));
      seen.push('inside');
      return 42;
    });
    assert.equal(value, 42);
    assert.deepEqual(seen, ['inside', 'committed'], 'afterCommit runs once the commit is done, not before');
    seen.length = 0;
    await assert.rejects(
      db.transaction(async (tx) => {
        await tx.run(insertNamed, { v: 'lost' });
        tx.afterCommit(() => seen.push('committed (wrong)'));
        tx.onRollback(() => seen.push('rolled back'));
        throw new Error('boom');
      }),
      /boom/,
    );
    assert.deepEqual(seen, ['rolled back']);
    assert.deepEqual(
      (await db.all(all)).map((r) => r.v),
      ['kept'],
    );
  });

  test(title('a savepoint that throws undoes its own writes only; the outer transaction commits the rest'), async (t) => {
    const { db } = await open(t, implementation);
    const seen: string[] = [];
    await db.transaction(async (tx) => {
      await tx.run(insertNamed, { v: 'outer' });
      await assert.rejects(
        tx.transaction(async (inner) => {
          await inner.run(insertNamed, { v: 'inner' });
          inner.onRollback(() => seen.push('inner rolled back'));
          inner.afterCommit(() => seen.push('inner committed (wrong)'));
          throw new Error('inner');
        }),
        /inner/,
      );
      await tx.transaction(async (inner) => {
        await inner.run(insertNamed, { v: 'second' });
        inner.afterCommit(() => seen.push('second committed'));
      });
      assert.deepEqual(seen, ['inner rolled back'], 'a released savepoint hands its commit hooks to the transaction');
    });
    assert.deepEqual(seen, ['inner rolled back', 'second committed']);
    assert.deepEqual(
      (await db.all(all)).map((r) => r.v),
      ['outer', 'second'],
    );
  });

  test(title('the same function registered twice in a transaction runs once, also from a released savepoint (a wake-up every enqueue asks for)'), async (t) => {
    const { db } = await open(t, implementation);
    let wakes = 0;
    let undone = 0;
    const wake = () => void wakes++;
    const undo = () => void undone++;
    await db.transaction(async (tx) => {
      tx.afterCommit(wake);
      tx.afterCommit(wake);
      await tx.transaction(async (inner) => void inner.afterCommit(wake));
    });
    assert.equal(wakes, 1);
    await assert.rejects(
      db.transaction(async (tx) => {
        tx.onRollback(undo);
        await tx.transaction(async (inner) => void inner.onRollback(undo));
        tx.onRollback(undo);
        throw new Error('boom');
      }),
      /boom/,
    );
    assert.equal(undone, 1);
  });

  // The pool gives each transaction a connection of its own (test/postgres-pool.test.ts).
  test(title('one transaction at a time: a statement or transaction from elsewhere waits until it ends'), {
    skip: pg ? "SQLite's one connection: on PostgreSQL transactions run side by side (postgres-pool.test.ts)" : false,
  }, async (t) => {
    const { db } = await open(t, implementation);
    const order: string[] = [];
    let letGo!: () => void;
    const gate = new Promise<void>((r) => (letGo = r));
    const first = db.transaction(async (tx) => {
      await tx.run(insertNamed, { v: 'first' });
      order.push('first wrote');
      await gate; // held open (only a test does this: see contract.ts)
      order.push('first ends');
    });
    await new Promise((r) => setImmediate(r));
    const reader = db.all(all).then((rows) => order.push(`read ${rows.length}`));
    const second = db.transaction(async (tx) => {
      await tx.run(insertNamed, { v: 'second' });
      order.push('second wrote');
    });
    await new Promise((r) => setTimeout(r, 20));
    assert.deepEqual(order, ['first wrote'], 'nothing else ran on the connection while the transaction was open');
    letGo();
    await Promise.all([first, reader, second]);
    assert.deepEqual(order.slice(0, 2), ['first wrote', 'first ends']);
    assert.ok(order.includes('read 1') || order.includes('read 2'));
    assert.deepEqual(
      (await db.all(all)).map((r) => r.v),
      ['first', 'second'],
    );
  });

  test(title('the database used inside its own transaction is a clear error, not a hang'), async (t) => {
    const { db } = await open(t, implementation);
    await assert.rejects(
      db.transaction(async () => {
        await db.run(insertNamed, { v: 'x' });
      }),
      /use the transaction \(tx\)/,
    );
    await assert.rejects(
      db.transaction(async () => {
        await db.transaction(async () => {});
      }),
      /tx\.transaction/,
    );
    assert.equal(Number(await db.value(count)), 0);
  });

  test(title('work scheduled inside a transaction (a timer, setImmediate) that runs once it has ended uses the database freely'), async (t) => {
    const { db } = await open(t, implementation);
    let later!: Promise<boolean>;
    await db.transaction(async (tx) => {
      await tx.run(insertNamed, { v: 'inside' });
      // What a hook's oncePerTurn or a retry timer does: the callback carries this transaction's context.
      later = new Promise<boolean>((resolve, reject) =>
        setImmediate(() =>
          db
            .transaction(async (tx2) => {
              await tx2.run(insertNamed, { v: 'after' });
              // Inside the new transaction, the database itself is still refused.
              return db.value(count).then(
                () => false,
                () => true,
              );
            })
            .then(resolve, reject),
        ),
      );
    });
    assert.equal(await later, true, 'its own transaction runs; the database inside that one is still refused');
    assert.equal(Number(await db.value(count)), 2);
  });

  test(title('afterCommit(db, fn) from code called inside an asynchronous transaction joins it'), {
    skip: pg ? "the synchronous hooks are SQLite's connection's" : false,
  }, async (t) => {
    const { db, store } = await open(t, implementation);
    const seen: string[] = [];
    await db.transaction(async (tx) => {
      await tx.run(insertNamed, { v: 'a' });
      afterCommit(store.sqlite!, () => seen.push('joined'));
      assert.deepEqual(seen, []);
    });
    assert.deepEqual(seen, ['joined']);
  });

  test(title(
    "SQLite: another connection's write lock is waited for on timers, the event loop keeps turning, and transactionUnlessBusy answers busy at first",
  ), { skip: pg ? 'SQLite only' : false }, async (t) => {
    const { dir, db } = await open(t, implementation);
    const other = new BetterSqlite(join(dir, DB_FILE));
    t.after(() => other.close());
    other.exec('BEGIN IMMEDIATE');
    assert.equal(await db.transactionUnlessBusy(async () => 'ran'), LOCK_BUSY, 'refused at once while the lock is taken');
    let ticks = 0;
    const ticker = setInterval(() => ticks++, 5);
    const waiting = db.transaction(async (tx) => {
      await tx.run(insertNamed, { v: 'after the lock' });
      return ticks;
    });
    await new Promise((r) => setTimeout(r, 100));
    other.exec('COMMIT');
    const ticksWhenItRan = await waiting;
    clearInterval(ticker);
    assert.ok(ticksWhenItRan >= 5, `timers kept firing while the transaction waited for the lock (${ticksWhenItRan} ticks)`);
    assert.equal(Number(await db.value(count)), 1);
    assert.equal(await db.transactionUnlessBusy(async () => 'ran'), 'ran');
  });

  test(title(
    'SQLite: transactionUnlessBusy asked for twice in one turn is one transaction, each in its savepoint: one failing leaves the other committed; alone, a failure rolls back',
  ), { skip: pg ? 'SQLite only' : false }, async (t) => {
    const { dir, db } = await open(t, implementation);
    const other = new BetterSqlite(join(dir, DB_FILE));
    t.after(() => other.close());
    const seenByOther = () => (other.prepare('SELECT v FROM things ORDER BY id').all() as Array<{ v: string }>).map((r) => r.v);
    let duringSecond: string[] | undefined;
    const first = db.transactionUnlessBusy(async (tx) => {
      await tx.run(insertNamed, { v: 'first' });
      return 'first done';
    });
    const second = db.transactionUnlessBusy(async (tx) => {
      // The first one's row is written, and not yet committed: the same transaction.
      duringSecond = seenByOther();
      assert.equal(Number(await tx.value(count)), 1);
      await tx.run(insertNamed, { v: 'second' });
      throw new Error('second fails');
    });
    const third = db.transactionUnlessBusy(async (tx) => {
      await tx.run(insertNamed, { v: 'third' });
      return 'third done';
    });
    assert.equal(await first, 'first done');
    await assert.rejects(second, /second fails/);
    assert.equal(await third, 'third done');
    assert.deepEqual(duringSecond, [], 'nothing of the turn was committed while it ran');
    assert.deepEqual(seenByOther(), ['first', 'third']);
    // Alone in its turn, a failure is its transaction's: nothing of it stays.
    await assert.rejects(
      db.transactionUnlessBusy(async (tx) => {
        await tx.run(insertNamed, { v: 'alone' });
        throw new Error('alone fails');
      }),
      /alone fails/,
    );
    assert.deepEqual(seenByOther(), ['first', 'third']);
  });

  test(title(
    'SQLite: after SQLite rolled a transaction back itself, a savepoint begun in it fails instead of committing alone (a batch stored unit by unit)',
  ), { skip: pg ? 'SQLite only' : false }, async (t) => {
    const { dir, db } = await open(t, implementation);
    const other = new BetterSqlite(join(dir, DB_FILE));
    t.after(() => other.close());
    // The second unit's insert makes SQLite roll the whole transaction back, as it may on a full disk.
    other.exec("CREATE TRIGGER undo_b BEFORE INSERT ON things WHEN NEW.v = 'b' BEGIN SELECT RAISE(ROLLBACK, 'database or disk is full'); END");
    const units: string[] = [];
    await assert.rejects(
      db.transaction(async (tx) => {
        for (const v of ['a', 'b', 'c'])
          try {
            await tx.transaction(async (sp) => {
              await sp.run(insertNamed, { v });
            });
            units.push(`${v} stored`);
          } catch (e) {
            units.push(`${v} failed: ${(e as Error).message}`);
          }
      }),
      // Not SQLite's "cannot commit - no transaction is active": a storage failure, answered 503.
      { code: 'storage_failed', message: /no longer open/ },
    );
    assert.deepEqual(units.slice(0, 2), ['a stored', 'b failed: database or disk is full']);
    assert.match(units[2], /^c failed: the transaction is no longer open/);
    assert.deepEqual(other.prepare('SELECT v FROM things').all(), [], 'nothing stored, c not on its own');
  });

  test(title("SQLite: a statement outside a transaction waits for another connection's write lock on timers, not in SQLite's sleeping busy handler"), {
    skip: pg ? 'SQLite only' : false,
  }, async (t) => {
    const { dir, db, store } = await open(t, implementation);
    const other = new BetterSqlite(join(dir, DB_FILE));
    t.after(() => other.close());
    other.exec('BEGIN IMMEDIATE');
    let ticks = 0;
    const ticker = setInterval(() => ticks++, 5);
    const started = performance.now();
    const written = db.run(insertNamed, { v: 'outside' }).then(() => ({ ticks, ms: performance.now() - started }));
    await new Promise((r) => setTimeout(r, 100));
    other.exec('COMMIT');
    const when = await written;
    clearInterval(ticker);
    assert.ok(when.ticks >= 5, `timers kept firing while the statement waited for the lock (${when.ticks} ticks)`);
    assert.ok(when.ms >= 90, 'it ran once the lock was released');
    assert.equal(Number(await db.value(count)), 1);
    // Who takes the connection itself (a backup, a copy) gets its usual busy timeout.
    assert.equal(store.sqlite!.pragma('busy_timeout', { simple: true }), 5000);
  });

  test(title(
    "SQLite: a joiner whose error makes SQLite roll the whole transaction back (a trigger's RAISE(ROLLBACK)) leaves no joiner of its turn told otherwise than what the file holds",
  ), { skip: pg ? 'SQLite only' : false }, async (t) => {
    const { dir, db, store } = await open(t, implementation);
    store.sqlite!.exec(
      "CREATE TABLE guarded (v TEXT); CREATE TRIGGER guard BEFORE INSERT ON guarded BEGIN SELECT RAISE(ROLLBACK, 'refused by the trigger'); END",
    );
    const other = new BetterSqlite(join(dir, DB_FILE));
    t.after(() => other.close());
    const hooks: string[] = [];
    const joiner = (v: string) =>
      db.transactionUnlessBusy(async (tx) => {
        tx.afterCommit(() => hooks.push(`${v} committed`));
        tx.onRollback(() => hooks.push(`${v} rolled back`));
        await tx.run(insertNamed, { v });
        return v;
      });
    const first = joiner('first');
    const guarded = db.transactionUnlessBusy(async (tx) => {
      await tx.run(statement("INSERT INTO guarded (v) VALUES ('x')"));
    });
    const third = joiner('third');
    const settled = await Promise.allSettled([first, guarded, third]);
    assert.equal(settled[1].status, 'rejected');
    const stored = (other.prepare('SELECT v FROM things ORDER BY id').all() as Array<{ v: string }>).map((r) => r.v);
    for (const [i, v] of [
      [0, 'first'],
      [2, 'third'],
    ] as const) {
      const told = settled[i].status === 'fulfilled' ? 'committed' : 'rolled back';
      assert.equal(stored.includes(v), told === 'committed', `${v}: told ${told}, the file holds ${JSON.stringify(stored)}`);
      assert.ok(
        hooks.includes(`${v} ${told}`) && !hooks.includes(`${v} ${told === 'committed' ? 'rolled back' : 'committed'}`),
        `${v}: told ${told}, hooks ${JSON.stringify(hooks)}`,
      );
    }
    assert.equal(await third, 'third', 'who had not run yet when the transaction was lost runs in the next turn');
    const firstError = await first.then(
      () => undefined,
      (e: Error) => e,
    );
    assert.match(String(firstError?.message), /SQLite rolled it back/);
    assert.equal(store.sqlite!.inTransaction, false);
    assert.equal(await joiner('after'), 'after', 'the next turn works');
  });
}
