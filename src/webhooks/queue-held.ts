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
import { statement, type Queries } from '../store/contract.ts';
import { jsonRows } from '../store/leased-queue.ts';

const q = {
  // The endpoints' rows read, and on PostgreSQL share-locked: a pause (an UPDATE of one) waits for
  // the caller's commit, then holds what it stored.
  pausedOf: statement<{ installation_id: string }>({
    sqlite: `SELECT installation_id FROM webhook_endpoints WHERE installation_id IN (SELECT value FROM json_each(@ids)) AND paused = 1`,
    postgres: `SELECT installation_id, paused FROM webhook_endpoints
      WHERE installation_id IN (SELECT value FROM json_array_elements_text(CAST(@ids AS json))) FOR SHARE`,
  }),
};

/**
 * Which of these installations are paused, read in the caller's transaction (exact, unlike a copy
 * in memory); on PostgreSQL a pause by another node waits until the caller's transaction ends.
 */
export async function pausedAmong(tx: Queries, installationIds: readonly string[]): Promise<Set<string>> {
  if (!installationIds.length) return new Set();
  const rows = (await tx.all(q.pausedOf, { ids: jsonRows(installationIds) })) as Array<{ installation_id: string; paused?: number }>;
  return new Set(rows.filter((r) => r.paused === undefined || Number(r.paused) === 1).map((r) => r.installation_id));
}

/**
 * The installation's lifecycle in the queue, told inside the installations module's (synchronous)
 * transactions: it stays on the synchronous connection until that module's lifecycle observers
 * take a transaction of the store's contract.
 */
export function createHeldDeliveries(db: Db, noteDue: (origin: string, at: number) => void) {
  const s = {
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
    /** Pause (in the caller's transaction): the installation's queued deliveries become `held`. Returns how many. */
    holdInstallation(installationId: string, now: number): number {
      return s.hold.run({ installationId, now }).changes;
    },

    /**
     * Resume (in the caller's transaction, after the pause is lifted): every held delivery of the
     * installation is due now, pending again (retrying if it had attempts). Returns how many.
     */
    releaseHeld(installationId: string, now: number): number {
      const origins = s.releaseHeld.all({ installationId, now });
      for (const o of new Set(origins.map((r) => r.origin))) noteDue(o, now);
      return origins.length;
    },

    /** Uninstall: queued deliveries of the installation will never go out. */
    cancelInstallation(installationId: string, now: number): number {
      return s.cancel.run({ installationId, now }).changes;
    },
  };
}
