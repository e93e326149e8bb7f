/**
 * Hooks on the store's transactions: work that must wait for a commit (start a delivery leased in
 * the transaction, wake a consumer, tell listeners) or undo something kept in memory when the
 * transaction rolls back (give a reserved slot back). Whoever does the write registers them, so a
 * caller that opens the transaction need not know who to tell afterwards (as Django's on_commit).
 * Modules register them as `tx.afterCommit(fn)` and `tx.onRollback(fn)` (contract.ts); this file
 * keeps them for SQLite's connection (database.ts), and PostgreSQL's transactions keep their own
 * (postgres/pool.ts), with the same rules.
 *
 * `afterCommit(db, fn)` runs `fn` once the OUTERMOST transaction commits; `onRollback(db, fn)` runs
 * `fn` when the transaction (or savepoint) it was registered in rolls back. A nested transaction (a
 * savepoint) that is released hands its hooks to the enclosing one; one that rolls back runs its
 * rollback hooks at once and drops its commit hooks, as its writes are gone. Hooks run in the order
 * they were registered; the same function registered twice in one transaction runs once (a wake-up
 * asked for by every enqueue). Outside a transaction a statement commits by itself: afterCommit runs
 * `fn` at once and onRollback does nothing. A hook that throws is logged and the others still run:
 * the commit it follows is never undone.
 */
import type Database from 'better-sqlite3';

type Db = Database.Database;
type Hook = () => void;

interface Frame {
  commit: Set<Hook>;
  rollback: Set<Hook>;
}

interface Hooks {
  frames: Frame[];
  failed: (which: 'afterCommit' | 'onRollback', error: unknown) => void;
}

const hooksOf = new WeakMap<Db, Hooks>();

/** Where a failing hook is reported by default (openStore passes the server's logger). */
const stderr = (which: string, error: unknown) =>
  process.stderr.write(`store: a transaction's ${which} hook failed: ${(error as Error)?.stack ?? String(error)}\n`);

function run(hooks: Iterable<Hook>, which: 'afterCommit' | 'onRollback', failed: Hooks['failed']): void {
  for (const fn of hooks) {
    try {
      fn();
    } catch (e) {
      failed(which, e);
    }
  }
}

/**
 * Wraps `db.transaction` so that each call keeps a frame of hooks (see the header). `begin` picks
 * the variant every plain call takes (BEGIN IMMEDIATE for the store: see index.ts).
 */
export function installTransactionHooks(db: Db, opts: { begin?: 'deferred' | 'immediate' | 'exclusive'; failed?: Hooks['failed'] } = {}): void {
  const state: Hooks = { frames: [], failed: opts.failed ?? stderr };
  hooksOf.set(db, state);
  const transaction = db.transaction.bind(db);
  db.transaction = ((fn: (...args: never[]) => unknown) => {
    const t = transaction(fn);
    const framed =
      (variant: (...args: never[]) => unknown) =>
      (...args: never[]) => {
        const frame: Frame = { commit: new Set(), rollback: new Set() };
        state.frames.push(frame);
        let value: unknown;
        try {
          value = variant(...args);
        } catch (e) {
          state.frames.pop();
          run(frame.rollback, 'onRollback', state.failed);
          throw e;
        }
        state.frames.pop();
        const parent = state.frames.at(-1);
        if (parent) {
          for (const h of frame.commit) parent.commit.add(h);
          for (const h of frame.rollback) parent.rollback.add(h);
        } else run(frame.commit, 'afterCommit', state.failed);
        return value;
      };
    const deferred = framed(t.deferred);
    const immediate = framed(t.immediate);
    const exclusive = framed(t.exclusive);
    const plain = { deferred, immediate, exclusive }[opts.begin ?? 'deferred'];
    // The variants stay callable as better-sqlite3 documents them (`.deferred(...)` for a reader).
    return Object.assign(plain, { default: plain, deferred, immediate, exclusive });
  }) as unknown as Db['transaction'];
}

/**
 * A transaction begun outside `db.transaction` (the asynchronous store, database.ts) keeps its
 * hooks in the same frames, so `afterCommit(db, fn)` from code called inside it joins it. Returns
 * the function that ends the frame: committed (hooks handed to the enclosing frame, or run when
 * it is the outermost) or rolled back (its rollback hooks run, its commit hooks dropped).
 */
export function openFrame(db: Db): (committed: boolean) => void {
  let state = hooksOf.get(db);
  if (!state) hooksOf.set(db, (state = { frames: [], failed: stderr }));
  const frame: Frame = { commit: new Set(), rollback: new Set() };
  state.frames.push(frame);
  const s = state;
  return (committed) => {
    const at = s.frames.lastIndexOf(frame);
    if (at >= 0) s.frames.splice(at, 1);
    if (!committed) return run(frame.rollback, 'onRollback', s.failed);
    const parent = s.frames[at - 1];
    if (at > 0 && parent) {
      for (const h of frame.commit) parent.commit.add(h);
      for (const h of frame.rollback) parent.rollback.add(h);
    } else run(frame.commit, 'afterCommit', s.failed);
  };
}

function current(db: Db): Frame | undefined {
  return hooksOf.get(db)?.frames.at(-1);
}

/** Runs `fn` once the outermost transaction commits (at once outside a transaction). */
export function afterCommit(db: Db, fn: () => void): void {
  const frame = current(db);
  if (frame) frame.commit.add(fn);
  else if (db.inTransaction) throw new Error('afterCommit inside a transaction not begun by db.transaction() of a store from openStore');
  else fn();
}

/** Runs `fn` if the transaction (or savepoint) it is registered in rolls back; nothing outside one. */
export function onRollback(db: Db, fn: () => void): void {
  const frame = current(db);
  if (frame) frame.rollback.add(fn);
  else if (db.inTransaction) throw new Error('onRollback inside a transaction not begun by db.transaction() of a store from openStore');
}
