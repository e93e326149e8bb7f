/**
 * The store's transaction hooks (src/store/transactions.ts) on a real SQLite file: after-commit
 * hooks run once the outermost transaction has committed, on-rollback hooks when the transaction or
 * savepoint they were registered in rolls back, in order, and a hook that throws is logged without
 * undoing anything.
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { afterCommit, onRollback, openStore, type Store } from '../src/store/index.ts';
import { memoryLogger } from '../src/log/index.ts';
import { tmpDir } from './helpers/index.ts';

function storeOf(t: TestContext, log = memoryLogger()): Store {
  const store = openStore(tmpDir(t), { migrations: [{ module: 'things', steps: ['CREATE TABLE things (id INTEGER PRIMARY KEY, v TEXT)'] }], log });
  t.after(() => store.close());
  return store;
}

const count = (s: Store) => (s.sqlite!.prepare('SELECT count(*) AS n FROM things').get() as { n: number }).n;

test('after-commit hooks run once the transaction has committed, in order, and never on rollback', (t) => {
  const s = storeOf(t);
  const seen: string[] = [];
  const insert = s.sqlite!.prepare('INSERT INTO things (v) VALUES (?)');
  s.sqlite!.transaction(() => {
    insert.run('a');
    afterCommit(s.sqlite!, () => seen.push(`first, in transaction: ${s.sqlite!.inTransaction}, stored: ${count(s)}`));
    afterCommit(s.sqlite!, () => seen.push('second'));
    onRollback(s.sqlite!, () => seen.push('rolled back'));
    seen.push('body done');
  })();
  assert.deepEqual(seen, ['body done', 'first, in transaction: false, stored: 1', 'second']);

  seen.length = 0;
  assert.throws(
    () =>
      s.sqlite!.transaction(() => {
        insert.run('b');
        afterCommit(s.sqlite!, () => seen.push('committed'));
        onRollback(s.sqlite!, () => seen.push(`rolled back, stored: ${count(s)}`));
        onRollback(s.sqlite!, () => seen.push('second rollback hook'));
        throw new Error('no');
      })(),
    /no/,
  );
  assert.deepEqual(seen, ['rolled back, stored: 1', 'second rollback hook']);
});

test('outside a transaction afterCommit runs at once and onRollback does nothing', (t) => {
  const s = storeOf(t);
  const seen: string[] = [];
  afterCommit(s.sqlite!, () => seen.push('now'));
  onRollback(s.sqlite!, () => seen.push('never'));
  assert.deepEqual(seen, ['now']);
});

test('a released savepoint hands its hooks to the outer transaction; a rolled-back one gives back at once and drops its commit hooks', (t) => {
  const s = storeOf(t);
  const seen: string[] = [];
  const insert = s.sqlite!.prepare('INSERT INTO things (v) VALUES (?)');
  const inner = s.sqlite!.transaction((name: string, fail: boolean) => {
    insert.run(name);
    afterCommit(s.sqlite!, () => seen.push(`commit ${name}`));
    onRollback(s.sqlite!, () => seen.push(`rollback ${name}`));
    if (fail) throw new Error(name);
  });
  s.sqlite!.transaction(() => {
    afterCommit(s.sqlite!, () => seen.push('commit outer'));
    inner('kept', false);
    assert.deepEqual(seen, [], 'a released savepoint runs nothing yet');
    assert.throws(() => inner('undone', true), /undone/);
    assert.deepEqual(seen, ['rollback undone'], 'the savepoint rolled back: its rollback hooks ran at once');
    inner('kept too', false);
  })();
  assert.deepEqual(seen, ['rollback undone', 'commit outer', 'commit kept', 'commit kept too']);
  assert.equal(count(s), 2);

  // The outer transaction rolls back: the released savepoints' rollback hooks run with its own.
  seen.length = 0;
  assert.throws(() =>
    s.sqlite!.transaction(() => {
      onRollback(s.sqlite!, () => seen.push('rollback outer'));
      inner('a', false);
      inner('b', false);
      throw new Error('outer');
    })(),
  );
  assert.deepEqual(seen, ['rollback outer', 'rollback a', 'rollback b']);
  assert.equal(count(s), 2);
});

test('the same function registered twice in one transaction runs once', (t) => {
  const s = storeOf(t);
  let woken = 0;
  const wake = () => woken++;
  s.sqlite!.transaction(() => {
    afterCommit(s.sqlite!, wake);
    s.sqlite!.transaction(() => afterCommit(s.sqlite!, wake))();
    afterCommit(s.sqlite!, wake);
  })();
  assert.equal(woken, 1);
  s.sqlite!.transaction(() => afterCommit(s.sqlite!, wake))();
  assert.equal(woken, 2, 'once per transaction, not once ever');
});

test('a hook that throws is logged; the others run and the commit stands', (t) => {
  const log = memoryLogger();
  const s = storeOf(t, log);
  const seen: string[] = [];
  const value = s.sqlite!.transaction(() => {
    s.sqlite!.prepare("INSERT INTO things (v) VALUES ('x')").run();
    afterCommit(s.sqlite!, () => {
      throw new Error('hook bug');
    });
    afterCommit(s.sqlite!, () => seen.push('still runs'));
    return 42;
  })();
  assert.equal(value, 42);
  assert.deepEqual(seen, ['still runs']);
  assert.equal(count(s), 1);
  const line = log.lines.find((l) => String(l.msg).includes('afterCommit hook failed'));
  assert.ok(line, 'the failure is logged');

  assert.throws(
    () =>
      s.sqlite!.transaction(() => {
        onRollback(s.sqlite!, () => {
          throw new Error('rollback hook bug');
        });
        onRollback(s.sqlite!, () => seen.push('rollback still runs'));
        throw new Error('original');
      })(),
    /original/,
    "the transaction's own error is what the caller sees",
  );
  assert.deepEqual(seen, ['still runs', 'rollback still runs']);
});

test('the variants (deferred, exclusive) keep hooks too', (t) => {
  const s = storeOf(t);
  const seen: string[] = [];
  s.sqlite!.transaction(() => afterCommit(s.sqlite!, () => seen.push('deferred'))).deferred();
  s.sqlite!.transaction(() => afterCommit(s.sqlite!, () => seen.push('exclusive'))).exclusive();
  assert.deepEqual(seen, ['deferred', 'exclusive']);
});
