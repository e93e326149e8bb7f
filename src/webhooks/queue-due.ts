/**
 * Scheduling: which deliveries are due, found without scanning a backlog. Per endpoint origin the
 * queue keeps a hint of when it next has due work, takes origins in turn (leasing each one's due
 * deliveries in one statement: queue-leases.ts), and tells the sender when to look next.
 */
import { statement, type Queries } from '../store/contract.ts';
import { deliveryLeases } from './queue-leases.ts';
import { claimedOf, type Claimed } from './queue-rows.ts';

/** An origin's earliest delivery no one holds, its time named `column` (the refresh's reads are told apart by it). */
const earliestUnleased = <C extends string>(column: C) =>
  statement<Record<C, number | null>>(
    `SELECT MIN(d.next_attempt_at) AS ${column} FROM webhook_deliveries d INDEXED BY webhook_deliveries_due_by_origin
     WHERE d.origin = @origin AND d.next_attempt_at IS NOT NULL AND (d.lease_until IS NULL OR d.lease_until <= @now)`,
  );

/** Exported for the tests' query plans. */
export const dueStatements = {
  nextForOrigin: earliestUnleased('at'),
  // Per origin, its earliest live delivery's next attempt: one descent of the due index per origin
  // (each origin found as the least one past the last), not a pass over every due row: a GROUP BY
  // read the whole backlog each time, once a second in each process (on PostgreSQL 21 of its ~260 us
  // per delivery at full speed in scripts/bench/pg-nodes.ts, a backlog of up to 3,000; 2 after).
  liveOrigins: statement<{ origin: string; at: number }>(
    `WITH RECURSIVE o(origin) AS (
       SELECT MIN(origin) FROM webhook_deliveries WHERE next_attempt_at IS NOT NULL
       UNION ALL
       SELECT (SELECT MIN(d.origin) FROM webhook_deliveries d WHERE d.next_attempt_at IS NOT NULL AND d.origin > o.origin) FROM o WHERE o.origin IS NOT NULL)
     SELECT origin, (SELECT MIN(d.next_attempt_at) FROM webhook_deliveries d WHERE d.origin = o.origin AND d.next_attempt_at IS NOT NULL) AS at
     FROM o WHERE origin IS NOT NULL`,
  ),
  // Per origin, the earliest end of a lease held now (attempts in flight here or elsewhere, claimed
  // ahead, or leased at ingest and waiting: up to MAX_INGEST_AHEAD a process), one row per origin.
  leasedNow: statement<{ origin: string; until: number }>(
    `SELECT origin, MIN(lease_until) AS until FROM webhook_deliveries INDEXED BY webhook_deliveries_leased
     WHERE lease_until > @now AND next_attempt_at IS NOT NULL GROUP BY origin`,
  ),
  // The same read as nextForOrigin, for the once-a-second refresh.
  firstUnleased: earliestUnleased('unleased'),
};

export type DueHints = ReturnType<typeof createDueHints>;

