/**
 * The delivery concurrency of serving processes beside each other (process/serving.ts): the
 * `concurrency` setting is the service's, each of N processes taking its share, and an origin's
 * `per_endpoint_concurrency` is shared the same way (the sender's slotsFor).
 */
import type { WebhooksConfig } from './sender-leases.ts';

/** Which of how many serving processes this one is. */
export interface ProcessShare {
  index: number;
  count: number;
}

/**
 * One serving process's share of the delivery concurrency: of N processes, process `index` takes
 * its part of `concurrency` (the remainder to the first ones), so the shares add up to the setting
 * exactly. The per-endpoint limit is shared per origin by the sender (slotsFor).
 */
export function shareOf(cfg: WebhooksConfig, processes: number, index: number): WebhooksConfig {
  return { ...cfg, concurrency: partOf(cfg.concurrency, processes, index) };
}

/** Process `index`'s part of `total` split over `count` processes, the remainder going to the first ones. */
function partOf(total: number, count: number, index: number): number {
  return Math.floor(total / count) + (index < total % count ? 1 : 0);
}

/**
 * One process's slots for an origin when `limit` slots are shared by `count` processes: each origin
 * starts at a process of its own (a hash of the origin), so with a limit under the process count
 * the origins still spread over every process, and the parts add up to the limit exactly (with
 * `per_endpoint_concurrency: 1` one process sends to that origin, and none other at the same time).
 */
export function slotsFor(origin: string, limit: number, share: ProcessShare): number {
  let h = 2166136261;
  for (let i = 0; i < origin.length; i++) h = Math.imul(h ^ origin.charCodeAt(i), 16777619);
  const first = (h >>> 0) % share.count;
  return partOf(limit, share.count, (share.index - first + share.count) % share.count);
}

/**
 * The config read at each use (it may be reloaded), with this process's share of the concurrency
 * and what it holds beyond it (`held`: slots lent to it, below 0 lent by it; slot-loans.ts), worked
 * out once per config and holding.
 */
export function sharedConfig(config: () => WebhooksConfig, share: ProcessShare | undefined, held?: () => number): () => WebhooksConfig {
  let shared: [WebhooksConfig, number, WebhooksConfig] | undefined;
  return () => {
    const c = config();
    if (!share) return c;
    const extra = held?.() ?? 0;
    if (shared?.[0] !== c || shared[1] !== extra) {
      const own = shareOf(c, share.count, share.index);
      shared = [c, extra, extra ? { ...own, concurrency: Math.max(0, own.concurrency + extra) } : own];
    }
    return shared[2];
  };
}
