/**
 * The sender's claim-ahead queue: deliveries leased to this sender and waiting here for a slot of
 * their origin (one to three slots' worth, while it answers fast: aheadWaiting), so the
 * attempt that ends hands its slot to the next one in the same turn. What waits longer than
 * AHEAD_WAIT_MS (its origin's slots are held by slow or hanging attempts) is given back to the
 * queue for the senders beside this one.
 */
import { LOCK_BUSY, type Database, type Queries } from '../store/contract.ts';
import type { Claimed, Queue } from './queue.ts';
import { AHEAD_WAIT_MS, aheadLeaseMs, leaseMs, type WebhooksConfig } from './sender-leases.ts';
import type { Slots } from './sender-slots.ts';

/** A delivery claimed ahead: its lease's end, and since when it waits here. */
export interface Ahead {
  c: Claimed;
  until: number;
  since: number;
}

export interface AheadQueue {
  /** Deliveries waiting here, in all. */
  count(): number;
  /** Deliveries waiting here for `origin`. */
  waitingFor(origin: string): number;
  /** Whether a claim may find something (the queue's hints say an origin with room has due work). */
  worthClaiming(now: number): boolean;
  /**
   * Lease as many due deliveries as there is room for, in the caller's transaction (one statement
   * per origin with due work; those another sender took meanwhile are left out). The caller hands
   * them to add() once it commits.
   */
  claimDue(tx: Queries, now: number): Promise<Ahead[]>;
  /** Deliveries claimed (and committed) join the queue. */
  add(claimed: Ahead[]): void;
  /** Start what waits for `origin` while it has free slots (and the sender has room in all). */
  drainOrigin(origin: string): void;
  drainAll(): void;
  /** Stop: everything waiting leaves the queue (its deliveries, for their leases to be given back). */
  takeAll(): Array<{ seq: number; origin: string }>;
}

export interface AheadDeps {
  queue: Queue;
  database: Database;
  config: () => WebhooksConfig;
  clock: () => number;
  /** This sender's lease owner. */
  owner: string;
  slots: Slots;
  /** Start the attempt of a delivery whose slot was just taken. */
  start(c: Claimed): void;
  stopped(): boolean;
  health?: { failed(error: unknown): void };
  /** Deliveries were given back to the queue: other senders sharing it may take them now. */
  gaveBack?: () => void;
}

/** At most this many slots' worth wait here for a fast origin's slots. */
const MAX_AHEAD_PER_SLOT = 3;

/**
 * How many deliveries may wait here for a fast origin's `limit` slots, when an exchange with it
 * holds a slot `holdMs` lately: one slot's worth, and more the faster it answers, as many as its
 * slots send in a quarter of AHEAD_WAIT_MS (limit x that / holdMs), at most MAX_AHEAD_PER_SLOT
 * slots' worth. What waits is sent well before it would be given back, and a fast origin's claims
 * come in fewer, larger statements (one endpoint at the default settings: claims of one or two
 * rows at each record before). The hold time, not the time between frees: slots started together
 * free together, and gaps of 0 ms would read as a pace the origin does not have.
 */
export function aheadWaiting(limit: number, holdMs: number | undefined): number {
  if (holdMs === undefined) return limit;
  const drained = Math.floor((limit * AHEAD_WAIT_MS) / 4 / Math.max(holdMs, 0.01));
  return Math.min(MAX_AHEAD_PER_SLOT * limit, Math.max(limit, drained));
}

