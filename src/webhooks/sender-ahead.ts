/**
 * The sender's claim-ahead queue: deliveries leased to this sender and waiting here for a slot of
 * their origin, so the attempt that ends hands its slot to the next one in the same turn. They come
 * two ways:
 *
 * - claimed from the store's due rows (one to three slots' worth, while the origin answers fast:
 *   aheadWaiting); what waits longer than AHEAD_WAIT_MS (its origin's slots are held by slow or
 *   hanging attempts) is given back to the queue for the senders beside this one; or, for a
 *   backlog stored due at an origin that keeps pace, a line's worth at once (bulkRoom), which
 *   then waits as the ones leased at ingest do;
 * - leased at their ingest, beyond the origin's free slots (reserveAtIngest), as many as its slots
 *   send in INGEST_AHEAD_MS at the pace they keep (ingestAhead), at most MAX_INGEST_AHEAD and
 *   MAX_INGEST_AHEAD_CHARS of bodies in all, and only while no delivery of the origin is due in
 *   the store (they would overtake it): each is then written once, leased, and never claimed by a
 *   second UPDATE (on PostgreSQL that claim was about 40 % of the store's time per delivery:
 *   docs/benchmarks.md). One waits while its origin's exchanges keep starting and ending, at most
 *   MAX_INGEST_WAIT_MS (then the other processes' slots may take it); when they stall (hang) it is
 *   given back like a claimed one.
 *   Its lease (ingestLeaseMs) outlasts that wait many times over, so it is never renewed: a process
 *   that dies holding some gives them back through the supervisor at once, a node that dies
 *   holds them for one lease, as it holds its attempts in flight.
 */
import { LOCK_BUSY, type Database, type Tx } from '../store/contract.ts';
import type { Claimed, Queue } from './queue.ts';
import { AHEAD_WAIT_MS, aheadLeaseMs, leaseMs, type WebhooksConfig } from './sender-leases.ts';
import type { Slots } from './sender-slots.ts';

/** A delivery claimed ahead: its lease's end, since when it waits here, and whether it was leased at its ingest. */
export interface Ahead {
  c: Claimed;
  until: number;
  since: number;
  atIngest?: boolean;
  /** Claimed from a backlog stored due, to fill its origin's line as ingest would have (see bulkRoom): it waits like one leased at ingest. */
  bulk?: boolean;
}

export interface AheadQueue {
  /** Deliveries claimed from the store waiting here (not those leased at ingest: they never take room from claims). */
  count(): number;
  /** Deliveries waiting here for `origin`, or about to (reserved at an ingest not committed yet). */
  waitingFor(origin: string): number;
  /** Deliveries waiting here, or about to, in all. */
  waitingAll(): number;
  /**
   * Room for a delivery of `origin` (its body `chars` characters long) to be leased at its ingest and wait
   * here: taken when there is (true). Each reservation ends in endReservation().
   */
  reserveAtIngest(origin: string, chars: number, now: number): boolean;
  /** An ingest's reservation ends: its delivery joins the queue (`a`, once committed), or not (rolled back, stored held). */
  endReservation(origin: string, chars: number, a?: Ahead): void;
  /** A delivery waiting here leaves the queue (a manual attempt takes it): its lease is the caller's to give back, or it is put back (add, at the head). */
  take(id: string): Ahead | undefined;
  /** Deliveries join their origins' lines, at the end (or at the head, in their order: put back). */
  add(claimed: Ahead[], atHead?: boolean): void;
  /** Whether a claim may find something (the queue's hints say an origin with room has due work). */
  worthClaiming(now: number): boolean;
  /**
   * Lease as many due deliveries as there is room for, in the caller's transaction (one statement
   * per origin with due work; those another sender took meanwhile are left out). The caller hands
   * them to add() once it commits.
   */
  claimDue(tx: Tx, now: number): Promise<Ahead[]>;
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
  /**
   * Whether a delivery leased at its ingest may still go when its slot frees (its installation
   * active and pointing to its URL, as this process knows it); one that may not is given back
   * (held, cancelled or moved in the store by then). All may by default.
   */
  sendable?: (c: Claimed) => boolean;
  /** A give-back ended (committed or not): this sender looks for due work again. */
  wake?: () => void;
  /**
   * Deliveries wait here for slots of `origin` this sender does not hold (`all`: its slots in all
   * are taken): the processes beside it may lend theirs (slot-loans.ts).
   */
  short?: (origin: string, all: boolean) => void;
}

