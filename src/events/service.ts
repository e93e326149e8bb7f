/**
 * Event ingest: validate, store, and in the same transaction enqueue one webhook delivery per
 * subscribed installation and one handler run per installation whose integration handles the
 * event; only then acknowledge. A repeated eventId is recognised and not enqueued again. The
 * queues start their work when the transaction commits (store hooks registered by their enqueue:
 * first attempts at once), without the caller waiting for them.
 * A batch (a JSON array on the same route) is validated item by item and its valid events are
 * stored together in one transaction (see ingestBatch).
 */
import { SwitchyardError, type Problem } from '../errors.ts';
import { MAX_JSON_DEPTH, nestedDeeperThan } from '../lib/json-depth.ts';
import { batchPerTurn } from '../lib/batch.ts';
import type { Logger } from '../log/index.ts';
import { storageCode } from '../store/health.ts';
import { LOCK_BUSY, statement, type Database, type Statement, type Tx } from '../store/contract.ts';
import { jsonRows } from '../store/leased-queue.ts';
import { batchStatement } from '../store/rows-insert.ts';
import type { Deliveries, Subscription } from '../webhooks/index.ts';
import type { EventsInsert } from '../webhooks/queue.ts';
import type { HandlerQueue } from './handlers.ts';
import { MAX_BATCH_EVENTS, newEventId, validateEventPayload } from './types.ts';

export interface StoredEvent {
  eventId: string;
  type: string;
  installationId: string | null;
  receivedAt: string;
  deliveryCount: number;
}

export interface IngestResult {
  eventId: string;
  type: string;
  duplicate: boolean;
  deliveries: Array<{ id: string; installationId: string }>;
  /** One handler run per installation whose integration handles the event (see `switchyard events handlers`). */
  handlers: Array<{ id: string; installationId: string }>;
}

/** One item of a batch's answer, in the order of the request. */
export type BatchItemResult =
  | ({ index: number; status: 202 | 200 } & IngestResult)
  | { index: number; status: 400 | 413; error: ReturnType<SwitchyardError['toJSON']>['error'] };

export interface BatchResult {
  /** Events stored by this batch (new eventIds), duplicates (eventIds seen before, or earlier in the batch), and items refused. */
  stored: number;
  duplicates: number;
  rejected: number;
  results: BatchItemResult[];
}

export interface EventsDeps {
  database: Database;
  log: Logger;
  /** Who is subscribed to each event type, and the queue their deliveries go to (without either, none are enqueued). */
  subscriptions?: { forEventType(type: string): Subscription[]; fresh?(): Promise<void> };
  deliveries?: Deliveries;
  handlerRuns?: HandlerQueue;
  now?: () => number;
}

interface Row {
  seq: number;
  id: string;
  type: string;
  installation_id: string | null;
  payload: string;
  received_at: number;
  delivery_count: number;
}

const view = (r: Row): StoredEvent => ({
  eventId: r.id,
  type: r.type,
  installationId: r.installation_id,
  receivedAt: new Date(r.received_at).toISOString(),
  deliveryCount: r.delivery_count,
});

export type Events = ReturnType<typeof createEvents>;

/** Most events stored in one group commit (a batch request is never split: it may make it larger). */
const MAX_BATCH = 256;

type Event = Record<string, unknown> & { eventId: string; type: string };

/** The 400 of an invalid event, naming every bad field (`prefix` + path: `[3].visitor.ip` in a batch). */
function invalidEvent(problems: Problem[], prefix = ''): SwitchyardError {
  const named = prefix ? problems.map((p) => ({ ...p, where: p.where === '(body)' ? prefix : `${prefix}.${p.where}` })) : problems;
  return new SwitchyardError('validation_failed', `the event is not valid: ${named.map((p) => `${p.where} ${p.message}`).join('; ')}`, { problems: named });
}

/** The event to store (a generated eventId where it has none), or the error of an invalid payload. */
function prepare(payload: unknown, prefix?: string): { event: Event } | { error: SwitchyardError } {
  const problems = validateEventPayload(payload);
  if (problems.length) return { error: invalidEvent(problems, prefix) };
  const input = payload as Record<string, unknown> & { type: string };
  return { event: { ...input, eventId: typeof input.eventId === 'string' ? input.eventId : newEventId() } };
}

