/**
 * Leases: a worker takes a due delivery by setting its lease (owner and expiry) in one statement,
 * so an attempt is owned by exactly one worker; an expired lease makes the delivery due again.
 * Claims run in the caller's transaction, which a group commit may find the write lock busy for.
 */
import type { Db } from '../store/index.ts';
import { LOCK_BUSY, lockPatience } from '../store/patience.ts';
import { claimedOf, type Claimed } from './queue-rows.ts';
import { sqlFor } from '../store/postgres/db.ts';

export function createLeases(db: Db) {
  const q = {
    claim: db.prepare<{ seq: number; owner: string; now: number; until: number }, any>(
      `UPDATE webhook_deliveries SET lease_until = @until, lease_owner = @owner
       WHERE seq = @seq AND next_attempt_at IS NOT NULL AND next_attempt_at <= @now AND (lease_until IS NULL OR lease_until <= @now)
       RETURNING seq, id, url, origin, body, event_id, installation_id, event_type, status, attempts, next_attempt_at, created_at`,
    ),
    // On PostgreSQL (several nodes on one queue) the rows are locked FOR UPDATE SKIP LOCKED: a
    // delivery another node is claiming this instant is left to it, never waited for.
    claimMany: db.prepare<{ seqs: string; owner: string; now: number; until: number }, any>(
      sqlFor(db, {
        sqlite: `UPDATE webhook_deliveries SET lease_until = @until, lease_owner = @owner
       WHERE seq IN (SELECT value FROM json_each(@seqs)) AND next_attempt_at IS NOT NULL AND next_attempt_at <= @now
         AND (lease_until IS NULL OR lease_until <= @now)
       RETURNING seq, id, url, origin, body, event_id, installation_id, event_type, status, attempts, next_attempt_at, created_at`,
        postgres: `UPDATE webhook_deliveries SET lease_until = @until, lease_owner = @owner
       WHERE seq IN (SELECT seq FROM webhook_deliveries
         WHERE seq IN (SELECT value::bigint FROM json_array_elements_text(CAST(@seqs AS json))) AND next_attempt_at IS NOT NULL
           AND next_attempt_at <= @now AND (lease_until IS NULL OR lease_until <= @now)
         FOR UPDATE SKIP LOCKED)
       RETURNING seq, id, url, origin, body, event_id, installation_id, event_type, status, attempts, next_attempt_at, created_at`,
      }),
    ),
    // The owner check leaves alone a lease that ran out and was taken by another worker since.
    giveBack: db.prepare<{ seqs: string; owner: string; now: number }, any>(
      sqlFor(db, {
        sqlite: `UPDATE webhook_deliveries SET lease_until = NULL, lease_owner = NULL, updated_at = @now
       WHERE seq IN (SELECT value FROM json_each(@seqs)) AND lease_owner = @owner`,
        postgres: `UPDATE webhook_deliveries SET lease_until = NULL, lease_owner = NULL, updated_at = @now
       WHERE seq IN (SELECT value::bigint FROM json_array_elements_text(CAST(@seqs AS json))) AND lease_owner = @owner`,
      }),
    ),
    claimById: db.prepare<{ id: string; owner: string; now: number; until: number }, any>(
      `UPDATE webhook_deliveries SET lease_until = @until, lease_owner = @owner
       WHERE id = @id AND status != 'cancelled' AND (lease_until IS NULL OR lease_until <= @now)
       RETURNING seq, id, url, origin, body, event_id, installation_id, event_type, status, attempts, next_attempt_at, created_at`,
    ),
  };
  const inTransaction = db.transaction((fn: () => unknown) => fn());
  const patience = lockPatience(db);

  return {
    /** Take the lease of a due delivery; undefined when another worker has it or it is no longer due. */
    claim(seq: number, owner: string, now: number, until: number): Claimed | undefined {
      return claimedOf(q.claim.get({ seq, owner, now, until }));
    },

    /** Run `fn` in one transaction (a savepoint when already inside one). */
    atomically<T>(fn: () => T): T {
      return inTransaction(fn) as T;
    },

    /**
     * As atomically, but LOCK_BUSY (nothing done) when another process holds the write lock, until
     * it has refused for a few ms (store/patience.ts): a group commit tries again next turn.
     */
    atomicallyUnlessBusy<T>(fn: () => T): T | typeof LOCK_BUSY {
      return patience.run(() => inTransaction(fn) as T);
    },

    /** Take the leases of several due deliveries in one statement (in the order given); those no longer due or leased are left out. */
    claimMany(seqs: number[], owner: string, now: number, until: number): Claimed[] {
      const rows = q.claimMany.all({ seqs: JSON.stringify(seqs), owner, now, until }).map((r) => claimedOf(r)!);
      const order = new Map(seqs.map((s, i) => [s, i]));
      return rows.sort((a, b) => order.get(a.seq)! - order.get(b.seq)!);
    },

    /** Give back leases never used (deliveries claimed ahead, not sent): due again at once for any worker. */
    giveBack(seqs: number[], owner: string, now: number): number {
      return q.giveBack.run({ seqs: JSON.stringify(seqs), owner, now }).changes;
    },

    /** Take the lease of any delivery by id (manual attempt), whatever its schedule. */
    claimById(id: string, owner: string, now: number, until: number): Claimed | undefined {
      return claimedOf(q.claimById.get({ id, owner, now, until }));
    },
  };
}
