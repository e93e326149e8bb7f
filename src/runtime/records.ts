/**
 * Invocation records, committed in groups, and the observers told of each one once it is.
 *
 * Group commit. A caller that waits for its record (events, renders, the runtime endpoint) has it
 * committed at the end of this event-loop turn with whatever else is pending; a public-endpoint
 * answer goes out at once and its record joins the next commit, at most RECORD_DELAY_MS later
 * (under load, one commit per tens of requests instead of one per few). Readers of invocations
 * flush first (see beforeInvocationsRead), so what was answered can always be read back; a crash
 * can lose the records of the last few milliseconds, never an event or a delivery.
 */
import type { Logger } from '../log/index.ts';
import type { Db } from '../store/index.ts';
import { LOCK_BUSY, lockPatience } from '../store/patience.ts';
import { batchPerTurn } from '../lib/batch.ts';
import { createObservers } from '../lib/observers.ts';
import { beforeInvocationsRead } from './invocations.ts';
import type { InvocationNotice } from './service-deps.ts';

/** Longest a public-endpoint invocation's record waits for its commit, and most records one waits with. */
const RECORD_DELAY_MS = 10;
const RECORD_BATCH = 256;

export function createInvocationRecords(db: Db, log: Logger) {
  const insert = db.prepare(
    `INSERT INTO invocations (id, integration, installation_id, event_type, event_id, status, duration_ms, cpu_ms, error_kind, error_message, error_stack, error_limit, logs, created_at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
  );
  type Pending = { row: unknown[]; notice: InvocationNotice; done?: () => void };
  const records = batchPerTurn<Pending>(writeRecords);
  const insertAll = db.transaction((rows: unknown[][]) => {
    for (const row of rows) insert.run(...row);
  });
  const patience = lockPatience(db);
  /**
   * A scheduled flush (a turn's or RECORD_DELAY_MS's) is patient: while another serving process
   * holds the write lock, the records wait a turn rather than the thread sleeping (see
   * store/patience.ts). A reader's flush and the last ones at close write at once, waiting for the
   * lock if they must.
   */
  function writeRecords(batch: Pending[], scheduled: boolean): void {
    try {
      const rows = batch.map((p) => p.row);
      if (!scheduled || closing) insertAll(rows);
      else if (patience.run(() => insertAll(rows)) === LOCK_BUSY) return records.putBack(batch);
    } catch {
      // One bad row must not lose the others: record them one by one.
      for (const p of batch) {
        try {
          insert.run(...p.row);
        } catch (e) {
          log.error('recording an invocation failed', { request_id: p.row[0] as string, error: e as Error });
        }
      }
    }
    for (const p of batch) {
      notify(p.notice);
      p.done?.();
    }
  }
  const flushRecords = () => records.flush();
  beforeInvocationsRead(db, flushRecords);
  /** Queue one record; with `wait`, a promise of its commit (none while closing: it is written at once). */
  function record(row: unknown[], notice: InvocationNotice, wait: boolean): Promise<void> | undefined {
    const p: Pending = { row, notice };
    records.add(p);
    if (closing) flushRecords(); // shutting down: the database closes soon
    else if (wait || records.size >= RECORD_BATCH) records.soon();
    else records.within(RECORD_DELAY_MS);
    if (wait && !closing) return new Promise((done) => (p.done = done));
  }
  let closing = false;
  const observers = createObservers<[InvocationNotice]>(log, 'invocation observer failed');
  const notify = observers.notify;

  return {
    record,
    /** Commit what is pending now. */
    flushRecords,
    notify,
    /** Observe each notice; returns the unsubscribe function. */
    observe: observers.add,
    /** Shutdown: commit the records still pending, and from now on each one as it comes. */
    close(): void {
      closing = true;
      flushRecords();
    },
  };
}
