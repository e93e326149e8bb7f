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
import { batchStatement, parentsAndChildren, rowsTable, type BatchStatement, type ParentsAndChildren } from '../store/rows-insert.ts';
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

/** `dlv_` + a time-ordered id (see src/ids.ts). */
export const newDeliveryId = (now = Date.now()): string => timeOrderedId('dlv', now);

/** One delivery to enqueue. With `lease`, stored already claimed by that owner (unless its installation is paused: then held). */
export interface EnqueueInput {
  id?: string;
  eventId: string;
  eventType: string;
  installationId: string;
  url: string;
  body: string;
  now: number;
  lease?: { owner: string; until: number };
}

// A batch's deliveries in one INSERT (on SQLite in chunks, see store/rows-insert.ts; k: the place in the batch). A delivery of a
// paused installation is stored held, without its lease: the flag is read in the same statement
// (on PostgreSQL share-locked, so a pause by another node waits for this commit, then holds what it
// stored), not asked first in a statement of its own.
const COLUMNS = 'id, event_id, event_type, installation_id, url, origin, body, status, next_attempt_at, lease_until, lease_owner, created_at, updated_at';
const STORED = `j.id, j.event_id, j.event_type, j.installation_id, j.url, j.origin, j.body,
  CASE WHEN j.paused THEN 'held' ELSE 'pending' END, CASE WHEN j.paused THEN NULL ELSE j.now END,
  CASE WHEN j.paused THEN NULL ELSE j.lease_until END, CASE WHEN j.paused THEN NULL ELSE j.lease_owner END, j.now, j.now`;
/** A delivery as the INSERT takes it (k: its place in the batch). */
interface DeliveryRow {
  k: number;
  id: string;
  eventId: string;
  eventType: string;
  installationId: string;
  url: string;
  origin: string;
  body: string;
  leaseUntil: number | null;
  leaseOwner: string | null;
  now: number;
}
const INPUT = ['k', 'id', 'event_id', 'event_type', 'installation_id', 'url', 'origin', 'body', 'lease_until', 'lease_owner', 'now'];
/**
 * PostgreSQL: the deliveries' INSERT as the steps of a WITH (the last, `d`, returns seq, id and
 * status), reading the rows from the JSON array `@<param>`; with `under`, only the rows whose event
 * the WITH's step of that name returned (an INSERT of events: see enqueueUnder).
 */
function insertSteps(param: string, under?: string): string {
  return `i AS (
        SELECT k, v ->> 'id' AS id, v ->> 'eventId' AS event_id, v ->> 'eventType' AS event_type, v ->> 'installationId' AS installation_id,
          v ->> 'url' AS url, v ->> 'origin' AS origin, v ->> 'body' AS body,
          (v ->> 'leaseUntil')::bigint AS lease_until, v ->> 'leaseOwner' AS lease_owner, (v ->> 'now')::bigint AS now
        FROM jsonb_array_elements(CAST(@${param} AS jsonb)) WITH ORDINALITY AS x(v, k)${
          under
            ? `
        WHERE v ->> 'eventId' IN (SELECT id FROM ${under})`
            : ''
        }),
      p AS (SELECT installation_id, paused FROM webhook_endpoints WHERE installation_id IN (SELECT installation_id FROM i) FOR SHARE),
      j AS (SELECT i.*, COALESCE(p.paused = 1, false) AS paused FROM i LEFT JOIN p ON p.installation_id = i.installation_id),
      d AS (INSERT INTO webhook_deliveries (${COLUMNS})
        SELECT ${STORED} FROM j ORDER BY j.k
        ON CONFLICT (event_id, installation_id) DO NOTHING
        RETURNING seq, id, status)`;
}
const q = {
  // SQLite: multi-row VALUES (store/rows-insert.ts); PostgreSQL: one JSON array.
  insert: batchStatement<DeliveryRow, { seq: number; id: string; status: string }>({
    columns: INPUT,
    sqlite: (values) => `INSERT INTO webhook_deliveries (${COLUMNS})
      SELECT ${STORED}
      FROM (SELECT i.*, EXISTS (SELECT 1 FROM webhook_endpoints e WHERE e.installation_id = i.installation_id AND e.paused = 1) AS paused
            FROM ${rowsTable(INPUT, values)} AS i) AS j
      WHERE true ORDER BY j.k
      ON CONFLICT (event_id, installation_id) DO NOTHING
      RETURNING seq, id, status`,
    values: (r) => [r.k, r.id, r.eventId, r.eventType, r.installationId, r.url, r.origin, r.body, r.leaseUntil, r.leaseOwner, r.now],
    postgres: statement(`WITH ${insertSteps('items')} SELECT seq, id, status FROM d`),
    postgresParams: (rows) => ({ items: jsonRows(rows) }),
  }),
  setUrl: statement('UPDATE webhook_deliveries SET url = ?, origin = ? WHERE seq = ?'),
};

/** The events a batch's deliveries belong to, stored by the same call (enqueueUnder): their own module's INSERT. */
export interface EventsInsert<E> {
  /** The INSERT alone, returning the ids it stored (SQLite; or no delivery to store). */
  insert: BatchStatement<E, { id: string }>;
  /** PostgreSQL: the same INSERT as a step of a WITH (`INSERT ... RETURNING id`), reading its rows from `@events`. */
  postgresStep: string;
  /** The `@events` parameter of those rows. */
  postgresParam: (rows: readonly E[]) => string;
}