/** At most this many slots' worth wait here for a fast origin's slots. */
const MAX_AHEAD_PER_SLOT = 3;

/** At most this many deliveries, and characters of their bodies (64 Mi: about 64 MiB of JSON), wait in one process leased at ingest. */
export const MAX_INGEST_AHEAD = 10_000;
export const MAX_INGEST_AHEAD_CHARS = 64 * 1024 * 1024;
/** An origin's pace (how long its exchanges hold a slot) is forgotten this long after its last exchange. */
const PACE_MEMORY_MS = 60_000;
/** Until an origin's pace is known, its exchanges are taken to hold a slot this long (a line longer than a slower endpoint sends in time is given back at MAX_INGEST_WAIT_MS). */
export const ASSUMED_HOLD_MS = 50;
/** Looks (one every AHEAD_WAIT_MS while something waits) that find an origin's exchanges neither starting nor ending before they count as stalled, at least. */
const STALL_LOOKS = 5;
/**
 * Deliveries leased at ingest for an origin: as many as this process's slots of it send in this
 * long at their pace. Longer lines would let more of a burst skip its claim, but a delivery in
 * one process's line cannot be sent by another process's free slots of the same endpoint: this is
 * also the most such an imbalance can cost it.
 */
export const INGEST_AHEAD_MS = 1_000;
/** A delivery leased at ingest waits for a slot at most this long, then goes back to the store, for any process's slots. */
export const MAX_INGEST_WAIT_MS = 2 * INGEST_AHEAD_MS;

/**
 * The lease of a delivery leased at its ingest: a whole lease for its attempt (leaseMs) after its
 * wait for a slot, which is bounded by MAX_INGEST_WAIT_MS (taken twice over), or the attempt
 * time-out if longer, as a claimed one's (40 s by default). drainOrigin leaves one whose lease
 * could end during its attempt.
 */
export function ingestLeaseMs(cfg: WebhooksConfig): number {
  return leaseMs(cfg) + Math.max(cfg.timeout, 2 * MAX_INGEST_WAIT_MS);
}

/**
 * How many deliveries may wait here, leased at ingest, for an origin with `limit` slots whose
 * exchanges hold a slot `holdMs` lately: as many as its slots send in INGEST_AHEAD_MS, at most
 * MAX_INGEST_AHEAD; until its pace is known, as if an exchange took ASSUMED_HOLD_MS.
 */
export function ingestAhead(limit: number, holdMs: number | undefined): number {
  return Math.min(MAX_INGEST_AHEAD, Math.floor((limit * INGEST_AHEAD_MS) / Math.max(holdMs ?? ASSUMED_HOLD_MS, 0.01)));
}

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

/** Leased at its ingest or claimed in bulk: it waits up to MAX_INGEST_WAIT_MS, counts in the ingest line's bounds, and is checked before it is sent. */
const waitsLong = (a: Ahead): boolean => Boolean(a.atIngest || a.bulk);

