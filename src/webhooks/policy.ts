/**
 * The retry policy, exactly as the spec states it (section 7 and 8), in one place:
 *   2xx success; 429, any 5xx and network errors retried; 3xx and every other 4xx fail at once;
 *   retry n (1..max_retries) waits base*2^(n-1) plus up to jitter*base*2^(n-1): 1.0-1.1 s,
 *   2.0-2.2 s, 4.0-4.4 s by default; so never more than max_retries + 1 attempts. A receiver's
 *   `Retry-After` changes that schedule only when `honor_retry_after` is set (off by default: the
 *   spec fixes the delays).
 */

/**
 * What an answer means for its delivery: `success` (delivered), `retry` (worth another attempt),
 * `failed` (another attempt cannot change it). The outcome recorded on an attempt is the same word
 * once the schedule has spoken: a `retry` answer with no retry left is recorded `failed`.
 */
export type Outcome = 'success' | 'retry' | 'failed';

/**
 * The outcome recorded on an attempt, one vocabulary for the store, the API, the CLI, the console
 * and /metrics: `success`; `retry` (it failed and scheduled the next automatic attempt, so its
 * nextAttemptAt is set); `failed` (it failed and nothing follows from it: a permanent answer, the
 * last automatic attempt of an exhausted delivery, or a manual attempt that did not succeed);
 * `interrupted` (the server stopped under it: outcome unknown, sent again).
 */
export const ATTEMPT_OUTCOMES = ['success', 'retry', 'failed', 'interrupted'] as const;
export type AttemptOutcome = (typeof ATTEMPT_OUTCOMES)[number];

export interface RetryConfig {
  max_retries: number;
  base_delay: number;
  jitter: number;
  retry_after_max: number;
  /** Let a `Retry-After` lengthen the wait (up to retry_after_max); absent or false: the spec's schedule alone. */
  honor_retry_after?: boolean;
}

/** Delay in ms before retry number `attempt` (1-based). */
export function retryDelay(attempt: number, cfg: Pick<RetryConfig, 'base_delay' | 'jitter'>, random: () => number = Math.random): number {
  if (!Number.isInteger(attempt) || attempt < 1) throw new RangeError(`retry number must be a whole number from 1, got ${attempt}`);
  const base = cfg.base_delay * 2 ** (attempt - 1);
  return base + cfg.jitter * base * random();
}

/** Errors that are decisions, not network trouble: retrying cannot change them. */
const permanentErrors = new Set(['EPRIVATEADDR', 'EINVALIDURL', 'ENOSECRET']);

/** What one attempt's result (an HTTP status) or error (with a `code`) means for the delivery. */
export function classifyOutcome(outcome: { status: number } | { code?: string } | Error): Outcome {
  if ('status' in outcome && typeof outcome.status === 'number') {
    const s = outcome.status;
    if (s >= 200 && s < 300) return 'success';
    if (s === 429 || s >= 500) return 'retry';
    return 'failed'; // 1xx/3xx (redirects are never followed), 400 and every other 4xx
  }
  const code = (outcome as { code?: string }).code;
  if (code && permanentErrors.has(code)) return 'failed';
  return 'retry'; // time-out, refused, reset, DNS, TLS...
}

/** Milliseconds a `Retry-After` header asks for (delta-seconds or an HTTP date), or undefined. */
export function parseRetryAfter(value: string | undefined, now = Date.now()): number | undefined {
  if (!value) return undefined;
  const v = value.trim();
  if (/^\d+$/.test(v)) return Number(v) * 1000;
  const date = Date.parse(v);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}

/**
 * When the next automatic attempt goes out after automatic attempt number `attemptsMade` ended in
 * `outcome`, or null when the delivery is finished. With `honor_retry_after`, a `Retry-After` can
 * lengthen the wait up to retry_after_max, never shorten it below the schedule; without it (the
 * default) it is ignored and the schedule is the spec's (section 8).
 */
export function nextAttemptDelay(
  attemptsMade: number,
  outcome: Outcome,
  cfg: RetryConfig,
  retryAfterMs?: number,
  random: () => number = Math.random,
): number | null {
  if (outcome !== 'retry' || attemptsMade > cfg.max_retries) return null;
  const scheduled = retryDelay(attemptsMade, cfg, random);
  if (retryAfterMs === undefined || !cfg.honor_retry_after) return scheduled;
  return Math.max(scheduled, Math.min(retryAfterMs, cfg.retry_after_max));
}
