/**
 * Slots lent between serving processes, a serving process's side (the supervisor's:
 * process/slot-loans.ts). Each process holds a share of the delivery concurrency and of each
 * endpoint's per_endpoint_concurrency (concurrency-share.ts). A share held statically cost a node
 * with two processes its speed whenever its work landed in one of them: a producer's keep-alive
 * connection is accepted by one process, whose deliveries then had half the endpoint's slots
 * while the other half idled (docs/benchmarks.md). Now a process with deliveries waiting for
 * slots it does not hold asks for more ("wants" a pool), and each process beside it lends what it
 * neither uses nor has deliveries waiting for.
 *
 * Never more than the limit: a lender takes the slots off its own share before it says so, a
 * borrower adds them only when the supervisor hands them on, and a process asks what its slot
 * holds before it delivers anything (a replacement starts short of what the process it replaces
 * lent; what that one borrowed went back when it exited).
 * Grants that arrive before that answer are in it already, and are left out.
 */

import { processLoopBusy } from '../lib/loop-busy.ts';

/** What the link to the supervisor carries for loans (process/serving.ts). */
export interface LoansLink {
  /**
   * Ask what this process's slot holds beyond (above 0) or short of (below) its share, per pool;
   * `fn` is called with the answer as it arrives (in the same turn as the messages after it).
   */
  held(fn: (held: Record<string, number>, waitMs?: number) => void): void;
  want(pool: string): void;
  lent(pool: string, n: number): void;
  /** `n` slots of `pool` borrowed earlier go back to the processes that lent them. */
  returned(pool: string, n: number): void;
  onAsk(fn: (pool: string) => void): void;
  onGrant(fn: (pool: string, n: number) => void): void;
}

export interface SlotLoans {
  /** The slots of `pool` this process holds beyond its share (below 0: lent). */
  held(pool: string): number;
  /**
   * Deliveries wait here for more of `pool` than this process holds: ask the others (at most once
   * per WANT_EVERY_MS a pool). Never while its event loop is busy (lib/loop-busy.ts): more slots
   * would not send more, and what it cannot take goes to the others through the store. Measured:
   * borrowing for a process already at its CPU's limit left the other idle and the node slower
   * (pg-nodes, docs/benchmarks.md).
   */
  want(pool: string): void;
  /** The slots this process holds beyond its share now, over every pool (borrowed and not given back). */
  borrowed(): number;
  /** Give back the borrowed slots not used lately (every RETURN_EVERY_MS by itself). */
  giveBackUnused(): void;
  /**
   * Whether this process holds its share back: it replaces one that died with exchanges in
   * flight, which may still be running at their endpoints until the attempt time-out has passed
   * since (the supervisor's `waitMs`). Meanwhile it sends nothing and lends nothing: a replacement
   * that sent at once put 6 requests in flight at an endpoint limited to 4 (test/webhooks-slots.test.ts).
   */
  holdingBack(): boolean;
  /** No more asks answered nor slots given back (the service stops). */
  stop(): void;
}

/** A pool asked for at most this often: the processes beside answer within a turn of theirs. */
export const WANT_EVERY_MS = 50;
/**
 * How often a process looks for borrowed slots it has not used lately (sender-slots.ts's peak: for
 * one to two seconds) and gives them back: a burst's loans end with it, and the lender's own events
 * find its share again (a share lent for good sent a lender's next events through the store and
 * the claim: on PostgreSQL that turned the node's bursts into two UPDATEs a delivery).
 */
export const RETURN_EVERY_MS = 1_000;
/** The pools whose last ask is remembered (for WANT_EVERY_MS) at most; past it they are forgotten at once. */
const MAX_REMEMBERED_WANTS = 1_000;

/** The pool of `webhooks.concurrency`, the slots in all; every other pool is an endpoint origin's `per_endpoint_concurrency`. */
export const ALL = '*';

/**
 * Asks what this process's slot holds, then follows the supervisor's asks and grants. `spare`:
 * how many of a pool's slots this process neither uses nor has deliveries waiting for (lent when
 * asked); `granted`: slots of a pool came (deliveries waiting for them can start).
 */
export function createSlotLoans(
  link: LoansLink,
  deps: { spare(pool: string): number; granted(pool: string): void; clock?: () => number; busy?: () => boolean },
): Promise<SlotLoans> {
  const clock = deps.clock ?? Date.now;
  const busy = deps.busy ?? processLoopBusy;
  const holding = new Map<string, number>();
  const asked = new Map<string, number>();
  let ready = false;
  const add = (pool: string, n: number) => {
    const v = (holding.get(pool) ?? 0) + n;
    if (v === 0) holding.delete(pool);
    else holding.set(pool, v);
  };
  link.onGrant((pool, n) => {
    if (!ready) return; // in the answer to held() already
    add(pool, n);
    deps.granted(pool);
  });
  let stopped = false;
  let holdUntil = 0;
  const holdingBack = () => holdUntil > 0 && clock() < holdUntil;
  link.onAsk((pool) => {
    if (!ready || stopped || holdingBack()) return;
    const n = Math.floor(deps.spare(pool));
    if (!(n >= 1)) return;
    add(pool, -n); // off this process's share before anyone else may use them
    link.lent(pool, n);
  });
  const giveBackUnused = () => {
    if (!ready || stopped) return;
    for (const [pool, n] of holding) {
      if (n <= 0) continue;
      const back = Math.min(n, Math.floor(deps.spare(pool)));
      if (!(back >= 1)) continue;
      add(pool, -back); // off this process's holding before anyone else may use them
      link.returned(pool, back);
    }
  };
  const giveBack = setInterval(giveBackUnused, RETURN_EVERY_MS);
  giveBack.unref();
  const loans: SlotLoans = {
    held: (pool) => holding.get(pool) ?? 0,
    want(pool) {
      if (busy()) return;
      const now = clock();
      const last = asked.get(pool);
      if (last !== undefined && now >= last && now - last < WANT_EVERY_MS) return;
      if (asked.size >= MAX_REMEMBERED_WANTS) asked.clear();
      asked.set(pool, now);
      link.want(pool);
    },
    borrowed() {
      let n = 0;
      for (const v of holding.values()) if (v > 0) n += v;
      return n;
    },
    giveBackUnused,
    holdingBack,
    stop() {
      stopped = true;
      clearInterval(giveBack);
    },
  };
  return new Promise((resolve) =>
    link.held((held, waitMs) => {
      if (stopped) return;
      // Applied as it arrives: a grant right behind it in the same read is counted, not dropped.
      for (const [pool, n] of Object.entries(held)) if (Number.isInteger(n) && n !== 0) holding.set(pool, n);
      ready = true;
      if (typeof waitMs === 'number' && waitMs > 0) {
        holdUntil = clock() + waitMs;
        setTimeout(() => {
          if (!stopped) deps.granted(ALL); // its share is its own again: what waits may start
        }, waitMs).unref();
      }
      resolve(loans);
    }),
  );
}
