/**
 * Failed admin-token guesses per client address (see clientAddress). After `max` wrong tokens within
 * `windowMs`, the address is refused with 429 and a Retry-After until its window ends, before the
 * admin token is compared: guessing it, when config.yaml sets a short one, costs a window per `max`
 * guesses. Installation and invocation tokens are checked before the throttle and never refused by
 * it (they cannot be guessed), so integrations calling the API from the server's own address keep
 * working while a guesser is blocked. The API and the console login share it. Memory stays bounded.
 */
import { SwitchyardError } from '../errors.ts';
import { canonicalIP } from '../net/address.ts';

export interface AuthThrottle {
  /** Throws a 429 SwitchyardError while `address` is blocked. */
  check(address: string): void;
  /** Count a failed attempt; true when this one started a block (log it once). */
  fail(address: string): boolean;
}

const MAX_TRACKED = 10_000;
/** Wrong admin tokens one address may send per window, across all serving processes. */
export const AUTH_FAILURES_ALLOWED = 10;
const AUTH_WINDOW_MS = 60_000;

/**
 * One serving process's share of the budget when `processes` serve together, each counting only
 * the guesses it sees: 10 / N wrong tokens a minute rounded down, so that together they never
 * allow more than 10 (rounding up gave 12 with 3 or 4 processes, and N with more than 10). Past 10
 * processes each allows one per N/10 minutes: the rate stays 10 a minute, though a guesser's very
 * first burst can reach N.
 */
export function authThrottleShare(processes: number): { max: number; windowMs: number } {
  const n = Math.max(1, Math.floor(processes));
  const max = Math.max(1, Math.floor(AUTH_FAILURES_ALLOWED / n));
  return { max, windowMs: Math.round(AUTH_WINDOW_MS * Math.max(1, (max * n) / AUTH_FAILURES_ALLOWED)) };
}

export function createAuthThrottle(opts: { max?: number; windowMs?: number; now?: () => number } = {}): AuthThrottle {
  const max = opts.max ?? AUTH_FAILURES_ALLOWED;
  const windowMs = opts.windowMs ?? AUTH_WINDOW_MS;
  const now = opts.now ?? Date.now;
  const seen = new Map<string, { failures: number; resetAt: number }>();

  const live = (address: string) => {
    const e = seen.get(address);
    if (e && e.resetAt <= now()) {
      seen.delete(address);
      return undefined;
    }
    return e;
  };

  return {
    check(address) {
      const e = live(address);
      if (!e || e.failures < max) return;
      const retryAfter = Math.max(1, Math.ceil((e.resetAt - now()) / 1000));
      throw new SwitchyardError('too_many_requests', `too many failed authentication attempts from ${address}; try again in ${retryAfter} s`, {
        hint: 'check the token: admin_token in config.yaml, or <data_dir>/admin-token',
        headers: { 'retry-after': String(retryAfter) },
      });
    },
    fail(address) {
      let e = live(address);
      if (!e) {
        if (seen.size >= MAX_TRACKED) {
          const t = now();
          for (const [k, v] of seen) if (v.resetAt <= t) seen.delete(k);
          // Still full: forget addresses that are not blocked first (oldest first), so a flood of
          // new addresses cannot push a blocked one out.
          for (const [k, v] of seen) {
            if (seen.size < MAX_TRACKED) break;
            if (v.failures < max) seen.delete(k);
          }
          for (const k of seen.keys()) {
            if (seen.size < MAX_TRACKED) break;
            seen.delete(k);
          }
        }
        e = { failures: 0, resetAt: now() + windowMs };
        seen.set(address, e);
      }
      e.failures++;
      return e.failures === max;
    },
  };
}

/**
 * The client's address: the socket's peer, or behind `trustedProxies` reverse proxies the
 * X-Forwarded-For entry that many hops from the right. Each proxy appends the address it heard from,
 * so the rightmost entries are the trusted proxies' words and everything to their left is whatever
 * the client sent (Express's `trust proxy` counts the same way); with fewer entries than proxies the
 * leftmost is taken. IPv6 addresses count by their /64, the block one subscriber usually holds, so a
 * client cannot rotate through its own addresses.
 */
export function clientAddress(req: Request, trustedProxies = 0): string {
  let address = (req as { ip?: string }).ip ?? 'unknown';
  if (trustedProxies > 0) {
    const entries =
      req.headers
        .get('x-forwarded-for')
        ?.split(',')
        .map((e) => e.trim())
        .filter(Boolean) ?? [];
    if (entries.length) address = entries[Math.max(0, entries.length - trustedProxies)];
  }
  let key = keys.get(address);
  if (key === undefined) {
    const canonical = canonicalIP(address);
    key = canonical === undefined ? address : canonical.includes(':') ? `${canonical.split(':').slice(0, 4).join(':')}::/64` : canonical;
    // Asked on every request, by few addresses: each one's key made once (the map emptied when it fills).
    if (keys.size >= 4096) keys.clear();
    keys.set(address, key);
  }
  return key;
}
const keys = new Map<string, string>();