// A batch's events in one INSERT (store/rows-insert.ts: on SQLite multi-row VALUES, on PostgreSQL
// one JSON array); those whose id is stored already come back out (an id twice in the batch: the
// first one is stored).
interface EventRow {
  id: string;
  type: string;
  installationId: string | null;
  payload: string;
  count: number;
  at: number;
}
const EVENT_COLUMNS = ['id', 'type', 'installation_id', 'payload', 'received_at', 'delivery_count'];
/** PostgreSQL: the events' INSERT over the JSON array `@<param>`, returning the ids it stored. */
const insertEventsSql = (param: string) => `INSERT INTO events (${EVENT_COLUMNS.join(', ')})
      SELECT v ->> 'id', v ->> 'type', v ->> 'installationId', v ->> 'payload', (v ->> 'at')::bigint, (v ->> 'count')::int
      FROM jsonb_array_elements(CAST(@${param} AS jsonb)) WITH ORDINALITY AS j(v, k) ORDER BY k
      ON CONFLICT (id) DO NOTHING
      RETURNING id`;
const ingest = {
  insert: batchStatement<EventRow, { id: string }>({
    columns: EVENT_COLUMNS,
    sqlite: (values) => `INSERT INTO events (${EVENT_COLUMNS.join(', ')}) ${values} ON CONFLICT (id) DO NOTHING RETURNING id`,
    values: (e) => [e.id, e.type, e.installationId, e.payload, e.at, e.count],
    postgres: statement(insertEventsSql('items')),
    postgresParams: (rows) => ({ items: jsonRows(rows) }),
  }),
  setCount: statement('UPDATE events SET delivery_count = ? WHERE id = ?'),
};
/** The same INSERT, for the queue to store a batch's deliveries with their events (on PostgreSQL in one statement). */
const eventsInsert: EventsInsert<EventRow> = { insert: ingest.insert, postgresStep: insertEventsSql('events'), postgresParam: jsonRows };
const reads = {
  byId: statement<Row>('SELECT * FROM events WHERE id = ?'),
  purgeOrphans: statement(
    `DELETE FROM events WHERE seq IN (
       SELECT e.seq FROM events e
       WHERE e.received_at < @before AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.event_id = e.id)
         AND NOT EXISTS (SELECT 1 FROM event_handler_runs h WHERE h.event_id = e.id)
       LIMIT @limit)`,
  ),
};
/** A page of events: the statement for each set of filters (at most 2^5) is made once and kept. */
const lists = new Map<string, Statement<Row>>();
function listStatement(where: string[]): Statement<Row> {
  const sql = `SELECT * FROM events ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY seq DESC LIMIT @limit`;
  let s = lists.get(sql);
  if (!s) lists.set(sql, (s = statement<Row>(sql)));
  return s;
}

