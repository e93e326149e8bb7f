/**
 * Held deliveries and the installation's lifecycle in the queue: pause holds its queued deliveries,
 * resume makes them due, uninstall cancels them.
 *
 * A delivery of a paused installation is `held`: out of the due index (next_attempt_at NULL), so
 * the scheduler never looks at it, until resume makes it due. Every write that could make such a
 * delivery due again holds it in the same statement or transaction when its installation is paused:
 * its enqueue (queue.ts), an attempt ending with a retry (queue-outcomes.ts), a replay or an
 * interrupted attempt (holdIfPaused).
 */
import { statement, type Queries } from '../store/contract.ts';
import { originOf } from './queue-rows.ts';

const lifecycle = {
  // Only queued deliveries have a next attempt: the due index finds them without reading history.
  hold: statement(
    `UPDATE webhook_deliveries INDEXED BY webhook_deliveries_due SET status = 'held', next_attempt_at = NULL, updated_at = @now
     WHERE next_attempt_at IS NOT NULL AND installation_id = @installationId AND status IN ('pending', 'retrying')`,
  ),
  releaseHeld: statement<{ origin: string }>(
    `UPDATE webhook_deliveries SET status = CASE WHEN attempts > 0 THEN 'retrying' ELSE 'pending' END, next_attempt_at = @now, updated_at = @now
     WHERE installation_id = @installationId AND status = 'held'
     RETURNING origin`,
  ),
  cancel: statement(
    `UPDATE webhook_deliveries SET status = 'cancelled', next_attempt_at = NULL, completed_at = @now, updated_at = @now,
       last_error = COALESCE(last_error, 'cancelled: the installation was uninstalled')
     WHERE installation_id = @installationId AND status IN ('pending', 'retrying', 'held')`,
  ),
  setInstallationUrl: statement(
    `UPDATE webhook_deliveries SET url = ?, origin = ? WHERE installation_id = ? AND status IN ('pending', 'retrying', 'held') AND url != ?`,
  ),
};

/** The installation's lifecycle in the queue, each step in the installations module's transaction (`tx`). */
export function createHeldDeliveries(noteDue: (origin: string, at: number) => void) {
  return {
    /** Pause: the installation's queued deliveries become `held`. Returns how many. */
    async holdInstallation(tx: Queries, installationId: string, now: number): Promise<number> {
      return (await tx.run(lifecycle.hold, { installationId, now })).changes;
    },

    /**
     * Resume (after the pause is lifted): every held delivery of the installation is due now,
     * pending again (retrying if it had attempts). Returns how many.
     */
    async releaseHeld(tx: Queries, installationId: string, now: number): Promise<number> {
      const origins = await tx.all(lifecycle.releaseHeld, { installationId, now });
      for (const o of new Set(origins.map((r) => r.origin))) noteDue(o, now);
      return origins.length;
    },

    /** Uninstall: queued deliveries of the installation will never go out. */
    async cancelInstallation(tx: Queries, installationId: string, now: number): Promise<number> {
      return (await tx.run(lifecycle.cancel, { installationId, now })).changes;
    },

    /** The installation's URL changed: its queued deliveries go to the new one. Returns how many. */
    async setInstallationUrl(tx: Queries, installationId: string, url: string): Promise<number> {
      const n = (await tx.run(lifecycle.setInstallationUrl, [url, originOf(url), installationId, url])).changes;
      if (n) noteDue(originOf(url), 0);
      return n;
    },
  };
}
