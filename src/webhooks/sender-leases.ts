/**
 * The sender's config, and the leases it takes from it: a delivery's lease must outlive its
 * attempt, and one claimed ahead (sender-ahead.ts) its wait for a slot as well.
 */
import type { Config } from '../config/index.ts';

export type WebhooksConfig = Config['webhooks'];

/**
 * How long a delivery claimed ahead may wait for a slot of its origin before it is given back to
 * the queue for another sender (a process beside this one whose slots are free); and how recently
 * a slot of the origin must have freed for more to be claimed ahead. An endpoint that answers in
 * milliseconds frees a slot every few ms; one whose attempts hang gets nothing claimed ahead.
 */
export const AHEAD_WAIT_MS = 50;

/** A lease must outlive the attempt's time-out, or a slow attempt could be taken twice. */
export function leaseMs(cfg: WebhooksConfig): number {
  return Math.max(cfg.lease, cfg.timeout + 5_000);
}

/**
 * The lease of a delivery claimed ahead: it may wait for a slot for as long as the attempts ahead
 * of it take (each ends within `timeout`), then needs a whole lease for its own attempt.
 */
export function aheadLeaseMs(cfg: WebhooksConfig): number {
  return leaseMs(cfg) + cfg.timeout;
}
