/**
 * Scheduling: which deliveries are due, found without scanning a backlog. Per endpoint origin the
 * queue keeps a hint of when it next has due work, takes origins in turn (leasing each one's due
 * deliveries in one statement: queue-leases.ts), and tells the sender when to look next.
 */
import { statement, type Queries } from '../store/contract.ts';
import { deliveryLeases } from './queue-leases.ts';
import { claimedOf, type Claimed } from './queue-rows.ts';

const q = {
  nextForOrigin: statement<{ at: number | null }>(
    `SELECT MIN(d.next_attempt_at) AS at FROM webhook_deliveries d INDEXED BY webhook_deliveries_due_by_origin
     WHERE d.origin = @origin AND d.next_attempt_at IS NOT NULL AND (d.lease_until IS NULL OR d.lease_until <= @now)`,
  ),
  // Per origin, when its earliest live delivery can be claimed: its next attempt's time, or when
  // its lease runs out if later (an attempt in flight here or on another process is no work due).
  liveOrigins: statement<{ origin: string; at: number }>({
    sqlite: `SELECT origin, MIN(max(next_attempt_at, COALESCE(lease_until, 0))) AS at FROM webhook_deliveries WHERE next_attempt_at IS NOT NULL GROUP BY origin`,
    postgres: `SELECT origin, MIN(GREATEST(next_attempt_at, COALESCE(lease_until, 0))) AS at FROM webhook_deliveries WHERE next_attempt_at IS NOT NULL GROUP BY origin`,
  }),
};

export type DueHints = ReturnType<typeof createDueHints>;

/** The hints start empty: `refreshDue` (awaited at start) fills them from the store. */
export function createDueHints() {
  // Per origin, a lower bound of the earliest time it has a due, unleased, not-held delivery
  // (absent: nothing live). A hint, kept conservative (too early only costs one indexed query):
  // every place that sets next_attempt_at lowers it; a claim that finds nothing raises or drops it.
  const originDue = new Map<string, number>();
  const noteDue = (origin: string, at: number): void => {
    const cur = originDue.get(origin);
    if (cur === undefined || at < cur) originDue.set(origin, at);
  };
  let rotation = 0;

  return {
    /** Whether some origin with room may have due work now (a claim is worth the write lock). */
    mayHaveDue(now: number, roomOf: (origin: string) => number): boolean {
      for (const [origin, at] of originDue) if (at <= now && roomOf(origin) > 0) return true;
      return false;
    },

    /**
     * Lease up to `limit` due deliveries to `owner` until `until`, at most `roomOf(origin)` per
     * origin, each origin's earliest first (ties in the order they were stored), origins taken in
     * turn: one statement per origin with due work, in the caller's transaction. Cost grows with
     * the origins that have due work, never with the size of a backlog (held ones are not due).
     */
    async claimDue(tx: Queries, now: number, limit: number, roomOf: (origin: string) => number, owner: string, until: number): Promise<Claimed[]> {
      const origins = [...originDue.keys()];
      const out: Claimed[] = [];
      // Round-robin over origins (a different first one each time): every endpoint gets its turn.
      rotation = origins.length ? (rotation + 1) % origins.length : 0;
      for (let i = 0; i < origins.length && out.length < limit; i++) {
        const origin = origins[(rotation + i) % origins.length];
        const room = roomOf(origin);
        if (room <= 0 || originDue.get(origin)! > now) continue;
        const rows = await deliveryLeases.claimDue(tx, { group: origin, now, limit: Math.min(room, limit - out.length), owner, until });
        if (rows.length) {
          for (const r of rows) out.push(claimedOf(r)!);
          continue;
        }
        const at = (await tx.get(q.nextForOrigin, { origin, now }))?.at ?? null;
        if (at === null) originDue.delete(origin);
        else originDue.set(origin, at > now ? at : now + 1); // leased or just claimed: look again next time
      }
      return out;
    },

    /**
     * Learn the origins other processes sharing the store have made due (their retries, the leases
     * of a process that died): the per-origin hint only sees this process's own writes.
     */
    async refreshDue(db: Queries): Promise<void> {
      for (const r of await db.all(q.liveOrigins)) noteDue(r.origin, Number(r.at));
    },

    /** A delivery of `origin` becomes due at `at` (a retry scheduled, a manual attempt that kept its schedule). */
    noteDue,

    /**
     * The scheduler's next wake-up: the earliest time after `now` some origin has work due, as the
     * hints know it, without asking the store (it was a read per attempt and per ingest commit, two
     * of a single event's twelve statements on PostgreSQL). The hints hold this process's own
     * writes (retries, holds, replays, leases it let run out); what other processes and nodes make
     * due arrives with their announcements and the once-a-second refresh (refreshDue).
     */
    nextDueAfter(now: number): number | undefined {
      let next: number | undefined;
      for (const at of originDue.values()) if (at > now && (next === undefined || at < next)) next = at;
      return next;
    },
  };
}
