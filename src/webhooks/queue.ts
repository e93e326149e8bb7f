/**
 * The delivery queue, in the store (SQLite or PostgreSQL): every state change of a delivery is one statement or one
 * transaction here, so a crash leaves each delivery either before or after a step, never between.
 * The worker (worker.ts) decides; the queue only records. It is built of stages, each in its own
 * file: scheduling (queue-due.ts), leases (queue-leases.ts), recording outcomes (queue-outcomes.ts),
 * held deliveries and the installation's lifecycle (queue-held.ts), replays (queue-replay.ts), and
 * what the API, the live tail and retention read (queue-reads.ts); enqueueing is here.
 */
import { timeOrderedId } from '../ids.ts';
import type { Db } from '../store/index.ts';
import { createDueHints } from './queue-due.ts';
import { createHeldDeliveries, holdIfPausedOf } from './queue-held.ts';
import { createLeases } from './queue-leases.ts';
import { createOutcomes } from './queue-outcomes.ts';
import { createQueueReads } from './queue-reads.ts';
import { createReplays } from './queue-replay.ts';
import { originOf, type Claimed } from './queue-rows.ts';

export { DELIVERY_STATUSES, type DeliveryStatus, type Delivery, type Attempt, type DeliveryDetail } from './views.ts';
export { originOf, originKey, MAX_ORIGIN_LENGTH, type Claimed, type AttemptRecord, type NextState } from './queue-rows.ts';
export type { DeliveryFilter, AttemptFeedItem } from './queue-reads.ts';
export type { ReplayFilter, ReplayRefusal } from './queue-replay.ts';

/** `dlv_` + a time-ordered id (see src/ids.ts). */
export const newDeliveryId = (now = Date.now()): string => timeOrderedId('dlv', now);

export type Queue = ReturnType<typeof createQueue>;

/**
 * `anyPaused` is false only when no installation is paused, in the database too: it spares the
 * check that holds a retry of a paused installation (see queue-held.ts).
 */
export function createQueue(db: Db, opts: { maxAttempts: () => number; anyPaused?: () => boolean }) {
  const anyPaused = opts.anyPaused ?? (() => true);
  const due = createDueHints(db);
  const { noteDue } = due;
  const holdIfPaused = holdIfPausedOf(db);
  // The statements run for every delivery (insert here, insertAttempt and complete in
  // queue-outcomes.ts) take positional parameters: binding by name costs about 1 us more per
  // statement (measured, 11 columns).
  const q = {
    insert: db.prepare(
      `INSERT INTO webhook_deliveries (id, event_id, event_type, installation_id, url, origin, body, status, next_attempt_at, lease_until, lease_owner, created_at, updated_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (event_id, installation_id) DO NOTHING`,
    ),
    setUrl: db.prepare('UPDATE webhook_deliveries SET url = ?, origin = ? WHERE seq = ?'),
    setInstallationUrl: db.prepare(
      `UPDATE webhook_deliveries SET url = ?, origin = ? WHERE installation_id = ? AND status IN ('pending', 'retrying', 'held') AND url != ?`,
    ),
  };

  return {
    /**
     * Enqueue one delivery (inside the caller's transaction). Null when this event already has one
     * for this installation. With `lease`, the delivery is stored already claimed by that owner
     * (its first attempt starts as soon as the transaction commits, without a claim of its own).
     * With `held` (its installation is paused: see isPaused), it is stored `held`, with no next
     * attempt, and waits for releaseHeld.
     */
    enqueue(
      input: { id?: string; eventId: string; eventType: string; installationId: string; url: string; body: string; now: number; held?: boolean },
      lease?: { owner: string; until: number },
    ): Claimed | null {
      // The caller may have made the id already: the body names it (see body.ts).
      const id = input.id ?? newDeliveryId(input.now);
      const origin = originOf(input.url);
      const now = input.now;
      const held = input.held === true && !lease;
      const r = q.insert.run(
        id, input.eventId, input.eventType, input.installationId, input.url, origin, input.body,
        held ? 'held' : 'pending', held ? null : now, lease?.until ?? null, lease?.owner ?? null, now, now,
      );
      if (!r.changes) return null;
      if (!lease && !held) noteDue(origin, input.now);
      return {
        seq: Number(r.lastInsertRowid),
        id,
        url: input.url,
        origin,
        body: input.body,
        eventId: input.eventId,
        installationId: input.installationId,
        eventType: input.eventType,
        status: held ? 'held' : 'pending',
        attempts: 0,
        nextAttemptAt: held ? null : input.now,
        createdAt: input.now,
      };
    },

    setUrl(seq: number, url: string): void {
      q.setUrl.run(url, originOf(url), seq);
      noteDue(originOf(url), 0);
    },

    /** The installation's URL changed: its queued deliveries go to the new one. Returns how many. */
    setInstallationUrl(installationId: string, url: string): number {
      const n = q.setInstallationUrl.run(url, originOf(url), installationId, url).changes;
      if (n) noteDue(originOf(url), 0);
      return n;
    },

    ...due,
    ...createLeases(db),
    ...createOutcomes(db, { anyPaused, holdIfPaused, noteDue }),
    ...createHeldDeliveries(db, noteDue),
    ...createReplays(db, { holdIfPaused, noteDue }),
    ...createQueueReads(db, opts.maxAttempts),
  };
}
