/**
 * Rows a live tail reads by row number (`WHERE id > @cursor ORDER BY id`: `deliveries tail`'s
 * attempts, `logs --follow`'s invocations) must become visible in row-number order, or a tail that
 * read row 12 skips row 10 committed a moment later. SQLite has one writer at a time, so its
 * commits are in row order already. On PostgreSQL concurrent transactions take numbers from the
 * sequence and commit in any order: a transaction-scoped advisory lock per feed, taken just before
 * the feed's rows are inserted and held to the commit, puts the numbering and the commit of those
 * rows in one order. Insert the feed's rows as the transaction's last statement (the lock is then
 * held only for that insert and the commit). Any other answer (hold back the tail until no older
 * transaction is open, by snapshot xmin) needs a cursor of two numbers; this keeps the one.
 */
import { statement, type Queries } from './contract.ts';

/** The feeds, each with its own lock key (any constants the nodes share). */
const FEEDS = { attempts: 0x73776661, invocations: 0x73776669 } as const;

const lock = statement({ sqlite: 'SELECT 1', postgres: 'SELECT pg_advisory_xact_lock(?)' });

/**
 * PostgreSQL: the lock as a statement's CTE, for a feed's rows inserted by that one statement in
 * its own commit: the INSERT reads it (FROM the CTE) before its rows take their numbers.
 */
export const feedOrderLock = (feed: keyof typeof FEEDS): string => `SELECT pg_advisory_xact_lock(${FEEDS[feed]})`;

/** Call in the transaction, right before inserting `feed`'s rows; nothing to do on SQLite. */
export async function appendInOrder(tx: Queries, feed: keyof typeof FEEDS): Promise<void> {
  if (tx.engine === 'postgres') await tx.get(lock, [FEEDS[feed]]);
}
