/**
 * Held deliveries and the installation's lifecycle in the queue: pause holds its queued deliveries,
 * resume makes them due, uninstall cancels them.
 *
 * A delivery of a paused installation is `held`: out of the due index (next_attempt_at NULL), so
 * the scheduler never looks at it, until resume makes it due. Every write that could make such a
 * delivery due again (an attempt ending with a retry, a lease given back, a replay) holds it when
 * its installation is paused; `anyPaused` (false only when no installation is paused, in the
 * database too) spares the check when none is.
 */
import type { Db } from '../store/index.ts';
import { PAUSED } from './queue-rows.ts';
import { sqlFor } from '../store/postgres/db.ts';

/**
 * Holds one delivery if its installation is paused (a write that could make it due again); true
 * when it did.
 */
export function holdIfPausedOf(db: Db): (seq: number, now: number) => boolean {
  const hold = db.prepare<{ seq: number; now: number }>(
    `UPDATE webhook_deliveries SET status = 'held', next_attempt_at = NULL, updated_at = @now
     WHERE seq = @seq AND status IN ('pending', 'retrying') AND ${PAUSED}`,
  );
  return (seq, now) => hold.run({ seq, now }).changes > 0;
}

export function createHeldDeliveries(db: Db, noteDue: (origin: string, at: number) => void) {
  const q = {
    pausedInstallation: db.prepare<[string], { n: number }>('SELECT 1 AS n FROM webhook_endpoints WHERE installation_id = ? AND paused = 1'),
    // The endpoint's row read and share-locked: a pause (an UPDATE of it) waits for the caller's commit.
    pausedLocked: db.prepare<[string], number>(
      sqlFor(db, {
        sqlite: 'SELECT paused FROM webhook_endpoints WHERE installation_id = ?',
        postgres: 'SELECT paused FROM webhook_endpoints WHERE installation_id = ? FOR SHARE',
      }),
    ).pluck(),
    // Only queued deliveries have a next attempt: the due index finds them without reading history.
    hold: db.prepare<{ installationId: string; now: number }>(
      `UPDATE webhook_deliveries INDEXED BY webhook_deliveries_due SET status = 'held', next_attempt_at = NULL, updated_at = @now
       WHERE next_attempt_at IS NOT NULL AND installation_id = @installationId AND status IN ('pending', 'retrying')`,
    ),
    releaseHeld: db.prepare<{ installationId: string; now: number }, { origin: string }>(
      `UPDATE webhook_deliveries SET status = CASE WHEN attempts > 0 THEN 'retrying' ELSE 'pending' END, next_attempt_at = @now, updated_at = @now
       WHERE installation_id = @installationId AND status = 'held'
       RETURNING origin`,
    ),
    cancel: db.prepare(
      `UPDATE webhook_deliveries SET status = 'cancelled', next_attempt_at = NULL, completed_at = @now, updated_at = @now,
         last_error = COALESCE(last_error, 'cancelled: the installation was uninstalled')
       WHERE installation_id = @installationId AND status IN ('pending', 'retrying', 'held')`,
    ),
  };

  return {
    /** Whether the installation is paused, read in the caller's transaction (exact, unlike a copy in memory). */
    isPaused(installationId: string): boolean {
      return q.pausedInstallation.get(installationId) !== undefined;
    },

    /** As isPaused, and a pause by another node waits until the caller's transaction ends (PostgreSQL). */
    isPausedLocked(installationId: string): boolean {
      return q.pausedLocked.get(installationId) === 1;
    },

    /** Pause (in the caller's transaction): the installation's queued deliveries become `held`. Returns how many. */
    holdInstallation(installationId: string, now: number): number {
      return q.hold.run({ installationId, now }).changes;
    },

    /**
     * Resume (in the caller's transaction, after the pause is lifted): every held delivery of the
     * installation is due now, pending again (retrying if it had attempts). Returns how many.
     */
    releaseHeld(installationId: string, now: number): number {
      const origins = q.releaseHeld.all({ installationId, now });
      for (const o of new Set(origins.map((r) => r.origin))) noteDue(o, now);
      return origins.length;
    },

    /** Uninstall: queued deliveries of the installation will never go out. */
    cancelInstallation(installationId: string, now: number): number {
      return q.cancel.run({ installationId, now }).changes;
    },
  };
}
