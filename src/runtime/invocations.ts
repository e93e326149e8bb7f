/**
 * Reading the invocations table: what integration code printed and how each invocation ended,
 * filtered and paged (newest first), read after a cursor (oldest first, for `logs --follow`), and
 * purged by retention. The runtime writes the rows (records.ts); this file only reads and purges.
 * Cursors are row numbers (SQLite's rowid; on PostgreSQL a `rowid` column of its own, whose rows
 * commit in number order: store/feed-order.ts), which only grow (retention never deletes the
 * newest row).
 */
import { statement, type Queries, type Statement } from '../store/contract.ts';
import type { InvocationView } from './invocation-view.ts';

export type { InvocationView } from './invocation-view.ts';

export interface InvocationFilter {
  integration?: string;
  installation?: string;
  event?: string;
  /** Only invocations that failed: a fault (exception, limit, crash, load) or a 5xx answer. */
  errors?: boolean;
  /** `false` leaves out `ui_render` invocations (renders of components, and their handler runs). */
  renders?: boolean;
  since?: number;
  until?: number;
  limit?: number;
  /** `nextCursor` of the previous page. */
  cursor?: string;
}

interface Row {
  cursor: number;
  id: string;
  integration: string;
  installation_id: string | null;
  event_type: string;
  event_id: string | null;
  status: number;
  duration_ms: number;
  cpu_ms: number;
  error_kind: string | null;
  error_message: string | null;
  error_stack: string | null;
  error_limit: string | null;
  logs: string;
  created_at: string;
}

const COLUMNS =
  'rowid AS cursor, id, integration, installation_id, event_type, event_id, status, duration_ms, cpu_ms, error_kind, error_message, error_stack, error_limit, logs, created_at';
/** The event type of a component's render (and of the events.ui_render handler run it calls). */
export const RENDER_EVENT = 'ui_render';
const round = (n: number) => Math.round(n * 100) / 100;

function parseLogs(text: string): InvocationView['logs'] {
  try {
    const lines = JSON.parse(text) as Array<{ time: number; level: string; message: string }>;
    return lines.map((l) => ({ time: new Date(l.time).toISOString(), level: l.level, message: l.message }));
  } catch {
    return [];
  }
}

export function invocationView(r: Row): InvocationView {
  // Rows written before the column existed name the limit only in their message ("sandbox.cpu_time = 50 ms").
  const limit = r.error_kind === 'limit' ? (r.error_limit ?? /sandbox\.([a-z_]+)/.exec(r.error_message ?? '')?.[1] ?? null) : null;
  return {
    requestId: r.id,
    integration: r.integration,
    installationId: r.installation_id,
    eventType: r.event_type,
    eventId: r.event_id,
    status: r.status,
    outcome: r.error_kind ?? (r.status >= 400 ? 'http_error' : 'ok'),
    durationMs: round(r.duration_ms),
    cpuMs: round(r.cpu_ms),
    error: r.error_kind ? { kind: r.error_kind, message: r.error_message ?? '', limit, stack: r.error_stack } : null,
    logs: parseLogs(r.logs),
    createdAt: r.created_at,
    cursor: String(r.cursor),
  };
}

function where(f: Omit<InvocationFilter, 'limit' | 'cursor'>, params: Record<string, unknown>): string[] {
  const w: string[] = [];
  if (f.integration) w.push('integration = @integration'), (params.integration = f.integration);
  if (f.installation) w.push('installation_id = @installation'), (params.installation = f.installation);
  if (f.event) w.push('event_id = @event'), (params.event = f.event);
  if (f.errors) w.push('(error_kind IS NOT NULL OR status >= 500)');
  if (f.renders === false) w.push(`event_type <> '${RENDER_EVENT}'`);
  // created_at is ISO-8601 text in UTC, so text order is time order.
  if (f.since !== undefined) w.push('created_at >= @since'), (params.since = new Date(f.since).toISOString());
  if (f.until !== undefined) w.push('created_at <= @until'), (params.until = new Date(f.until).toISOString());
  return w;
}

export type Invocations = ReturnType<typeof createInvocations>;

// Records the runtime has answered but not yet committed (see RECORD_DELAY_MS in records.ts) are
// committed before any read of the same database, so a request's invocation can be read back as
// soon as its answer arrived.
const flushers = new WeakMap<object, () => Promise<void>>();
export function beforeInvocationsRead(database: Queries, flush: () => Promise<void>): void {
  flushers.set(database, flush);
}

const q = {
  byId: statement<Row>(`SELECT ${COLUMNS} FROM invocations WHERE id = ?`),
  last: statement<{ n: number | null }>('SELECT MAX(rowid) AS n FROM invocations'),
  purge: statement(
    `DELETE FROM invocations WHERE rowid IN (
       SELECT rowid FROM invocations WHERE created_at < @before AND rowid < (SELECT MAX(rowid) FROM invocations) LIMIT @limit)`,
  ),
};

/** The page and feed reads, one statement per combination of filters (a handful), declared on first use. */
const shapes = new Map<string, Statement<Row>>();
function shaped(sql: string): Statement<Row> {
  let s = shapes.get(sql);
  if (!s) shapes.set(sql, (s = statement<Row>(sql)));
  return s;
}

/** Works on a read-only connection too (the CLI's --offline): only `purgeBefore` writes. */
export function createInvocations(database: Queries) {
  const pending = async () => flushers.get(database)?.();

  return {
    /** Newest first, `limit` (1-500, default 50) at a time; `nextCursor` pages on. */
    async list(f: InvocationFilter = {}): Promise<{ invocations: InvocationView[]; nextCursor: string | null }> {
      await pending();
      const params: Record<string, unknown> = {};
      const w = where(f, params);
      if (f.cursor) w.push('rowid < @cursor'), (params.cursor = Number(f.cursor));
      const limit = Math.min(Math.max(f.limit ?? 50, 1), 500);
      params.limit = limit;
      const rows = await database.all(
        shaped(`SELECT ${COLUMNS} FROM invocations ${w.length ? `WHERE ${w.join(' AND ')}` : ''} ORDER BY rowid DESC LIMIT @limit`),
        params,
      );
      return { invocations: rows.map(invocationView), nextCursor: rows.length === limit ? String(rows[rows.length - 1].cursor) : null };
    },

    /** Oldest first, after `cursor`: the live feed's read (nothing recorded after the cursor is skipped). */
    async after(cursor: number, limit: number, f: Omit<InvocationFilter, 'limit' | 'cursor'> = {}): Promise<InvocationView[]> {
      await pending();
      const params: Record<string, unknown> = { after: cursor, limit: Math.max(1, limit) };
      const w = ['rowid > @after', ...where(f, params)];
      const rows = await database.all(shaped(`SELECT ${COLUMNS} FROM invocations WHERE ${w.join(' AND ')} ORDER BY rowid LIMIT @limit`), params);
      return rows.map(invocationView);
    },

    async get(requestId: string): Promise<InvocationView | undefined> {
      await pending();
      const r = await database.get(q.byId, [requestId]);
      return r && invocationView(r);
    },

    /** The newest invocation's cursor (0 when none): where a live feed starts. */
    async lastCursor(): Promise<number> {
      await pending();
      return Number((await database.get(q.last))?.n ?? 0);
    },

    /** Retention: delete up to `limit` invocations recorded before `before` (the newest row always stays). */
    async purgeBefore(before: number, limit: number): Promise<number> {
      await pending();
      return (await database.run(q.purge, { before: new Date(before).toISOString(), limit })).changes;
    },
  };
}