/** The statement storing events and their deliveries together, made once per events' INSERT. */
const unders = new WeakMap<EventsInsert<any>, ParentsAndChildren<any, DeliveryRow, { seq: number; id: string; status: string }>>();
function underEvents<E>(events: EventsInsert<E>): ParentsAndChildren<E, DeliveryRow, { seq: number; id: string; status: string }> {
  let u = unders.get(events);
  if (!u) {
    u = parentsAndChildren({
      parents: events.insert,
      children: q.insert,
      parentOf: (d: DeliveryRow) => d.eventId,
      postgres: statement(`WITH ev AS (${events.postgresStep}), ${insertSteps('deliveries', 'ev')}
        SELECT id AS parent_id, NULL::bigint AS seq, NULL::text AS id, NULL::text AS status FROM ev
        UNION ALL SELECT NULL, seq, id, status FROM d`),
      postgresParams: (eventRows: readonly E[], rows: readonly DeliveryRow[]) => ({ events: events.postgresParam(eventRows), deliveries: jsonRows(rows) }),
    });
    unders.set(events, u);
  }
  return u;
}

export type Queue = ReturnType<typeof createQueue>;

export function createQueue(database: Database, opts: { maxAttempts: () => number }) {
  const due = createDueHints();
  const { noteDue } = due;

  /** The rows the INSERT takes (k: the place in the batch). The caller may have made the ids already: the bodies name them (see body.ts). */
  const rowsOf = (inputs: readonly EnqueueInput[]): DeliveryRow[] =>
    inputs.map((input, k) => ({
      k,
      id: input.id ?? newDeliveryId(input.now),
      eventId: input.eventId,
      eventType: input.eventType,
      installationId: input.installationId,
      url: input.url,
      origin: originOf(input.url),
      body: input.body,
      leaseUntil: input.lease?.until ?? null,
      leaseOwner: input.lease?.owner ?? null,
      now: input.now,
    }));
  /** Each input's delivery as stored (null: not stored), from the rows the INSERT returned; one stored due is noted for the scheduler. */
  const claimedOf = (inputs: readonly EnqueueInput[], rows: readonly DeliveryRow[], returned: ReadonlyArray<{ seq: number; id: string; status: string }>) => {
    const stored = new Map(returned.map((r) => [r.id, r]));
    return rows.map((r, i): Claimed | null => {
      const row = stored.get(r.id);
      if (row === undefined) return null;
      const held = row.status === 'held';
      if (!inputs[i].lease && !held) noteDue(r.origin, r.now);
      return {
        seq: Number(row.seq),
        id: r.id,
        url: r.url,
        origin: r.origin,
        body: r.body,
        eventId: r.eventId,
        installationId: r.installationId,
        eventType: r.eventType,
        status: held ? 'held' : 'pending',
        attempts: 0,
        nextAttemptAt: held ? null : r.now,
        createdAt: r.now,
      };
    });
  };

  const queue = {
    /**
     * Enqueue deliveries in the caller's transaction, in one statement. Each is null when its event
     * already has one for its installation. One with a `lease` is stored already claimed by that
     * owner (its first attempt starts as soon as the transaction commits, without a claim of its
     * own). One of a paused installation is stored `held` (without its lease), with no
     * next attempt, and waits for releaseHeld: its status says so.
     */
    async enqueueMany(tx: Queries, inputs: EnqueueInput[]): Promise<Array<Claimed | null>> {
      if (!inputs.length) return [];
      const rows = rowsOf(inputs);
      return claimedOf(inputs, rows, await q.insert.all(tx, rows));
    },

    /**
     * enqueueMany for deliveries whose events are stored by the same call, with `events.insert`
     * (their module's): a delivery is stored only if its event was stored now (not a duplicate), in
     * one statement on PostgreSQL. The ids of the events stored, and each delivery as enqueueMany
     * answers (null as well when its event was not stored).
     */
    async enqueueUnder<E>(
      tx: Queries,
      events: EventsInsert<E>,
      eventRows: readonly E[],
      inputs: EnqueueInput[],
    ): Promise<{ stored: Set<string>; claimed: Array<Claimed | null> }> {
      const rows = rowsOf(inputs);
      const both = await underEvents(events).all(tx, eventRows, rows);
      return { stored: both.stored, claimed: claimedOf(inputs, rows, both.children) };
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
    /**
     * Give back leases never used (deliveries claimed ahead, not sent): due again at once for any
     * sender, this process's own too: the hint says so (a claim that found only these, leased, may
     * have dropped their origin's; with no other process to refresh it, nothing would claim them),
     * for the origin each is stored under now (a new URL may have moved it while it waited).
     * Returns how many were given back.
     */
    async giveBack(q: Queries, rows: ReadonlyArray<{ seq: number; origin: string }>, owner: string, now: number): Promise<number> {
      const origins = await leases.giveBack(
        q,
        rows.map((r) => r.seq),
        owner,
        now,
      );
      for (const o of new Set([...origins, ...rows.map((r) => r.origin)])) noteDue(o, now);
      return origins.length;
    },
    ...createHeldDeliveries(noteDue),
    ...createOutcomes({ noteDue }),
    ...createReplays(database, { noteDue }),
    ...createQueueReads(database, opts.maxAttempts),
  };
  return queue;
}
