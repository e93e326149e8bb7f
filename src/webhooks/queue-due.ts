/**
 * Scheduling: which deliveries are due, found without scanning a backlog. Per endpoint origin the
 * queue keeps a hint of when it next has due work, takes origins in turn, and tells the worker
 * when to look next.
 */
import type { Db } from '../store/index.ts';

export type DueHints = ReturnType<typeof createDueHints>;

export function createDueHints(db: Db) {
  const q = {
    // Ties (a resume makes a whole backlog due at the same ms) come in rowid order, the index's
    // last column: event order.
    dueForOrigin: db.prepare<{ origin: string; now: number; limit: number }, { seq: number; origin: string }>(
      `SELECT d.seq, d.origin FROM webhook_deliveries d INDEXED BY webhook_deliveries_due_by_origin
       WHERE d.origin = @origin AND d.next_attempt_at <= @now AND (d.lease_until IS NULL OR d.lease_until <= @now)
       ORDER BY d.next_attempt_at, d.seq LIMIT @limit`,
    ),
    nextForOrigin: db.prepare<{ origin: string; now: number }, { at: number | null }>(
      `SELECT MIN(d.next_attempt_at) AS at FROM webhook_deliveries d INDEXED BY webhook_deliveries_due_by_origin
       WHERE d.origin = @origin AND d.next_attempt_at IS NOT NULL AND (d.lease_until IS NULL OR d.lease_until <= @now)`,
    ),
    liveOrigins: db.prepare<[], { origin: string; at: number }>(
      `SELECT origin, MIN(next_attempt_at) AS at FROM webhook_deliveries WHERE next_attempt_at IS NOT NULL GROUP BY origin`,
    ),
    // The next scheduled attempt, or a lease running out (an attempt whose outcome was never
    // recorded becomes due again then), whichever comes first.
    nextDue: db.prepare<{ now: number }, { at: number | null }>(
      `SELECT MIN(at) AS at FROM (
         SELECT MIN(next_attempt_at) AS at FROM webhook_deliveries WHERE next_attempt_at > @now
         UNION ALL SELECT MIN(lease_until) FROM webhook_deliveries WHERE lease_until > @now) AS soonest`,
    ),
  };

  // Per origin, a lower bound of the earliest time it has a due, unleased, not-held delivery
  // (absent: nothing live). A hint, kept conservative (too early only costs one indexed query):
  // every place that sets next_attempt_at lowers it; a query that finds nothing raises or drops it.
  const originDue = new Map<string, number>();
  for (const r of q.liveOrigins.all()) originDue.set(r.origin, r.at);
  const noteDue = (origin: string, at: number): void => {
    const cur = originDue.get(origin);
    if (cur === undefined || at < cur) originDue.set(origin, at);
  };
  let rotation = 0;

  return {
    /**
     * Up to `limit` due, unleased deliveries, at most `roomOf(origin)` per origin, each origin's
     * earliest first (ties in the order they were stored), origins taken in turn. Cost grows with
     * the origins that have due work, never with the size of a backlog (held ones are not due).
     */
    due(now: number, limit: number, roomOf: (origin: string) => number = () => limit): Array<{ seq: number; origin: string }> {
      const origins = [...originDue.keys()];
      const out: Array<{ seq: number; origin: string }> = [];
      // Round-robin over origins (a different first one each time): every endpoint gets its turn.
      rotation = origins.length ? (rotation + 1) % origins.length : 0;
      for (let i = 0; i < origins.length && out.length < limit; i++) {
        const origin = origins[(rotation + i) % origins.length];
        const room = roomOf(origin);
        if (room <= 0 || originDue.get(origin)! > now) continue;
        const rows = q.dueForOrigin.all({ origin, now, limit: Math.min(room, limit - out.length) });
        if (rows.length) {
          out.push(...rows);
          continue;
        }
        const at = q.nextForOrigin.get({ origin, now })?.at ?? null;
        if (at === null) originDue.delete(origin);
        else originDue.set(origin, at > now ? at : now + 1); // leased or just claimed: look again next time
      }
      return out;
    },

    /**
     * Learn the origins other processes sharing the store have made due (their retries, the leases
     * of a process that died): the per-origin hint only sees this process's own writes.
     */
    refreshDue(): void {
      for (const r of q.liveOrigins.all()) noteDue(r.origin, r.at);
    },

    /** A delivery of `origin` becomes due at `at` (a retry scheduled, a manual attempt that kept its schedule). */
    noteDue,

    /** The earliest scheduled attempt after `now`, if any (the scheduler's next wake-up). */
    nextDueAfter(now: number): number | undefined {
      return q.nextDue.get({ now })?.at ?? undefined;
    },
  };
}
