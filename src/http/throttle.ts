/**
 * Failed authentication per client address (the socket's peer, not X-Forwarded-For, which anyone
 * can send). After `max` wrong tokens within `windowMs`, the address is refused with 429 and a
 * Retry-After until its window ends, before any token is compared: guessing a token, the admin
 * token in particular when config.yaml sets a short one, costs a window per `max` guesses. The
 * management API's bearer tokens and the console login share it. Memory stays bounded.
 */
import { SwitchyardError } from '../errors.ts';

export interface AuthThrottle {
  /** Throws a 429 SwitchyardError while `address` is blocked. */
  check(address: string): void;
  /** Count a failed attempt; true when this one started a block (log it once). */
  fail(address: string): boolean;
}

const MAX_TRACKED = 10_000;

export function createAuthThrottle(opts: { max?: number; windowMs?: number; now?: () => number } = {}): AuthThrottle {
  const max = opts.max ?? 10;
  const windowMs = opts.windowMs ?? 60_000;
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
          // Still full: forget the oldest entries (insertion order) rather than grow.
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

/** The client's address as the server socket saw it. */
export function clientAddress(req: Request): string {
  return (req as { ip?: string }).ip ?? 'unknown';
}
