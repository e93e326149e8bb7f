/**
 * Group commits that wait for another process's write lock without blocking the event loop:
 * LOCK_BUSY and isBusy, which the store's transactions use (database.ts: transactionUnlessBusy
 * answers LOCK_BUSY for the first SPIN_MS of refusals in a row, then waits for the lock on timers,
 * never in SQLite's busy handler), and lockPatience, the synchronous form the store used before it
 * was asynchronous. No module uses lockPatience now (test/store.test.ts alone); what follows is its
 * reasoning, which database.ts keeps with timers in place of SQLite's short sleeps.
 *
 * With several serving processes on one file, a BEGIN IMMEDIATE often finds the write lock taken
 * for the few hundred microseconds of another process's commit. SQLite's busy handler then sleeps
 * the whole thread, at least 1 ms and more each time (measured under a delivery burst: 236 sleeps
 * in 3 s in one process), while requests wait in the kernel. A group commit can do better: give
 * its batch back, let the event loop take more requests into it, and try again on the next turn.
 * Past `spinMs` of refusals in a row it lets SQLite wait a little (a busy timeout of SHORT_WAIT_MS:
 * one or two sleeps) before giving the batch back again: two processes writing all the time left
 * one of them refused for good otherwise. Only past `patienceMs` of refusals does it wait as any
 * statement does (the connection's busy_timeout), so it always ends (measured, two serving
 * processes at 1,000 events/s: the old fallback, a full busy_timeout wait after 5 ms, blocked each
 * event loop 135 times in 15 s, 16 ms on average).
 */
import type BetterSqlite from 'better-sqlite3';

type Db = BetterSqlite.Database;

/** What `run` answers when the lock was taken and nothing was done. */
export const LOCK_BUSY: unique symbol = Symbol('lock busy');

export interface LockPatience {
  /**
   * Runs `write`, a whole transaction, without waiting for the write lock: LOCK_BUSY when another
   * connection holds it (the transaction rolled back, or never began). Once refused for longer than
   * `spinMs` in a row, runs it with the connection's usual busy timeout instead.
   */
  run<T>(write: () => T): T | typeof LOCK_BUSY;
}

export function isBusy(e: unknown): boolean {
  const code = (e as { code?: unknown })?.code;
  return typeof code === 'string' && code.startsWith('SQLITE_BUSY');
}

/** The busy timeout of a try past spinMs: SQLite sleeps 1 ms, then 2, then gives up. */
const SHORT_WAIT_MS = 3;

export function lockPatience(db: Db, opts: { spinMs?: number; patienceMs?: number; clock?: () => number } = {}): LockPatience {
  const spinMs = opts.spinMs ?? 5;
  const patienceMs = opts.patienceMs ?? 1_000;
  const clock = opts.clock ?? (() => performance.now());
  // SQLite applies this pragma when the statement is compiled, so it cannot be a prepared statement
  // run again: each switch is a fresh one (a few microseconds, once per group commit).
  const usual = Number(db.pragma('busy_timeout', { simple: true }));
  let refusedSince: number | undefined;
  return {
    run(write) {
      // Inside a caller's transaction there is no lock to wait for: a savepoint.
      const refusedFor = refusedSince === undefined ? 0 : clock() - refusedSince;
      if (db.inTransaction || refusedFor > patienceMs) {
        refusedSince = undefined;
        return write();
      }
      db.pragma(`busy_timeout = ${refusedFor > spinMs ? SHORT_WAIT_MS : 0}`);
      try {
        const value = write();
        refusedSince = undefined;
        return value;
      } catch (e) {
        if (!isBusy(e) || db.inTransaction) throw e;
        refusedSince ??= clock();
        return LOCK_BUSY;
      } finally {
        db.pragma(`busy_timeout = ${usual}`);
      }
    },
  };
}
