/**
 * A manual attempt (a retry the person asked for): one attempt now, outside the schedule, whatever
 * the delivery's state, sent where the installation points today.
 */
import type { Database } from '../store/contract.ts';
import type { AttemptRecord, Queue } from './queue.ts';
import type { Attempts } from './sender-attempts.ts';
import { leaseMs, type WebhooksConfig } from './sender-leases.ts';
import type { Slots } from './sender-slots.ts';
import type { AheadQueue } from './sender-ahead.ts';

/** Resolves with the recorded attempt, or 'busy' when the delivery cannot be claimed (not found, cancelled, or in flight). */
export type AttemptNow = (id: string) => Promise<AttemptRecord | 'busy'>;

export interface ManualDeps {
  queue: Queue;
  database: Database;
  config: () => WebhooksConfig;
  clock: () => number;
  /** This sender's lease owner. */
  owner: string;
  /** The installation's current URL (a fixed URL takes effect on retry). */
  currentUrl?: (d: { eventType: string; installationId: string }) => string | undefined;
  slots: Slots;
  ahead: Pick<AheadQueue, 'take' | 'add'>;
  attempts: Pick<Attempts, 'start'>;
}

export function manualAttempts(deps: ManualDeps): AttemptNow {
  const { queue, database, clock, owner, slots, attempts } = deps;
  return async (id) => {
    const now = clock();
    // Waiting here for a slot: its lease is this sender's; given back, then taken as any other (put
    // back in its line if that fails, so it is not left leased with nothing to send it).
    const waiting = deps.ahead.take(id);
    if (waiting)
      await queue.giveBack(database, [waiting.c], owner, now).catch((e: unknown) => {
        deps.ahead.add([waiting], true);
        throw e;
      });
    const claimed = await queue.claimById(database, id, owner, now, now + leaseMs(deps.config()));
    if (!claimed) return 'busy';
    const current = deps.currentUrl?.(claimed);
    if (current && current !== claimed.url) {
      await queue.setUrl(database, claimed.seq, current);
      claimed.url = current;
    }
    slots.acquire(claimed.origin);
    const record = await attempts.start(claimed, true);
    if (!record) throw new Error('the attempt could not be recorded (is the server shutting down?)');
    return record;
  };
}
