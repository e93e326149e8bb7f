/**
 * Invocation records, committed in groups, and the observers told of each one once it is.
 *
 * Group commit. A caller that waits for its record (events, renders, the runtime endpoint) has it
 * committed at the end of this event-loop turn with whatever else is pending; a public-endpoint
 * answer goes out at once and its record joins the next commit, at most RECORD_DELAY_MS later
 * (under load, one commit per tens of requests instead of one per few). A commit writes its records
 * with a few multi-row INSERTs on SQLite, one on PostgreSQL (store/rows-insert.ts), after the feed's order lock on
 * PostgreSQL (store/feed-order.ts). Readers of invocations flush first (see beforeInvocationsRead),
 * so what was answered can always be read back; a crash can lose the records of the last few
 * milliseconds, and a store that fails the commit those of that commit (logged), never an event
 * or a delivery.
 */
import type { Logger } from '../log/index.ts';
import { appendInOrder } from '../store/feed-order.ts';
import { rowsInsert } from '../store/rows-insert.ts';
import { LOCK_BUSY, statement, type Database, type Tx } from '../store/contract.ts';
import { storageCode } from '../store/health.ts';
import { batchPerTurn } from '../lib/batch.ts';
import { createObservers } from '../lib/observers.ts';
import { beforeInvocationsRead } from './invocations.ts';
import type { InvocationNotice } from './service-deps.ts';

/** Longest a public-endpoint invocation's record waits for its commit, and most records one waits with. */
const RECORD_DELAY_MS = 10;
const RECORD_BATCH = 256;

const COLUMNS = [
  'id',
  'integration',
  'installation_id',
  'event_type',
  'event_id',
  'status',
  'duration_ms',
  'cpu_ms',
  'error_kind',
  'error_message',
  'error_stack',
  'error_limit',
  'logs',
  'created_at',
] as const;

/** A turn's records: multi-row VALUES on SQLite, one JSON array of rows (each an array in COLUMNS' order) on PostgreSQL. */
const insertAll = rowsInsert(
  'invocations',
  COLUMNS,
  statement(
    `INSERT INTO invocations (${COLUMNS.join(', ')})
     SELECT r ->> 0, r ->> 1, r ->> 2, r ->> 3, r ->> 4, CAST(r ->> 5 AS integer), CAST(r ->> 6 AS double precision), CAST(r ->> 7 AS double precision),
            r ->> 8, r ->> 9, r ->> 10, r ->> 11, r ->> 12, r ->> 13
     FROM jsonb_array_elements(CAST(? AS jsonb)) WITH ORDINALITY AS rows (r, n) ORDER BY n`,
  ),
);

export function createInvocationRecords(database: Database, log: Logger) {
  type Pending = { row: unknown[]; notice: InvocationNotice; done?: () => void };
  const records = batchPerTurn<Pending>((batch, scheduled) => void track(writeRecords(batch, scheduled)));
  /** Commits under way: a reader's flush waits for them too. */
  const writing = new Set<Promise<void>>();
  const track = (p: Promise<void>) => {
    writing.add(p);
    void p.finally(() => writing.delete(p));
  };

  /**
   * A scheduled flush (a turn's or RECORD_DELAY_MS's) is patient: while another serving process
   * holds SQLite's write lock, the records wait a turn (see store/patience.ts). A reader's flush and
   * the last ones at close wait for the lock if they must (on timers: the event loop keeps serving).
   */
  async function writeRecords(batch: Pending[], scheduled: boolean): Promise<void> {
    const rows = batch.map((p) => p.row);
    // The records are `logs --follow`'s feed: numbered and committed in one order (store/feed-order.ts).
    const write = async (tx: Tx) => {
      await appendInOrder(tx, 'invocations');
      await insertAll.run(tx, rows);
    };
    try {
      if (!scheduled || closing) await database.transaction(write);
      else if ((await database.transactionUnlessBusy(write)) === LOCK_BUSY) return records.putBack(batch);
    } catch (e) {
      if (storageCode(e)) {
        // The store failed, not a row (away, full, read-only): trying each row would only wait for it again.
        log.error('recording invocations failed', { count: batch.length, error: e as Error });
      } else {
        // One bad row must not lose the others: record them one by one.
        await oneByOne(batch);
      }
    }
    for (const p of batch) {
      notify(p.notice);
      p.done?.();
    }
  }
  async function oneByOne(batch: Pending[]): Promise<void> {
    for (const p of batch) {
      try {
        await database.transaction(async (tx) => {
          await appendInOrder(tx, 'invocations');
          await insertAll.run(tx, [p.row]);
        });
      } catch (e) {
        log.error('recording an invocation failed', { request_id: p.row[0] as string, error: e as Error });
      }
    }
  }
  /** Commit what is pending now: resolves once it (and every commit under way) is in the store. */
  async function flushRecords(): Promise<void> {
    // This flush writes without giving back; a scheduled one under way may give its batch back
    // (a busy lock), which the second round then writes.
    for (let round = 0; round < 2; round++) {
      records.flush();
      await Promise.all(writing);
    }
  }
  beforeInvocationsRead(database, flushRecords);
  /** Queue one record; with `wait`, a promise of its commit. */
  function record(row: unknown[], notice: InvocationNotice, wait: boolean): Promise<void> | undefined {
    const p: Pending = { row, notice };
    const committed = wait ? new Promise<void>((done) => (p.done = done)) : undefined;
    records.add(p);
    if (closing)
      void flushRecords(); // shutting down: the database closes soon
    else if (wait || records.size >= RECORD_BATCH) records.soon();
    else records.within(RECORD_DELAY_MS);
    return committed;
  }
  let closing = false;
  const observers = createObservers<[InvocationNotice]>(log, 'invocation observer failed');
  const notify = observers.notify;

  return {
    record,
    flushRecords,
    notify,
    /** Observe each notice; returns the unsubscribe function. */
    observe: observers.add,
    /** Shutdown: commit the records still pending, and from now on each one as it comes. */
    close(): Promise<void> {
      closing = true;
      return flushRecords();
    },
  };
}