/** The hints start empty: `refreshDue` (awaited at start) fills them from the store. */
export function createDueHints() {
  // Per origin, a lower bound of the earliest time it has a due, unleased, not-held delivery
  // (absent: nothing live). A hint, kept conservative (too early only costs one indexed query):
  // every place that sets next_attempt_at lowers it; a claim that finds nothing raises or drops it.
  const originDue = new Map<string, number>();
  /** How many times a due time was noted, any origin's (settleHint applies a look-up only if none was since). */
  let notes = 0;
  const noteDue = (origin: string, at: number): void => {
    notes++;
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
    async claimDue(
      tx: Queries,
      now: number,
      limit: number,
      roomOf: (origin: string) => number,
      owner: string,
      until: number | ((origin: string) => number),
      plan: {
        /** `n` rows of `origin` were claimed (called for each origin asked, 0 included). */
        took?: (origin: string, n: number) => void;
        /**
         * Whether a claim of `origin` that finds fewer than asked (a backlog claimed in bulk, all
         * taken) looks up its next due time at once. The hint is not set here: `settle` gets the
         * time found (null: nothing due) for the caller to apply once the claimed rows are in its
         * line (settleHint); until then ingest still stores the origin's deliveries due behind them.
         */
        settleShort?: (origin: string) => boolean;
        settle?: (origin: string, at: number | null, seen: number) => void;
      } = {},
    ): Promise<Claimed[]> {
      const origins = [...originDue.keys()];
      const out: Claimed[] = [];
      // Round-robin over origins (a different first one each time): every endpoint gets its turn.
      rotation = origins.length ? (rotation + 1) % origins.length : 0;
      for (let i = 0; i < origins.length && out.length < limit; i++) {
        const origin = origins[(rotation + i) % origins.length];
        if (originDue.get(origin)! > now) continue;
        const room = roomOf(origin);
        if (room <= 0) continue;
        const asked = Math.min(room, limit - out.length);
        const rows = await deliveryLeases.claimDue(tx, { group: origin, now, limit: asked, owner, until: typeof until === 'number' ? until : until(origin) });
        for (const r of rows) out.push(claimedOf(r)!);
        plan.took?.(origin, rows.length);
        if (rows.length === asked) continue;
        const settling = rows.length > 0;
        if (settling && !plan.settleShort?.(origin)) continue;
        const seen = notes; // before the look-up: a due time noted while it runs may be one it does not see
        const at = (await tx.get(dueStatements.nextForOrigin, { origin, now }))?.at ?? null;
        const next = at === null ? null : at > now ? at : now + 1; // leased or just claimed: look again next time
        if (settling) plan.settle?.(origin, next, seen);
        else if (next === null) originDue.delete(origin);
        else originDue.set(origin, next);
      }
      return out;
    },

    /**
     * A bulk claim's look-up of `origin`'s next due time (claimDue's plan.settle), applied once the
     * claimed rows are in the line, unless a due time was noted since the look-up began (`seen`,
     * the count of notes then): a retry recorded meanwhile may be one the look-up did not see, and
     * noteDue keeps only the earliest time, so an unchanged hint does not say nothing was noted
     * (a retry lost that way was found by store-faults.test.ts: in 3 of 30 runs an event never
     * arrived after a full disk).
     */
    settleHint(origin: string, at: number | null, seen: number): void {
      if (notes !== seen) return;
      if (at === null) originDue.delete(origin);
      else originDue.set(origin, at);
    },

    /**
     * Learn the origins other processes sharing the store have made due (their retries, the leases
     * of a process that died): the per-origin hint only sees this process's own writes.
     */
    async refreshDue(db: Queries, now = Date.now()): Promise<void> {
      const live = await db.all(dueStatements.liveOrigins);
      // An attempt in flight is no work due: where an origin's earliest delivery may be leased, its
      // hint is the earliest one no one holds, or the end of its earliest lease if sooner. Without
      // this, every look during an attempt made the sender claim (nothing) and read its origin again.
      const leaseEnds = new Map((live.length ? await db.all(dueStatements.leasedNow, { now }) : []).map((r) => [r.origin, Number(r.until)]));
      for (const r of live) {
        const at = Number(r.at);
        const leaseEnd = leaseEnds.get(r.origin);
        if (leaseEnd === undefined || at > now) {
          noteDue(r.origin, at);
          continue;
        }
        const unleased = (await db.get(dueStatements.firstUnleased, { origin: r.origin, now }))?.unleased;
        noteDue(r.origin, unleased == null ? leaseEnd : Math.min(Number(unleased), leaseEnd));
      }
    },

    /** A delivery of `origin` becomes due at `at` (a retry scheduled, a manual attempt that kept its schedule). */
    noteDue,

    /** Whether `origin` may have deliveries due by `now` in the store (as the hints know: early rather than late). */
    dueBy: (origin: string, now: number): boolean => (originDue.get(origin) ?? Infinity) <= now,

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
