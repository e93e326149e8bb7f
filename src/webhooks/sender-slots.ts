/**
 * The sender's slots: HTTP exchanges in flight, in all and per endpoint origin (a slot is held for
 * the exchange and nothing else), when a slot of each origin last freed and how long its exchanges
 * hold a slot: an origin that answers fast gets deliveries claimed ahead for it, the more the faster
 * (sender-ahead.ts).
 */
import type { WebhooksConfig } from './sender-leases.ts';

export interface Slots {
  /** Exchanges in flight, in all. */
  inFlight(): number;
  /** Exchanges in flight to `origin`. */
  taken(origin: string): number;
  /** This sender's slots for an origin: its share of the per-endpoint limit. */
  limitOf(origin: string, cfg: WebhooksConfig): number;
  acquire(origin: string): void;
  release(origin: string): void;
  /** An exchange with `origin` ended at `now` (its slot was released) after holding its slot `heldMs`. */
  freed(origin: string, now: number, heldMs: number): void;
  /** How long an exchange with `origin` held its slot, lately (a moving average, ms); undefined until one has ended. */
  holdMs(origin: string): number | undefined;
  /** Whether a slot of `origin` freed less than `windowMs` before `now`. */
  freedWithin(origin: string, now: number, windowMs: number): boolean;
  /** A number that changes whenever an exchange with `origin` starts or ends: unchanged while they stall. */
  activity(origin: string): number;
  /** Forgets the origins whose slots last freed `windowMs` or more before `now`. */
  forgetFreedBefore(now: number, windowMs: number): void;
  /**
   * The most exchanges with `origin` (undefined: in all) in flight at once lately: over this
   * PEAK_WINDOW_MS and the one before. What a process lends or gives back is what it has not
   * used for that long, so a share in steady use stays where it is.
   */
  peak(origin: string | undefined): number;
}

/** The window of `peak`: slots unused for one to two of these may be lent. */
export const PEAK_WINDOW_MS = 1_000;

/** The weight of the latest exchange in the moving average of how long one holds its slot. */
const HOLD_WEIGHT = 0.2;

/** `slotsFor` is this sender's share of an origin's per-endpoint limit (the serving processes share it); all of it without. */
export function createSlots(slotsFor?: (origin: string, limit: number) => number, clock: () => number = Date.now): Slots {
  const perOrigin = new Map<string, number>();
  let inflight = 0;
  /** When a slot of each origin last freed (an origin absent: not within the window). */
  const lastFreed = new Map<string, number>();
  /** Per origin, the moving average of how long an exchange held its slot. */
  const hold = new Map<string, number>();
  /**
   * Per origin with exchanges in flight, the number of the latest start or end among all origins'
   * (one count for all, so an origin's number never comes back after its entry went with its last exchange).
   */
  const activity = new Map<string, number>();
  let changes = 0;
  /** Per origin (and ALL), the most in flight at once in the current peak window and the one before. */
  const peaks = new Map<string, { window: number; cur: number; prev: number }>();
  const roll = (e: { window: number; cur: number; prev: number }, window: number) => {
    if (e.window === window) return;
    e.prev = e.window === window - 1 ? e.cur : 0;
    e.cur = 0;
    e.window = window;
  };
  const note = (key: string, value: number) => {
    const window = Math.floor(clock() / PEAK_WINDOW_MS);
    const e = peaks.get(key);
    if (!e) peaks.set(key, { window, cur: value, prev: 0 });
    else {
      roll(e, window);
      if (value > e.cur) e.cur = value;
    }
  };
  const within = (at: number | undefined, now: number, windowMs: number) => at !== undefined && now >= at && now - at < windowMs;
  return {
    inFlight: () => inflight,
    taken: (origin) => perOrigin.get(origin) ?? 0,
    limitOf: (origin, cfg) => (slotsFor ? slotsFor(origin, cfg.per_endpoint_concurrency) : cfg.per_endpoint_concurrency),
    acquire(origin) {
      activity.set(origin, ++changes);
      inflight++;
      const n = (perOrigin.get(origin) ?? 0) + 1;
      perOrigin.set(origin, n);
      note(origin, n);
      note(ALL, inflight);
    },
    release(origin) {
      inflight--;
      const n = (perOrigin.get(origin) ?? 1) - 1;
      if (n <= 0) {
        perOrigin.delete(origin);
        activity.delete(origin);
      } else {
        perOrigin.set(origin, n);
        activity.set(origin, ++changes);
      }
    },
    freed(origin, now, heldMs) {
      const average = hold.get(origin);
      hold.set(origin, average === undefined ? heldMs : average + HOLD_WEIGHT * (heldMs - average));
      lastFreed.set(origin, now);
    },
    holdMs: (origin) => hold.get(origin),
    // A clock that stepped back since is not taken for a recent free (nor kept forever: below).
    freedWithin: (origin, now, windowMs) => within(lastFreed.get(origin), now, windowMs),
    activity: (origin) => activity.get(origin) ?? 0,
    forgetFreedBefore(now, windowMs) {
      for (const [origin, at] of lastFreed)
        if (now - at >= windowMs || now < at) {
          lastFreed.delete(origin);
          hold.delete(origin);
        }
      const window = Math.floor(now / PEAK_WINDOW_MS);
      for (const [key, e] of peaks) if (e.window < window - 1 && !perOrigin.has(key)) peaks.delete(key);
    },
    peak(origin) {
      const key = origin ?? ALL;
      const e = peaks.get(key);
      const now = origin === undefined ? inflight : (perOrigin.get(origin) ?? 0);
      if (!e) return now;
      roll(e, Math.floor(clock() / PEAK_WINDOW_MS));
      return Math.max(e.cur, e.prev, now);
    },
  };
}

/** The key of exchanges in all among the origins' (no origin is empty). */
const ALL = '';