export function createAheadQueue(deps: AheadDeps): AheadQueue {
  const { queue, database, clock, owner, slots } = deps;
  /** Per origin, oldest first. */
  const ahead = new Map<string, Ahead[]>();
  let aheadCount = 0;
  let staleTimer: NodeJS.Timeout | undefined;

  const waitingFor = (origin: string): number => ahead.get(origin)?.length ?? 0;

  /** Room for more: in all (twice the sender's concurrency less what is taken), and per origin. */
  function roomAt(now: number): { room: number; perOriginRoom: (origin: string) => number } {
    const cfg = deps.config();
    const room = 2 * cfg.concurrency - slots.inFlight() - aheadCount;
    // Per origin its free slots, plus what may wait here while the origin answers fast (a slot
    // freed within AHEAD_WAIT_MS): see aheadWaiting.
    const perOriginRoom = (origin: string) => {
      const limit = slots.limitOf(origin, cfg);
      const waiting = slots.freedWithin(origin, now, AHEAD_WAIT_MS) ? aheadWaiting(limit, slots.holdMs(origin)) : 0;
      return limit + waiting - slots.taken(origin) - waitingFor(origin);
    };
    return { room, perOriginRoom };
  }

  function add(claimed: Ahead[]): void {
    for (const a of claimed) {
      const list = ahead.get(a.c.origin);
      if (list) list.push(a);
      else ahead.set(a.c.origin, [a]);
      aheadCount++;
    }
    if (aheadCount && !staleTimer && !deps.stopped()) {
      staleTimer = setTimeout(giveBackStale, AHEAD_WAIT_MS);
      staleTimer.unref();
    }
  }

  /**
   * Deliveries that waited here longer than AHEAD_WAIT_MS (their origin's slots are taken by slow
   * or hanging attempts) go back to the queue, and the senders beside this one are told: one with
   * a free slot sends them. Until a slot of that origin frees, this sender claims no more ahead.
   */
  async function giveBackStale(): Promise<void> {
    staleTimer = undefined;
    const now = clock();
    slots.forgetFreedBefore(now, AHEAD_WAIT_MS);
    const stale: Ahead[] = [];
    for (const [origin, list] of ahead) {
      const keep = list.filter((a) => now - a.since < AHEAD_WAIT_MS);
      if (keep.length === list.length) continue;
      stale.push(...list.filter((a) => now - a.since >= AHEAD_WAIT_MS));
      if (keep.length) ahead.set(origin, keep);
      else ahead.delete(origin);
    }
    if (stale.length) {
      aheadCount -= stale.length;
      let given: unknown;
      try {
        given = await database.transactionUnlessBusy((tx) =>
          queue.giveBack(
            tx,
            stale.map((a) => a.c),
            owner,
            now,
          ),
        );
      } catch (e) {
        deps.health?.failed(e);
      }
      if (given === undefined || given === LOCK_BUSY)
        add(stale.map((a) => ({ ...a, since: now - AHEAD_WAIT_MS }))); // again next time
      else deps.gaveBack?.();
    }
    if (aheadCount && !staleTimer && !deps.stopped()) {
      staleTimer = setTimeout(giveBackStale, AHEAD_WAIT_MS);
      staleTimer.unref();
    }
  }

  function drainOrigin(origin: string): void {
    const list = ahead.get(origin);
    if (!list) return;
    const cfg = deps.config();
    const now = clock();
    const limit = slots.limitOf(origin, cfg);
    while (list.length && !deps.stopped() && slots.inFlight() < cfg.concurrency && slots.taken(origin) < limit) {
      const a = list.shift()!;
      aheadCount--;
      // Held here past the point where its lease could run out mid-attempt (only a stalled event
      // loop does that): leave it; the lease runs out and the delivery is due again then.
      if (a.until - now < leaseMs(cfg)) {
        queue.noteDue(origin, a.until);
        continue;
      }
      slots.acquire(origin);
      deps.start(a.c);
    }
    if (!list.length) ahead.delete(origin);
  }

  return {
    count: () => aheadCount,
    waitingFor,
    worthClaiming(now) {
      const { room, perOriginRoom } = roomAt(now);
      return room > 0 && queue.mayHaveDue(now, perOriginRoom);
    },
    async claimDue(tx, now) {
      const { room, perOriginRoom } = roomAt(now);
      if (room <= 0) return [];
      const until = now + aheadLeaseMs(deps.config());
      return (await queue.claimDue(tx, now, room, perOriginRoom, owner, until)).map((c) => ({ c, until, since: now }));
    },
    add,
    drainOrigin,
    drainAll() {
      for (const origin of [...ahead.keys()]) drainOrigin(origin);
    },
    takeAll() {
      if (staleTimer) clearTimeout(staleTimer);
      const waiting = [...ahead.values()].flat().map((a) => a.c);
      ahead.clear();
      aheadCount = 0;
      return waiting;
    },
  };
}
