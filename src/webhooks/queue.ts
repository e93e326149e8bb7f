/**
 * The delivery queue, in the store (SQLite or PostgreSQL): every state change of a delivery is one statement or one
 * transaction here, so a crash leaves each delivery either before or after a step, never between.
 * The sender (sender.ts) decides; the queue only records. It is built of stages, each in its own
 * file: scheduling (queue-due.ts), leases (queue-leases.ts, over the store's leased queue),
 * recording outcomes (queue-outcomes.ts), held deliveries and the installation's lifecycle
 * (queue-held.ts), replays (queue-replay.ts), and what the API, the live tail and retention read
 * (queue-reads.ts); enqueueing is here.
 */
import { timeOrderedId } from '../ids.ts';
import { statement, type Database, type Queries } from '../store/contract.ts';
import { jsonRows } from '../store/leased-queue.ts';
import { createDueHints } from './queue-due.ts';
import { createHeldDeliveries } from './queue-held.ts';
import { leases } from './queue-leases.ts';
import { createOutcomes } from './queue-outcomes.ts';
import { createQueueReads } from './queue-reads.ts';
import { createReplays } from './queue-replay.ts';
import { originOf, type Claimed } from './queue-rows.ts';

export { DELIVERY_STATUSES, type DeliveryStatus, type Delivery, type Attempt, type DeliveryDetail } from './views.ts';
export { originOf, originKey, MAX_ORIGIN_LENGTH, type Claimed, type AttemptRecord, type NextState } from './queue-rows.ts';
export type { DeliveryFilter, AttemptFeedItem } from './queue-reads.ts';
export type { ReplayFilter, ReplayRefusal } from './queue-replay.ts';
export { pausedAmong } from './queue-held.ts';

/** `dlv_` + a time-ordered id (see src/ids.ts). */
export const newDeliveryId = (now = Date.now()): string => timeOrderedId('dlv', now);

/** One delivery to enqueue. With `lease`, stored already claimed by that owner; with `held`, stored held. */
export interface EnqueueInput {
  id?: string;
  eventId: string;
  eventType: string;
  installationId: string;
  url: string;
  body: string;
  now: number;
  held?: boolean;
  lease?: { owner: string; until: number };
}

// A batch's deliveries in one INSERT, as one JSON array (k: the place in the batch).
const COLUMNS = 'id, event_id, event_type, installation_id, url, origin, body, status, next_attempt_at, lease_until, lease_owner, created_at, updated_at';
const q = {
  insert: statement<{ seq: number; id: string }>({
    sqlite: `INSERT INTO webhook_deliveries (${COLUMNS})
      SELECT value ->> 'id', value ->> 'eventId', value ->> 'eventType', value ->> 'installationId', value ->> 'url', value ->> 'origin', value ->> 'body',
        value ->> 'status', value ->> 'next', value ->> 'leaseUntil', value ->> 'leaseOwner', value ->> 'now', value ->> 'now'
      FROM json_each(@items) WHERE true ORDER BY key
      ON CONFLICT (event_id, installation_id) DO NOTHING
      RETURNING seq, id`,
    postgres: `INSERT INTO webhook_deliveries (${COLUMNS})
      SELECT v ->> 'id', v ->> 'eventId', v ->> 'eventType', v ->> 'installationId', v ->> 'url', v ->> 'origin', v ->> 'body',
        v ->> 'status', (v ->> 'next')::bigint, (v ->> 'leaseUntil')::bigint, v ->> 'leaseOwner', (v ->> 'now')::bigint, (v ->> 'now')::bigint
      FROM json_array_elements(CAST(@items AS json)) WITH ORDINALITY AS j(v, k) ORDER BY k
      ON CONFLICT (event_id, installation_id) DO NOTHING
      RETURNING seq, id`,
  }),
  setUrl: statement('UPDATE webhook_deliveries SET url = ?, origin = ? WHERE seq = ?'),
};

export type Queue = ReturnType<typeof createQueue>;

export function createQueue(database: Database, opts: { maxAttempts: () => number }) {
  const due = createDueHints();
  const { noteDue } = due;

  const queue = {
    /**
     * Enqueue deliveries in the caller's transaction, in one statement. Each is null when its event
     * already has one for its installation. One with a `lease` is stored already claimed by that
     * owner (its first attempt starts as soon as the transaction commits, without a claim of its
     * own). One `held` (its installation is paused) is stored `held`, with no next attempt, and
     * waits for releaseHeld.
     */
    async enqueueMany(tx: Queries, inputs: EnqueueInput[]): Promise<Array<Claimed | null>> {
      if (!inputs.length) return [];
      const rows = inputs.map((input) => {
        // The caller may have made the id already: the body names it (see body.ts).
        const held = input.held === true && !input.lease;
        return {
          id: input.id ?? newDeliveryId(input.now),
          eventId: input.eventId,
          eventType: input.eventType,
          installationId: input.installationId,
          url: input.url,
          origin: originOf(input.url),
          body: input.body,
          status: held ? 'held' : 'pending',
          next: held ? null : input.now,
          leaseUntil: input.lease?.until ?? null,
          leaseOwner: input.lease?.owner ?? null,
          now: input.now,
          held,
        };
      });
      const stored = new Map((await tx.all(q.insert, { items: jsonRows(rows) })).map((r) => [r.id, Number(r.seq)]));
      return rows.map((r, i): Claimed | null => {
        const seq = stored.get(r.id);
        if (seq === undefined) return null;
        if (!inputs[i].lease && !r.held) noteDue(r.origin, r.now);
        return {
          seq,
          id: r.id,
          url: r.url,
          origin: r.origin,
          body: r.body,
          eventId: r.eventId,
          installationId: r.installationId,
          eventType: r.eventType,
          status: r.held ? 'held' : 'pending',
          attempts: 0,
          nextAttemptAt: r.next,
          createdAt: r.now,
        };
      });
    },

    /** Enqueue one delivery (see enqueueMany). */
    async enqueue(tx: Queries, input: EnqueueInput): Promise<Claimed | null> {
      return (await queue.enqueueMany(tx, [input]))[0];
    },

    async setUrl(q2: Queries, seq: number, url: string): Promise<void> {
      await q2.run(q.setUrl, [url, originOf(url), seq]);
      noteDue(originOf(url), 0);
    },

    ...due,
    ...leases,
    ...createHeldDeliveries(noteDue),
    ...createOutcomes({ noteDue }),
    ...createReplays(database, { noteDue }),
    ...createQueueReads(database, opts.maxAttempts),
  };
  return queue;
}