export function createAheadQueue(deps: AheadDeps): AheadQueue {
  const { queue, database, clock, owner, slots } = deps;
  /** Per origin, oldest first. */
  const ahead = new Map<string, Ahead[]>();
  /** Waiting here in all, and of those the ones leased at ingest (with their bodies' characters). */
  let aheadCount = 0;
  let ingestCount = 0;
  let ingestChars = 0;
  /** Reserved at ingests not committed yet: per origin, in all, and their bodies' characters. */
  const reserved = new Map<string, number>();
  let reservedCount = 0;
  let reservedChars = 0;
  let staleTimer: NodeJS.Timeout | undefined;
  /** The usual length of a body waiting here (a moving average), to size a bulk claim before its bodies are read. */
  let bodyChars = 1024;
  /**
   * A bulk claim's look-ups of its origins' next due times (queue.settleHint), applied when its
   * deliveries join their lines (add): before then a new delivery of the origin must still be
   * stored due behind them, not leased and sent ahead of them. A claim rolled back never gets here.
   */
  const settlesOf = new WeakMap<Ahead[], Array<{ origin: string; at: number | null; seen: number }>>();

  const waitingFor = (origin: string): number => (ahead.get(origin)?.length ?? 0) + (reserved.get(origin) ?? 0);

  /**
   * Per origin whose line is watched, its slots' activity (sender-slots.ts) at the last look
   * (giveBackStale, every AHEAD_WAIT_MS while something waits) and how many looks in a row found
   * it unchanged with exchanges in flight. Counted in looks, not time: between two looks the event
   * loop has read what arrived, so a loop held up (a long collection, a loaded machine) is never
   * taken for an endpoint that stopped answering.
   */
  const watch = new Map<string, { activity: number; idleLooks: number }>();

  /** A claim's transaction is open (claimDue), and whether another was asked for meanwhile. */
  let claimOpen = false;
  let claimSkipped = false;
  /** Origins with a give-back in flight (how many), claimed for by nobody here until it ends. */
  const givingBack = new Map<string, number>();
  /**
   * Whether the origin's exchanges have stalled: some in flight, and none started or ended over
   * STALL_LOOKS looks, or as many as four exchanges at its usual pace take, if more. Nothing is
   * leased at ingest for it then, and what waits for it goes back to the store.
   */
  function stalled(origin: string): boolean {
    const w = watch.get(origin);
    if (!w || slots.taken(origin) === 0 || w.activity !== slots.activity(origin)) return false;
    return w.idleLooks >= Math.max(STALL_LOOKS, Math.ceil((4 * (slots.holdMs(origin) ?? ASSUMED_HOLD_MS)) / AHEAD_WAIT_MS));
  }

  /** A look at the watched origins' activity (those with a line, and those found stalled). */
  function look(): void {
    for (const origin of new Set([...ahead.keys(), ...watch.keys()])) {
      const activity = slots.activity(origin);
      const w = watch.get(origin);
      if (w && w.activity === activity && slots.taken(origin) > 0) w.idleLooks++;
      else if (ahead.has(origin)) watch.set(origin, { activity, idleLooks: 0 });
      else watch.delete(origin); // moving again, and nothing waits for it
    }
  }

  /** One leaves the queue (`a`, no longer in its origin's list). */
  function left(a: Ahead): void {
    aheadCount--;
    if (waitsLong(a)) {
      ingestCount--;
      ingestChars -= a.c.body.length;
    }
  }

  /** Room for more claims: in all (twice the sender's concurrency less what is taken), per origin, and per origin for a claim in bulk. */
  function roomAt(now: number): { room: number; perOriginRoom: (origin: string) => number; bulkRoom: (origin: string) => number } {
    const cfg = deps.config();
    const room = 2 * cfg.concurrency - slots.inFlight() - (aheadCount - ingestCount);
    // Per origin its free slots, plus what may wait here while the origin answers fast (a slot
    // freed within AHEAD_WAIT_MS): see aheadWaiting.
    const perOriginRoom = (origin: string) => {
      // Its line is on its way back to the store, still leased: a claim now would take what was
      // stored due behind it first (seen on PostgreSQL, where the give-back is a round trip).
      if (givingBack.has(origin)) return 0;
      const limit = slots.limitOf(origin, cfg);
      const waiting = slots.freedWithin(origin, now, AHEAD_WAIT_MS) ? aheadWaiting(limit, slots.holdMs(origin)) : 0;
      return limit + waiting - slots.taken(origin) - waitingFor(origin);
    };
    /**
     * A backlog stored due (a burst beyond the origin's line at ingest, or its line given back):
     * while the origin keeps pace, its line here is filled from the store as ingest would have
     * filled it (ingestAhead, within MAX_INGEST_AHEAD), in one claim once it is at most half full.
     * Without this a burst that once overflowed its line went on through claims of a few slots'
     * worth (aheadWaiting), as many as the slots freed, for the rest of the burst: ingest stores an
     * origin's deliveries due while older ones are due, and those never ran out (on PostgreSQL
     * about 20 % fewer deliveries a second, scripts/bench/pg-nodes.ts). The claimed ones wait
     * as the ones leased at ingest do, with their lease (ingestLeaseMs).
     */
    const bulkRoom = (origin: string) => {
      if (givingBack.has(origin) || !slots.freedWithin(origin, now, AHEAD_WAIT_MS) || stalled(origin)) return 0;
      if (ingestChars + reservedChars >= MAX_INGEST_AHEAD_CHARS / 2) return 0;
      const line = ingestAhead(slots.limitOf(origin, cfg), slots.holdMs(origin));
      const free = Math.min(line - waitingFor(origin), MAX_INGEST_AHEAD - ingestCount - reservedCount);
      return free >= line / 2 ? free : 0;
    };
    return { room, perOriginRoom, bulkRoom };
  }

  /** Deliveries join their origins' lines: at the end, or (put back after a failed give-back) at the head, in their order. */
  function add(claimed: Ahead[], atHead = false): void {
    if (atHead) for (const [origin, list] of Map.groupBy(claimed, (a) => a.c.origin)) ahead.set(origin, [...list, ...(ahead.get(origin) ?? [])]);
    else
      for (const a of claimed) {
        const list = ahead.get(a.c.origin);
        if (list) list.push(a);
        else ahead.set(a.c.origin, [a]);
      }
    for (const a of claimed) {
      aheadCount++;
      if (waitsLong(a)) {
        ingestCount++;
        ingestChars += a.c.body.length;
        bodyChars += (Math.max(a.c.body.length, 1) - bodyChars) / 16;
      }
    }
    for (const { origin, at, seen } of settlesOf.get(claimed) ?? []) queue.settleHint(origin, at, seen);
    armStale();
  }

  /** While something waits here, look for what waited too long every AHEAD_WAIT_MS. */
  function armStale(): void {
    if (aheadCount && !staleTimer && !deps.stopped()) {
      staleTimer = setTimeout(giveBackStale, AHEAD_WAIT_MS);
      staleTimer.unref();
    }
  }

  /** Takes out of the queue the deliveries `out` picks (their leases are the caller's). */
  function takeWhere(out: (a: Ahead) => boolean): Ahead[] {
    const taken: Ahead[] = [];
    for (const [origin, list] of ahead) {
      if (!list.some(out)) continue;
      const keep = list.filter((a) => !out(a));
      for (const a of list) if (out(a)) taken.push(a);
      if (keep.length) ahead.set(origin, keep);
      else ahead.delete(origin);
    }
    for (const a of taken) left(a);
    return taken;
  }

  /** Deliveries taken out of the queue go back to the store, due at once; if that fails, they wait here for the next try. */
  async function giveBack(out: Ahead[], now: number): Promise<void> {
    if (!out.length) return;
    const origins = new Set(out.map((a) => a.c.origin));
    // Out of the line already: an ingest meanwhile must not take a slot or a place before them,
    // nor a claim (roomAt) until they are due in the store.
    for (const origin of origins) {
      queue.noteDue(origin, now);
      givingBack.set(origin, (givingBack.get(origin) ?? 0) + 1);
    }
    let given: unknown;
    try {
      given = await database.transactionUnlessBusy((tx) =>
        queue.giveBack(
          tx,
          out.map((a) => a.c),
          owner,
          now,
        ),
      );
    } catch (e) {
      deps.health?.failed(e);
    } finally {
      for (const origin of origins) {
        const n = givingBack.get(origin)! - 1;
        if (n) givingBack.set(origin, n);
        else givingBack.delete(origin);
      }
    }
    if (given === undefined || given === LOCK_BUSY)
      add(
        out.map((a) => ({ ...a, since: now - MAX_INGEST_WAIT_MS })),
        true,
      ); // again next time
    else deps.gaveBack?.();
    deps.wake?.();
  }

  /**
   * Deliveries that waited here too long go back to the queue, and the senders beside this one
   * are told: one with a free slot sends them. An origin's whole line goes back once its first
   * one waited too long (what waits behind it would otherwise overtake it): a claimed one after
   * AHEAD_WAIT_MS (its origin's slots are taken by slow or hanging attempts), one leased at ingest
   * once its origin's exchanges stall (see stalled), or after MAX_INGEST_WAIT_MS however they
   * move. Until a slot of that origin frees, this sender claims no more ahead. An origin's pace
   * is forgotten PACE_MEMORY_MS after its last exchange.
   */
  async function giveBackStale(): Promise<void> {
    staleTimer = undefined;
    const now = clock();
    slots.forgetFreedBefore(now, PACE_MEMORY_MS);
    look();
    const stuck = new Set<string>();
    for (const [origin, [first]] of ahead) {
      const waited = now - first.since;
      if (!waitsLong(first)) {
        if (waited >= AHEAD_WAIT_MS) stuck.add(origin);
      } else if (waited >= MAX_INGEST_WAIT_MS || stalled(origin)) stuck.add(origin);
    }
    if (stuck.size)
      await giveBack(
        takeWhere((a) => stuck.has(a.c.origin)),
        now,
      );
    armStale();
  }

  function drainOrigin(origin: string): void {
    const list = ahead.get(origin);
    if (!list) return;
    const cfg = deps.config();
    const now = clock();
    const limit = slots.limitOf(origin, cfg);
    const unsendable: Ahead[] = [];
    while (list.length && !deps.stopped() && slots.inFlight() < cfg.concurrency && slots.taken(origin) < limit) {
      const a = list.shift()!;
      left(a);
      // Leased at its ingest (or claimed in bulk: it may wait as long), and its installation was
      // paused, removed or pointed elsewhere since (here or in another process). Not asked of one
      // claimed a few slots' worth ahead: the store had it due moments ago, and a process whose
      // view of the installations lags would give it back and claim it again.
      if (waitsLong(a) && deps.sendable && !deps.sendable(a.c)) {
        unsendable.push(a);
        continue;
      }
      // Held here past the point where its lease could run out mid-attempt (only a stalled event
      // loop does that): leave it; the lease runs out and the delivery is due again then.
      if (a.until - now < leaseMs(cfg)) {
        queue.noteDue(origin, a.until);
        continue;
      }
      slots.acquire(origin);
      deps.start(a.c);
    }
    if (!list.length && ahead.get(origin) === list) ahead.delete(origin);
    else if (list.length && !deps.stopped()) deps.short?.(origin, slots.inFlight() >= cfg.concurrency);
    void giveBack(unsendable, now);
  }

  return {
    count: () => aheadCount - ingestCount,
    waitingFor,
    waitingAll: () => aheadCount + reservedCount,
    reserveAtIngest(origin, chars, now) {
      if (deps.stopped() || ingestCount + reservedCount >= MAX_INGEST_AHEAD || ingestChars + reservedChars + chars > MAX_INGEST_AHEAD_CHARS) return false;
      if (stalled(origin)) return false;
      if (waitingFor(origin) >= ingestAhead(slots.limitOf(origin, deps.config()), slots.holdMs(origin))) {
        deps.short?.(origin, false); // its line is as long as its slots here send in a second
        return false;
      }
      reserved.set(origin, (reserved.get(origin) ?? 0) + 1);
      reservedCount++;
      reservedChars += chars;
      return true;
    },
    endReservation(origin, chars, a) {
      const n = (reserved.get(origin) ?? 1) - 1;
      if (n <= 0) reserved.delete(origin);
      else reserved.set(origin, n);
      reservedCount--;
      reservedChars -= chars;
      if (a) add([{ ...a, atIngest: true }]);
    },
    take: (id) => takeWhere((a) => a.c.id === id)[0],
    worthClaiming(now) {
      const { room, perOriginRoom, bulkRoom } = roomAt(now);
      return queue.mayHaveDue(now, (origin) => Math.max(room > 0 ? perOriginRoom(origin) : 0, bulkRoom(origin)));
    },
    async claimDue(tx, now) {
      // One claim at a time until its transaction ends: two at once (the scheduler's and a record
      // turn's, on PostgreSQL) each take the next due row, and the one committed first is sent
      // first, out of order. One asked meanwhile claims nothing, and the scheduler looks again after.
      if (claimOpen) {
        claimSkipped = true;
        return [];
      }
      const { room, perOriginRoom, bulkRoom } = roomAt(now);
      let bulkLeft = MAX_INGEST_AHEAD - ingestCount - reservedCount;
      if (room <= 0 && bulkLeft <= 0) return [];
      claimOpen = true;
      const ended = () => {
        claimOpen = false;
        if (claimSkipped) {
          claimSkipped = false;
          deps.wake?.();
        }
      };
      tx.afterCommit(ended);
      tx.onRollback(ended);
      // Per origin a bulk claim's room (its line filled), or a claim of a few slots' worth within
      // the sender's room for those (`room`). What each origin took is taken off what is left:
      // the sender's room, or the bulk allowance (MAX_INGEST_AHEAD, and the characters left below
      // half of MAX_INGEST_AHEAD_CHARS at the bodies' usual length: their lengths are not known
      // before the claim).
      const bulk = new Set<string>();
      let normalLeft = Math.max(room, 0);
      let charsLeft = MAX_INGEST_AHEAD_CHARS / 2 - ingestChars - reservedChars;
      const roomOf = (origin: string) => {
        const b = Math.min(bulkRoom(origin), bulkLeft, Math.floor(charsLeft / bodyChars));
        const n = Math.min(perOriginRoom(origin), normalLeft);
        if (b > n) {
          bulk.add(origin);
          return b;
        }
        bulk.delete(origin);
        return n;
      };
      const settles: Array<{ origin: string; at: number | null; seen: number }> = [];
      const cfg = deps.config();
      const untilOf = (origin: string) => now + (bulk.has(origin) ? ingestLeaseMs(cfg) : aheadLeaseMs(cfg));
      const claimed = await queue.claimDue(tx, now, Math.max(room, 0) + Math.max(bulkLeft, 0), roomOf, owner, untilOf, {
        took(origin, n) {
          if (!bulk.has(origin)) normalLeft -= n;
          else {
            bulkLeft -= n;
            charsLeft -= n * bodyChars;
          }
        },
        settleShort: (origin) => bulk.has(origin),
        settle: (origin, at, seen) => settles.push({ origin, at, seen }),
      });
      const out = claimed.map((c) =>
        bulk.has(c.origin) ? { c, until: untilOf(c.origin), since: now, bulk: true } : { c, until: untilOf(c.origin), since: now },
      );
      if (settles.length) settlesOf.set(out, settles);
      return out;
    },
    add,
    drainOrigin,
    drainAll() {
      for (const origin of [...ahead.keys()]) drainOrigin(origin);
    },
    takeAll() {
      if (staleTimer) clearTimeout(staleTimer);
      watch.clear();
      const waiting = [...ahead.values()].flat().map((a) => a.c);
      ahead.clear();
      aheadCount = ingestCount = ingestChars = 0;
      return waiting;
    },
  };
}
