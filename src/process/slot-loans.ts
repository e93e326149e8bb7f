/**
 * The supervisor's side of slots lent between serving processes (the serving side:
 * webhooks/slot-loans.ts). Each process holds a share of the delivery concurrency and of each
 * endpoint's per_endpoint_concurrency (webhooks/concurrency-share.ts); a process with deliveries
 * waiting for slots it does not have asks for more, the others lend what they are not using, and
 * the supervisor hands it on. A lender takes the slots off its own share before it says so, and a
 * borrower adds them only once told: the processes' slots never add up to more than the limit.
 *
 * The table is per slot (not per process) and per endpoint origin (`*`: the concurrency in all). A
 * process that exits gives back what it borrowed once its exchanges can no longer be running; what it lent
 * stays lent, and its replacement asks what its slot holds before it sends anything.
 */
import type { ToServing } from './messages.ts';
import { send, type Slot } from './slots.ts';

/** At most this many pools (an endpoint origin, or the concurrency in all) have slots on loan; no loan opens a new one past it. */
export const MAX_POOLS_ON_LOAN = 1_000;
/** The pools whose last asker is remembered at most (past it they are forgotten at once: a lend then goes back to its lender). */
const MAX_WANTING = 10_000;
/** The longest pool name taken (an origin is at most a scheme, a host of 253 characters and a port). */
const MAX_POOL_CHARS = 400;
/** The most slots one message may move (per_endpoint_concurrency and concurrency are at most 256 and 1,024). */
const MAX_SLOTS_MOVED = 1_024;

export interface SupervisorLoans {
  /** What slot `index`'s process holds beyond (above 0) or short of (below) its share, per pool on loan. */
  heldBy(index: number): Record<string, number>;
  /** Slot `from`'s process has work waiting for more of `pool`: the others are asked to lend. */
  want(from: Slot, pool: unknown): void;
  /** Slot `from`'s process lent `n` of `pool` (already off its share): they go to the process that asked last. */
  lent(from: Slot, pool: unknown, n: unknown): void;
  /** Slot `from`'s process gives back `n` of `pool` it borrowed (already off its holding): to the slots that lent them, the most owed first. */
  returned(from: Slot, pool: unknown, n: unknown): void;
  /**
   * Slot `slot`'s process is gone: what it borrowed goes back to the slots owed the most after
   * `holdMs` (its exchanges in flight at its death may still be running at the endpoint: given back
   * at once, a kill -9 put 6 requests in flight at an endpoint limited to 4), and meanwhile nobody
   * uses it; so a lender is short for that long, never for good. What it lent stays lent: its
   * borrowers may be using it.
   */
  exited(slot: Slot): void;
  /** Slots lent since the start, in all (for the tests). */
  moved(): number;
}

/**
 * `holdMs`: how long a dead process's borrowed slots stay out of use (the attempt time-out: its
 * exchanges may still be running at the endpoint, whose server has not noticed the client is gone).
 */
export function createSupervisorLoans(slots: readonly Slot[], holdMs: () => number = () => 0): SupervisorLoans {
  /** Per pool, per slot index, what its process holds beyond its share; each pool's entries add up to zero. */
  const table = new Map<string, number[]>();
  /** Per pool, the slot whose process asked last: lent slots go to it. */
  const wanting = new Map<string, number>();
  let moved = 0;
  const count = (n: unknown): n is number => Number.isInteger(n) && (n as number) >= 1 && (n as number) <= MAX_SLOTS_MOVED;
  const valid = (pool: unknown): pool is string => typeof pool === 'string' && pool.length > 0 && pool.length <= MAX_POOL_CHARS;
  const entry = (pool: string) => {
    let e = table.get(pool);
    if (!e) table.set(pool, (e = slots.map(() => 0)));
    return e;
  };
  const grant = (to: Slot, pool: string, n: number): void => send(to.serving, { t: 'slots-grant', pool, n } satisfies ToServing);

  /** `n` slots of `pool`, off the entry that held them already, go to the slots owed the most. */
  const toMostOwed = (pool: string, e: number[], n: number): void => {
    let left = n;
    for (const s of [...slots].sort((a, b) => e[a.index] - e[b.index])) {
      if (!left || e[s.index] >= 0) break;
      const k = Math.min(left, -e[s.index]);
      e[s.index] += k;
      left -= k;
      grant(s, pool, k);
    }
    if (e.every((x) => x === 0)) table.delete(pool);
  };

  return {
    heldBy(index) {
      const held: Record<string, number> = {};
      for (const [pool, e] of table) if (e[index]) held[pool] = e[index];
      return held;
    },
    want(from, pool) {
      if (!valid(pool) || (!table.has(pool) && table.size >= MAX_POOLS_ON_LOAN)) return;
      if (wanting.size >= MAX_WANTING && !wanting.has(pool)) wanting.clear();
      wanting.set(pool, from.index);
      for (const s of slots) if (s !== from && s.ready) send(s.serving, { t: 'slots-ask', pool });
    },
    lent(from, pool, n) {
      if (!valid(pool) || !count(n)) return;
      const to = slots[wanting.get(pool) ?? from.index];
      if (to === from) return grant(from, pool, n); // it asked too, meanwhile: its own back
      if (!table.has(pool) && table.size >= MAX_POOLS_ON_LOAN) return grant(from, pool, n);
      const e = entry(pool);
      e[from.index] -= n;
      e[to.index] += n;
      moved += n;
      // Sent to the process in that slot now; one that is going has its replacement take it (heldBy).
      grant(to, pool, n);
      if (e.every((x) => x === 0)) table.delete(pool);
    },
    returned(from, pool, n) {
      if (!valid(pool) || !count(n)) return;
      const e = table.get(pool);
      // More than the table says it borrowed (it cannot be, from this program): its own back.
      const back = Math.min(n, Math.max(0, e?.[from.index] ?? 0));
      if (back < n) grant(from, pool, n - back);
      if (!e || !back) return;
      e[from.index] -= back;
      toMostOwed(pool, e, back);
    },
    exited(slot) {
      for (const [pool, e] of table) {
        const n = e[slot.index];
        if (n <= 0) continue;
        // Off the slot now (its replacement starts with its own share), back to the lenders once the
        // dead process's exchanges can no longer be running at the endpoint.
        e[slot.index] = 0;
        setTimeout(() => toMostOwed(pool, entry(pool), n), holdMs()).unref();
      }
    },
    moved: () => moved,
  };
}