export function createEvents(deps: EventsDeps) {
  const { database } = deps;
  const now = deps.now ?? Date.now;

  /**
   * Store units' events in the caller's transaction: the events and their deliveries in one INSERT
   * each, or one for both on PostgreSQL (deliveries.enqueueWithEvents), and each new event's
   * handler runs. A unit's answer per event: null for an event seen before (nothing enqueued twice).
   */
  async function storeUnits(tx: Tx, units: Unit[], at: number, startAtCommit: boolean): Promise<Stored[][]> {
    const queue = deps.deliveries;
    const subscriptions = deps.subscriptions;
    const events = units.flatMap((u) => u.events.map((event, i) => ({ event, json: u.json?.[i] })));
    const subsOf = events.map(({ event }) => {
      const subscribed = queue ? (subscriptions?.forEventType(event.type) ?? []) : [];
      // An event that names its installation is that installation's alone (as its handler run is).
      const only = typeof event.installationId === 'string' && event.installationId ? event.installationId : undefined;
      return only === undefined ? subscribed : subscribed.filter((s) => s.installationId === only);
    });
    const items = events.map(({ event, json }, i) => ({
      id: event.eventId,
      type: event.type,
      installationId: (event.installationId as string | undefined) ?? null,
      payload: json ?? JSON.stringify(event),
      count: subsOf[i].length,
      at,
    }));
    // The events and their deliveries (none for an event stored before: a duplicate), in one
    // statement on PostgreSQL. A repeat of an id earlier in the batch is a duplicate whatever it
    // says (another type, another installation): it gets no deliveries to store, and takes no
    // slot at ingest from the new ones. (One stored by an earlier request is known only once the
    // statement has run: its reserved slots are given back then.)
    const seen = new Set<string>();
    const isFirst = events.map(({ event }) => !seen.has(event.eventId) && !!seen.add(event.eventId));
    const { stored: inserted, deliveries } = queue
      ? await queue.enqueueWithEvents(
          tx,
          eventsInsert,
          items,
          events.map(({ event }, i) => ({ event, subscriptions: isFirst[i] ? subsOf[i] : [] })),
          at,
          { startAtCommit },
        )
      : { stored: new Set((await ingest.insert.all(tx, items)).map((r) => r.id)), deliveries: events.map(() => []) };
    // The first of an id in the batch is the one stored (ORDER BY its place); the others are duplicates.
    const isNew = events.map(({ event }, i) => isFirst[i] && inserted.has(event.eventId));
    const stored: Stored[] = [];
    for (let i = 0; i < events.length; i++) {
      if (!isNew[i]) {
        stored.push(null); // seen before: nothing enqueued twice
        continue;
      }
      const { event } = events[i];
      if (deliveries[i].length !== subsOf[i].length) await tx.run(ingest.setCount, [deliveries[i].length, event.eventId]);
      const handlers = (await deps.handlerRuns?.enqueue(tx, event, at, { startAtCommit })) ?? [];
      stored.push({ deliveries: deliveries[i], handlers });
    }
    // Back into units.
    const out: Stored[][] = [];
    let k = 0;
    for (const u of units) out.push(stored.slice(k, (k += u.events.length)));
    return out;
  }
  type Stored = { deliveries: Array<{ id: string; installationId: string }>; handlers: Array<{ id: string; installationId: string }> } | null;
  /** What is stored together: one event of a single POST, or the valid events of a batch (with their JSON when already made). */
  type Unit = { events: Event[]; json?: string[] };

  // Group commit: units validated in the same event-loop turn are stored in one transaction
  // (one failure does not sink the others: see flush), and each caller is
  // answered only after that transaction commits. Under load this amortises the commit; idle, a
  // batch is one event and costs one loop turn. A unit (a batch request) is never split: all of it
  // is stored, or none.
  type Pending = Unit & { resolve: (r: Stored[]) => void; reject: (e: unknown) => void };
  const pending = batchPerTurn<Pending>((batch) => void flush(batch), {
    // Whole units, at least one, up to MAX_BATCH events (one batch request may be more on its own).
    take(waiting) {
      let take = 0;
      for (let count = 0; take < waiting.length && (take === 0 || count + waiting[take].events.length <= MAX_BATCH); take++)
        count += waiting[take].events.length;
      return take;
    },
  });

  function enqueue(unit: Unit): Promise<Stored[]> {
    const push = () => new Promise<Stored[]>((resolve, reject) => pending.push({ ...unit, resolve, reject }));
    // What another process subscribed (or paused) until now is what this event fans out to.
    const fresh = deps.subscriptions?.fresh?.();
    return fresh ? fresh.then(push) : push();
  }

  // The queues hear about the commit (first attempts start) or the rollback (reserved slots given
  // back) from the store's transaction hooks, registered by their enqueue: nothing here calls
  // back into them.
  async function flush(batch: Pending[]): Promise<void> {
    const at = now();
    let outcomes: Array<{ stored: Stored[] } | { error: unknown }> = [];
    try {
      try {
        // Fast path: the whole batch in one transaction without a savepoint per unit (a savepoint
        // costs as much as the inserts), its events in one INSERT and their deliveries in one
        // more. Any failure rolls the batch back ...
        const done = await database.transactionUnlessBusy((tx) => storeUnits(tx, batch, at, true));
        if (done === LOCK_BUSY) {
          // Another process is committing: this batch waits a turn (and takes in what arrives).
          pending.putBack(batch);
          return;
        }
        outcomes = done.map((stored) => ({ stored }));
      } catch (error) {
        // (One unit alone: its failure is its answer. The store itself failing (away, full,
        // read-only) is every unit's answer: trying them one by one would only wait for it again.)
        const failed = storageCode(error);
        if (batch.length === 1 || (failed && failed !== 'storage_busy')) throw error;
        // ... and it is stored again unit by unit, each in its own savepoint, so one bad event
        // does not sink the others (without starting deliveries at commit: first attempts go
        // through the scheduler, woken once this commits).
        outcomes = [];
        await database.transaction(async (tx) => {
          for (const p of batch) {
            try {
              outcomes.push({ stored: (await tx.transaction((sp) => storeUnits(sp, [p], at, false)))[0] });
            } catch (error) {
              outcomes.push({ error });
            }
          }
        });
      }
    } catch (error) {
      for (const p of batch) p.reject(error); // the commit itself failed: nothing was stored
      return;
    }
    // Committed (and the queues already started their work): answer the callers.
    batch.forEach((p, i) => {
      const o = outcomes[i];
      if ('error' in o) p.reject(o.error);
      else p.resolve(o.stored);
    });
  }

  const answer = (event: Event, s: Stored): IngestResult =>
    s === null
      ? { eventId: event.eventId, type: event.type, duplicate: true, deliveries: [], handlers: [] }
      : { eventId: event.eventId, type: event.type, duplicate: false, ...s };

  return {
    /**
     * Validate and store one event; resolves once it is committed with its deliveries. Rejects at
     * once with a 400 naming every bad field.
     */
    ingest(payload: unknown): Promise<IngestResult> {
      const p = prepare(payload);
      if ('error' in p) return Promise.reject(p.error);
      return enqueue({ events: [p.event] }).then(([s]) => answer(p.event, s));
    },

    /**
     * A batch of 1 to MAX_BATCH_EVENTS payloads. Each is validated as ingest() validates one (paths
     * prefixed with its index: `[3].type`), and may be at most `itemLimit` bytes as JSON (a single
     * POST's body_limit, so a batch is no way around it). The valid ones are stored, with their
     * deliveries and handler runs, in ONE transaction: all of them or (if storing fails) none, and
     * then the whole request fails. An eventId seen before, or earlier in the same batch, is a
     * duplicate: answered, not stored or enqueued again.
     *
     * Invalid items are refused one by one while the valid ones are stored (as Svix and Stripe
     * answer per item): at volume a batch often carries one malformed event from upstream, and
     * refusing all of it would stall a sender on one bad record, or make it re-send 999 good events
     * to learn about the next bad one. The sender re-sends only what was refused, after fixing it.
     */
    ingestBatch(payloads: unknown[], opts: { itemLimit?: number } = {}): Promise<BatchResult> {
      if (!payloads.length)
        return Promise.reject(new SwitchyardError('bad_request', `the batch is empty: send 1 to ${MAX_BATCH_EVENTS} events in the array`, { where: '(body)' }));
      if (payloads.length > MAX_BATCH_EVENTS)
        return Promise.reject(
          new SwitchyardError('bad_request', `a batch holds at most ${MAX_BATCH_EVENTS} events, got ${payloads.length}`, {
            where: '(body)',
            hint: `split it into requests of at most ${MAX_BATCH_EVENTS}`,
          }),
        );
      const results: Array<BatchItemResult | undefined> = new Array(payloads.length);
      const unit: Unit & { index: number[] } = { events: [], json: [], index: [] };
      const refuse = (index: number, e: SwitchyardError) => (results[index] = { index, status: e.status as 400 | 413, error: e.toJSON().error });
      payloads.forEach((payload, index) => {
        const at = `[${index}]`;
        if (nestedDeeperThan(payload, MAX_JSON_DEPTH))
          return refuse(
            index,
            new SwitchyardError('bad_request', `the event is nested deeper than ${MAX_JSON_DEPTH} levels`, { where: at, hint: 'flatten the data' }),
          );
        const p = prepare(payload, at);
        if ('error' in p) return refuse(index, p.error);
        const json = JSON.stringify(p.event);
        if (opts.itemLimit !== undefined && json.length > opts.itemLimit / 3 && Buffer.byteLength(json) > opts.itemLimit)
          return refuse(
            index,
            new SwitchyardError('payload_too_large', `the event is larger than server.body_limit (${opts.itemLimit} bytes), the limit of one event`, {
              where: at,
              hint: 'raise server.body_limit in config.yaml',
            }),
          );
        unit.events.push(p.event);
        unit.json!.push(json);
        unit.index.push(index);
      });
      const done = (): BatchResult => {
        const out = results as BatchItemResult[];
        const stored = out.filter((r) => r.status === 202).length;
        const duplicates = out.filter((r) => r.status === 200).length;
        return { stored, duplicates, rejected: out.length - stored - duplicates, results: out };
      };
      if (!unit.events.length) return Promise.resolve(done());
      return enqueue(unit).then((stored) => {
        stored.forEach((s, i) => {
          const index = unit.index[i];
          results[index] = { index, status: s === null ? 200 : 202, ...answer(unit.events[i], s) };
        });
        return done();
      });
    },

    /** Retention: delete up to `limit` events received before `before` that no delivery refers to any more. */
    async purgeOrphans(before: number, limit: number): Promise<number> {
      return (await database.run(reads.purgeOrphans, { before, limit })).changes;
    },

    async get(id: string): Promise<(StoredEvent & { payload: unknown }) | undefined> {
      const r = await database.get(reads.byId, [id]);
      return r && { ...view(r), payload: JSON.parse(r.payload) };
    },

    async list(f: { type?: string; installation?: string; since?: number; until?: number; limit?: number; cursor?: string }): Promise<{
      events: StoredEvent[];
      nextCursor: string | null;
    }> {
      const where: string[] = [];
      const params: Record<string, unknown> = {};
      if (f.type) where.push('type = @type'), (params.type = f.type);
      if (f.installation) where.push('installation_id = @installation'), (params.installation = f.installation);
      if (f.since !== undefined) where.push('received_at >= @since'), (params.since = f.since);
      if (f.until !== undefined) where.push('received_at <= @until'), (params.until = f.until);
      if (f.cursor) where.push('seq < @cursor'), (params.cursor = Number(f.cursor));
      const limit = Math.min(Math.max(f.limit ?? 50, 1), 500);
      const rows = await database.all(listStatement(where), { ...params, limit });
      return { events: rows.map(view), nextCursor: rows.length === limit ? String(rows[rows.length - 1].seq) : null };
    },
  };
}
