/**
 * Leases of webhook deliveries: the store's leased queue (store/leased-queue.ts) over the
 * webhook_deliveries table. A sender takes due deliveries by setting their lease (owner and expiry)
 * in one statement, so an attempt is owned by exactly one sender; an expired lease makes the
 * delivery due again. Due deliveries are taken per endpoint origin (queue-due.ts decides which).
 */
import { leasedQueue } from '../store/leased-queue.ts';
import { claimedOf, type Claimed } from './queue-rows.ts';
import type { Queries } from '../store/contract.ts';

export const deliveryLeases = leasedQueue<Record<string, unknown>>({
  table: 'webhook_deliveries',
  seq: 'seq',
  nextAt: 'next_attempt_at',
  leaseOwner: 'lease_owner',
  leaseUntil: 'lease_until',
  updatedAt: 'updated_at',
  id: 'id',
  // A manual attempt takes any delivery but a cancelled one, whatever its schedule.
  byIdWhen: "status != 'cancelled'",
  group: 'origin',
  // Ties (a resume makes a whole backlog due at the same ms) come in seq order: event order.
  dueIndex: 'webhook_deliveries_due_by_origin',
  returning: 'seq, id, url, origin, body, event_id, installation_id, event_type, status, attempts, next_attempt_at, created_at',
});

export const leases = {
  /** Take the leases of several due deliveries in one statement (in the order given); those no longer due or leased are left out. */
  async claimMany(q: Queries, seqs: number[], owner: string, now: number, until: number): Promise<Claimed[]> {
    return (await deliveryLeases.claim(q, seqs, { now, owner, until })).map((r) => claimedOf(r)!);
  },

  /** Give back leases never used (deliveries claimed ahead, not sent): due again at once for any sender. Returns their origins as stored now. */
  async giveBack(q: Queries, seqs: number[], owner: string, now: number): Promise<string[]> {
    return (await deliveryLeases.giveBack(q, seqs, owner, now)).map((r) => r.group!);
  },

  /** Take the lease of any delivery by id (manual attempt), whatever its schedule. */
  async claimById(q: Queries, id: string, owner: string, now: number, until: number): Promise<Claimed | undefined> {
    return claimedOf(await deliveryLeases.claimById(q, id, { now, owner, until }));
  },
};
