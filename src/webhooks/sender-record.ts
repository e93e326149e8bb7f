/**
 * The sender's record turn (group commit): attempts that ended wait here to be recorded, in one
 * transaction per event-loop turn however many ended in it. Their slots are free already; their
 * leases hold until the write, so a crash before it leaves the delivery leased, recovered as
 * interrupted and sent again (at-least-once). The turn also leases the next due deliveries when
 * the queue's hints say there are some.
 */
import type { Logger } from '../log/index.ts';
import { batchPerTurn } from '../lib/batch.ts';
import { LOCK_BUSY, type Database } from '../store/contract.ts';
import type { AttemptRecord, Claimed, NextState, Queue } from './queue.ts';
import type { Ahead, AheadQueue } from './sender-ahead.ts';
import type { Schedule } from './sender-schedule.ts';

/** An attempt just recorded: its id (the feed cursor), the delivery it belongs to, and the delivery's new state. */
export interface RecordedAttempt {
  attemptId: number;
  delivery: Claimed;
  record: AttemptRecord;
  next: NextState;
  /** How long the attempt held its slot (ms): from its start to the end of its HTTP exchange. */
  slotMs: number;
}

/** An attempt that ended, waiting to be recorded; `done` is told its record once written (undefined if it could not be). */
export interface Ended {
  c: Claimed;
  record: AttemptRecord;
  next: NextState;
  ended: number;
  slotMs: number;
  done: (r: AttemptRecord | undefined) => void;
}

export interface RecordTurn {
  /** An attempt ended: it joins this turn's record. */
  push(e: Ended): void;
  /** Stop (the attempts in flight settled): write what ended and is not written yet. */
  flush(): Promise<void>;
}

export interface RecordDeps {
  queue: Queue;
  database: Database;
  clock: () => number;
  /** This sender's lease owner. */
  owner: string;
  ahead: AheadQueue;
  schedule: Pick<Schedule, 'pump' | 'arm'>;
  stopped(): boolean;
  log: Logger;
  /** Called after each attempt is recorded (live tail, metrics); must not throw. */
  onAttempt?: (e: RecordedAttempt) => void;
  /** Told when a write fails and when one commits again (store/health.ts). */
  health?: { failed(error: unknown): void; ok(): void };
}

export function createRecordTurn(deps: RecordDeps): RecordTurn {
  const { queue, database, clock, owner, ahead, schedule, log } = deps;
  const ended = batchPerTurn<Ended>((batch) => void recordEnded(batch));
  /** While recording fails: the wait before the next try (ms), doubling to 2 s. */
  let recordRetry = 0;
  /** The turn's record being written (one at a time: what ends meanwhile waits for the next turn). */
  let recording: Promise<void> | undefined;

  /**
   * Record the attempts that ended and lease the next due deliveries, in one transaction (one
   * commit per event-loop turn, however many attempts ended in it).
   */
  function recordEnded(batch: Ended[]): Promise<void> {
    // One record at a time: what ended meanwhile waits behind the one being written, and is
    // flushed when it ends (not tried again every turn until then: on PostgreSQL that spun the
    // event loop through every round trip).
    if (recording) {
      ended.hold(batch);
      return recording;
    }
    const p = (recording = record(batch).finally(() => {
      recording = undefined;
      if (ended.size) ended.soon();
    }));
    return p;
  }

  async function record(batch: Ended[]): Promise<void> {
    const now = clock();
    let ok = true;
    let ids: number[] = [];
    let next: Ahead[] = [];
    try {
      const items = batch.map((e) => ({ seq: e.c.seq, origin: e.c.origin, owner, attempt: e.record, next: e.next, now: e.ended }));
      const recorded =
        !deps.stopped() && ahead.worthClaiming(now)
          ? await database.transactionUnlessBusy(async (tx) => {
              // Claims first: the attempts are a live tail's feed, inserted last under the feed's order
              // lock (store/feed-order.ts), which on PostgreSQL is then held from the outcomes' row
              // locks to the commit, not through the claims as well (every node's record turn waits for it).
              next = await ahead.claimDue(tx, now);
              return queue.completeMany(tx, items);
            })
          : await queue.recordOutcomes(database, items);
      // Another process is committing: these outcomes wait a turn (the claims were rolled back).
      if (recorded === LOCK_BUSY) return ended.putBack(batch);
      ids = recorded.ids;
      // Only when this process was held past its lease (the supervisor kills a silent one first).
      if (recorded.stale.length)
        log.warn('attempts ended after their lease had expired; the delivery was left to the sender that took it', { deliveries: recorded.stale.length });
    } catch (e) {
      ok = false;
      next = []; // rolled back with the transaction
      if (!deps.stopped()) {
        // A write failed (a full disk, a read-only or locked file): the outcomes are still here and
        // the leases still hold, so write them again shortly. Once the store takes writes again
        // they are recorded as they happened, with no second send.
        deps.health?.failed(e);
        if (!recordRetry) log.error('recording delivery attempts failed; writing them again shortly', { error: e as Error, attempts: batch.length });
        recordRetry = Math.min((recordRetry || 50) * 2, 2_000);
        return ended.putBack(batch, recordRetry); // attempts ending meanwhile wait with them
      }
      // Stopping, with the store closed under us: the leases stay, so these attempts are
      // recovered as interrupted (and sent again) at the next start.
    }
    if (ok) {
      recordRetry = 0;
      deps.health?.ok();
    }
    batch.forEach((e, i) => {
      if (ok) {
        logOutcome(e);
        try {
          deps.onAttempt?.({ attemptId: ids[i], delivery: e.c, record: e.record, next: e.next, slotMs: e.slotMs });
        } catch (err) {
          log.error('attempt observer failed', { error: err as Error });
        }
      }
      e.done(ok ? e.record : undefined);
    });
    ahead.add(next);
    ahead.drainAll();
    if (deps.stopped()) return;
    // A retry just recorded that is due already (its attempt ended more than its delay ago) was not
    // there for this turn's claims: look again now.
    if (!ok || batch.some((e) => e.next.nextAttemptAt !== null && e.next.nextAttemptAt <= clock())) schedule.pump();
    else schedule.arm(now);
  }

  function logOutcome(e: Ended): void {
    if (e.next.status === 'failed' && !e.record.manual)
      log.warn('webhook delivery failed', { delivery: e.c.id, installation: e.c.installationId, attempts: e.next.attempts, reason: e.record.error });
    else if (e.record.outcome !== 'success')
      log.debug('webhook attempt', { delivery: e.c.id, outcome: e.record.outcome, status: e.record.status, error: e.record.error });
  }

  return {
    push: ended.push,
    async flush() {
      await recording;
      ended.flush();
      await recording;
    },
  };
}
