/**
 * Event ingest: validate, store, and in the same transaction enqueue one webhook delivery per
 * subscribed installation and one handler run per installation whose integration handles the
 * event; only then acknowledge. A repeated eventId is recognised and not enqueued again. After the
 * commit both workers are woken (first attempts at once), without the caller waiting for them.
 */
import { SwitchyardError } from '../errors.ts';
import type { Logger } from '../log/index.ts';
import type { Db } from '../store/index.ts';
import type { Deliveries, Subscription } from '../webhooks/index.ts';
import type { HandlerQueue } from './handlers.ts';
import { newEventId, validateEventPayload } from './types.ts';

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

export interface EventsDeps {
  db: Db;
  log: Logger;
  subscriptions: () => { forEventType(type: string): Subscription[] } | undefined;
  deliveries: () => Deliveries | undefined;
  handlerRuns: () => HandlerQueue | undefined;
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

/** Most events stored in one transaction by the group commit of single ingests. */
const MAX_BATCH = 256;

/** Most events in one batch ingest (`POST /api/v1/events` with an array). */
export const MAX_INGEST_BATCH = 1000;

/** One item of a batch ingest's answer, in the order sent. */
export type BatchItem =
  | ({ status: 200 | 202 } & IngestResult)
  | { status: 400; error: { code: 'validation_failed'; message: string; problems: Array<{ where: string; message: string }> } };

export function createEvents(deps: EventsDeps) {
  const { db } = deps;
  const now = deps.now ?? Date.now;
  const q = {
    insert: db.prepare(
      `INSERT INTO events (id, type, installation_id, payload, received_at, delivery_count) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`,
    ),
    setCount: db.prepare('UPDATE events SET delivery_count = ? WHERE id = ?'),
    byId: db.prepare<[string], Row>('SELECT * FROM events WHERE id = ?'),
    purgeOrphans: db.prepare<{ before: number; limit: number }>(
      `DELETE FROM events WHERE seq IN (
         SELECT e.seq FROM events e
         WHERE e.received_at < @before AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.event_id = e.id)
           AND NOT EXISTS (SELECT 1 FROM event_handler_runs h WHERE h.event_id = e.id)
         LIMIT @limit)`,
    ),
  };

  function store(event: Record<string, unknown> & { eventId: string; type: string }, at: number, startAtCommit = true) {
    const queue = deps.deliveries();
    const subs = queue ? (deps.subscriptions()?.forEventType(event.type) ?? []) : [];
    const inserted = q.insert.run(event.eventId, event.type, (event.installationId as string | undefined) ?? null, JSON.stringify(event), at, subs.length).changes;
    if (!inserted) return null; // seen before: nothing enqueued twice
    const deliveries = subs.length ? queue!.enqueueEvent(event, subs, at, { startAtCommit }) : [];
    if (deliveries.length !== subs.length) q.setCount.run(deliveries.length, event.eventId);
    const handlers = deps.handlerRuns()?.enqueueEvent(event, at, { startAtCommit }) ?? [];
    return { deliveries, handlers };
  }
  /** The same in a savepoint of its own: a failure leaves nothing of this event behind. */
  const storeAlone = db.transaction((event: Record<string, unknown> & { eventId: string; type: string }, at: number) => store(event, at, false));

  // Group commit: events validated in the same event-loop turn are stored in one transaction
  // (one failure does not sink the others: see flush), and each caller is
  // answered only after that transaction commits. Under load this amortises the commit; idle, a
  // batch is one event and costs one loop turn.
  type Pending = { event: Record<string, unknown> & { eventId: string; type: string }; resolve: (r: IngestResult) => void; reject: (e: unknown) => void };
  let pending: Pending[] = [];
  let flushQueued = false;

  function scheduleFlush(): void {
    if (flushQueued) return;
    flushQueued = true;
    setImmediate(flush);
  }

  function flush(): void {
    flushQueued = false;
    const batch = pending.slice(0, MAX_BATCH);
    pending = pending.slice(MAX_BATCH);
    if (pending.length) scheduleFlush();
    const at = now();
    type Stored = ReturnType<typeof store>;
    let outcomes: Array<{ stored: Stored } | { error: unknown }> = [];
    try {
      try {
        // Fast path: the whole batch in one transaction without a savepoint per event (a savepoint
        // costs as much as the two inserts). Any failure rolls the batch back ...
        db.transaction(() => {
          outcomes = batch.map((p) => ({ stored: store(p.event, at) }));
        })();
      } catch {
        // ... and it is stored again event by event, each in its own savepoint, so one bad event
        // does not sink the others (without starting deliveries at commit: a savepoint that rolls
        // back could not take its leases back).
        deps.deliveries()?.rolledBack();
        deps.handlerRuns()?.rolledBack();
        outcomes = [];
        db.transaction(() => {
          for (const p of batch) {
            try {
              outcomes.push({ stored: storeAlone(p.event, at) });
            } catch (error) {
              outcomes.push({ error });
            }
          }
        })();
      }
    } catch (error) {
      deps.deliveries()?.rolledBack();
      deps.handlerRuns()?.rolledBack();
      for (const p of batch) p.reject(error); // the commit itself failed: nothing was stored
      return;
    }
    // Committed: now the work may start.
    if (outcomes.some((o) => 'stored' in o && o.stored?.deliveries.length)) deps.deliveries()?.wake();
    if (outcomes.some((o) => 'stored' in o && o.stored?.handlers.length)) deps.handlerRuns()?.wake();
    batch.forEach((p, i) => {
      const o = outcomes[i];
      if ('error' in o) return p.reject(o.error);
      const { event } = p;
      if (o.stored === null) return p.resolve({ eventId: event.eventId, type: event.type, duplicate: true, deliveries: [], handlers: [] });
      p.resolve({ eventId: event.eventId, type: event.type, duplicate: false, ...o.stored });
    });
  }

  /** A batch's valid events, with their deliveries and handler runs, in one transaction (one commit). */
  const storeBatch = db.transaction((events: Array<Record<string, unknown> & { eventId: string; type: string }>, at: number) =>
    events.map((e) => store(e, at)),
  );

  function validated(payload: unknown): { event: Record<string, unknown> & { eventId: string; type: string } } | { problems: Array<{ where: string; message: string }> } {
    const problems = validateEventPayload(payload);
    if (problems.length) return { problems };
    const input = payload as Record<string, unknown> & { type: string };
    return { event: { ...input, eventId: typeof input.eventId === 'string' ? input.eventId : newEventId() } };
  }

  return {
    /**
     * Batch ingest: each item validated and answered on its own, every valid one stored in ONE
     * transaction (all of them or, if the commit fails, none: the caller gets the error and may send
     * the batch again, eventIds making that safe). Invalid items are answered 400 with their index
     * in the field paths and do not stop the valid ones, as Stripe and Svix answer per object.
     */
    ingestMany(payloads: unknown[]): BatchItem[] {
      const checked = payloads.map(validated);
      const valid = checked.flatMap((c) => ('event' in c ? [c.event] : []));
      let stored: ReturnType<typeof store>[] = [];
      if (valid.length) {
        try {
          stored = storeBatch(valid, now());
        } catch (e) {
          deps.deliveries()?.rolledBack();
          deps.handlerRuns()?.rolledBack();
          throw e;
        }
        if (stored.some((o) => o?.deliveries.length)) deps.deliveries()?.wake();
        if (stored.some((o) => o?.handlers.length)) deps.handlerRuns()?.wake();
      }
      let next = 0;
      return checked.map((c, i): BatchItem => {
        if ('problems' in c) {
          const problems = c.problems.map((p) => ({ where: p.where === '(body)' ? `[${i}]` : `[${i}].${p.where}`, message: p.message }));
          return { status: 400, error: { code: 'validation_failed', message: `event [${i}] is not valid: ${problems.map((p) => `${p.where} ${p.message}`).join('; ')}`, problems } };
        }
        const o = stored[next++];
        if (o === null) return { status: 200, eventId: c.event.eventId, type: c.event.type, duplicate: true, deliveries: [], handlers: [] };
        return { status: 202, eventId: c.event.eventId, type: c.event.type, duplicate: false, ...o };
      });
    },

    /**
     * Validate and store one event; resolves once it is committed with its deliveries. Rejects at
     * once with a 400 naming every bad field.
     */
    ingest(payload: unknown): Promise<IngestResult> {
      const problems = validateEventPayload(payload);
      if (problems.length)
        return Promise.reject(
          new SwitchyardError('validation_failed', `the event is not valid: ${problems.map((p) => `${p.where} ${p.message}`).join('; ')}`, { problems }),
        );
      const input = payload as Record<string, unknown> & { type: string };
      const event = { ...input, eventId: typeof input.eventId === 'string' ? input.eventId : newEventId() };
      return new Promise<IngestResult>((resolve, reject) => {
        pending.push({ event, resolve, reject });
        scheduleFlush();
      });
    },

    /** Retention: delete up to `limit` events received before `before` that no delivery refers to any more. */
    purgeOrphans(before: number, limit: number): number {
      return q.purgeOrphans.run({ before, limit }).changes;
    },

    get(id: string): (StoredEvent & { payload: unknown }) | undefined {
      const r = q.byId.get(id);
      return r && { ...view(r), payload: JSON.parse(r.payload) };
    },

    list(f: { type?: string; installation?: string; since?: number; until?: number; limit?: number; cursor?: string }): {
      events: StoredEvent[];
      nextCursor: string | null;
    } {
      const where: string[] = [];
      const params: Record<string, unknown> = {};
      if (f.type) (where.push('type = @type'), (params.type = f.type));
      if (f.installation) (where.push('installation_id = @installation'), (params.installation = f.installation));
      if (f.since !== undefined) (where.push('received_at >= @since'), (params.since = f.since));
      if (f.until !== undefined) (where.push('received_at <= @until'), (params.until = f.until));
      if (f.cursor) (where.push('seq < @cursor'), (params.cursor = Number(f.cursor)));
      const limit = Math.min(Math.max(f.limit ?? 50, 1), 500);
      const rows = db
        .prepare<Record<string, unknown>, Row>(`SELECT * FROM events ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY seq DESC LIMIT ${limit}`)
        .all(params);
      return { events: rows.map(view), nextCursor: rows.length === limit ? String(rows[rows.length - 1].seq) : null };
    },
  };
}
