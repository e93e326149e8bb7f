/**
 * SQLite's write lock as the store's transactions meet it: LOCK_BUSY, what
 * `transactionUnlessBusy` answers while another process holds the lock (database.ts: for the first
 * few milliseconds of refusals in a row; then it waits for the lock on timers, never in SQLite's
 * busy handler, which sleeps the whole thread), and isBusy, which tells a refusal from a failure.
 *
 * With several serving processes on one file, a BEGIN IMMEDIATE often finds the write lock taken
 * for the few hundred microseconds of another process's commit (measured in a delivery burst at
 * the default settings: 24,000 of 41,000 tries). A group commit can do better than sleep: give its
 * batch back, let the event loop take more requests into it, and try again on the next turn.
 */

/** What a transaction that would have waited for the write lock answers instead: nothing was done. */
export const LOCK_BUSY: unique symbol = Symbol('lock busy');

export function isBusy(e: unknown): boolean {
  const code = (e as { code?: unknown })?.code;
  return typeof code === 'string' && code.startsWith('SQLITE_BUSY');
}
