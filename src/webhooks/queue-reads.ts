/**
 * What the management API, the live tail and retention read of the queue (and what retention
 * deletes): deliveries with their attempts, as views.ts shapes them.
 */
import { hideUrlCredentials } from '../log/index.ts';
import { statement, type Database, type Statement } from '../store/contract.ts';
import { attemptOfRow, attemptView, COLUMNS, iso, type AttemptRow, type Row } from './queue-rows.ts';
import { DELIVERY_STATUSES, type Attempt, type Delivery, type DeliveryDetail, type DeliveryStatus } from './views.ts';

export interface DeliveryFilter {
  status?: DeliveryStatus;
  type?: string;
  installation?: string;
  event?: string;
  /** Only deliveries to this URL origin (`https://hooks.example.com`). */
  origin?: string;
  since?: number;
  until?: number;
  limit?: number;
  cursor?: string;
}

/** One attempt as the live tail shows it: the attempt, its delivery, and a cursor to resume after it. */
export interface AttemptFeedItem {
  cursor: string;
  deliveryId: string;
  eventId: string;
  eventType: string;
  installationId: string;
  /** The delivery's status now (it may have moved on since this attempt). */
  deliveryStatus: DeliveryStatus;
  attempt: Attempt;
}

interface FeedRow extends AttemptRow {
  id: number;
  delivery_id: string;
  event_id: string;
  event_type: string;
  installation_id: string;
  delivery_status: DeliveryStatus;
}

const q = {
  byId: statement<Row>(`SELECT ${COLUMNS} FROM webhook_deliveries d WHERE d.id = ?`),
  attemptsOf: statement<AttemptRow>('SELECT * FROM webhook_attempts WHERE delivery_seq = ? ORDER BY number'),
  counts: statement<{ status: DeliveryStatus; n: number }>('SELECT status, COUNT(*) AS n FROM webhook_deliveries GROUP BY status'),
  attemptsAfter: statement<FeedRow>(
    `SELECT a.*, d.id AS delivery_id, d.event_id, d.event_type, d.installation_id, d.status AS delivery_status
       FROM webhook_attempts a JOIN webhook_deliveries d ON d.seq = a.delivery_seq
       WHERE a.id > @after AND (CAST(@installation AS TEXT) IS NULL OR d.installation_id = @installation) AND (CAST(@type AS TEXT) IS NULL OR d.event_type = @type)
       ORDER BY a.id LIMIT @limit`,
  ),
  lastAttempt: statement<{ id: number }>('SELECT MAX(id) AS id FROM webhook_attempts'),
  retriesDue: statement<{ n: number }>(
    `SELECT COUNT(*) AS n FROM webhook_deliveries WHERE status = 'retrying' AND next_attempt_at <= ? AND lease_until IS NULL`,
  ),
  purgeFinished: statement(
    `DELETE FROM webhook_deliveries WHERE seq IN (
         SELECT seq FROM webhook_deliveries
         WHERE status IN ('delivered', 'cancelled') AND completed_at < @before AND lease_until IS NULL
           AND seq IS NOT (SELECT delivery_seq FROM webhook_attempts ORDER BY id DESC LIMIT 1)
         LIMIT @limit)`,
  ),
  purgeFailed: statement(
    `DELETE FROM webhook_deliveries WHERE seq IN (
         SELECT seq FROM webhook_deliveries
         WHERE status = 'failed' AND completed_at < @before AND lease_until IS NULL
           AND seq IS NOT (SELECT delivery_seq FROM webhook_attempts ORDER BY id DESC LIMIT 1)
         LIMIT @limit)`,
  ),
};

/** A page of deliveries: the statement for each set of filters (at most 2^7) is made once and kept. */
const lists = new Map<string, Statement<Row>>();
function listStatement(where: string[]): Statement<Row> {
  const sql = `SELECT ${COLUMNS} FROM webhook_deliveries d ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY d.seq DESC LIMIT @limit`;
  let s = lists.get(sql);
  if (!s) lists.set(sql, (s = statement<Row>(sql)));
  return s;
}

export function createQueueReads(database: Database, maxAttempts: () => number) {
  function view(r: Row): Delivery {
    return {
      id: r.id,
      eventId: r.event_id,
      eventType: r.event_type,
      installationId: r.installation_id,
      url: hideUrlCredentials(r.url), // shown without credentials; sending uses the stored URL
      status: r.status,
      attemptCount: r.attempt_total,
      scheduledAttempts: r.attempts,
      maxAttempts: maxAttempts(),
      nextAttemptAt: iso(r.next_attempt_at),
      held: r.status === 'held',
      lastStatus: r.last_status,
      lastError: r.last_error && hideUrlCredentials(r.last_error),
      createdAt: iso(r.created_at)!,
      updatedAt: iso(r.updated_at)!,
      completedAt: iso(r.completed_at),
    };
  }

  const attemptOf = (a: AttemptRow): Attempt => attemptView(attemptOfRow(a), a.number);

  return {
    async get(id: string): Promise<DeliveryDetail | undefined> {
      const r = await database.get(q.byId, [id]);
      if (!r) return undefined;
      const attempts = (await database.all(q.attemptsOf, [r.seq])).map(attemptOf);
      let payload: unknown;
      try {
        payload = JSON.parse(r.body);
      } catch {
        payload = null;
      }
      const signed = [...attempts].reverse().find((a) => a.signatureHeader);
      return { ...view(r), body: r.body, payload, signatureHeader: signed?.signatureHeader ?? null, attempts };
    },

    async list(f: DeliveryFilter): Promise<{ deliveries: Delivery[]; nextCursor: string | null }> {
      const where: string[] = [];
      const params: Record<string, unknown> = {};
      if (f.status) where.push('d.status = @status'), (params.status = f.status);
      if (f.type) where.push('d.event_type = @type'), (params.type = f.type);
      if (f.installation) where.push('d.installation_id = @installation'), (params.installation = f.installation);
      if (f.event) where.push('d.event_id = @event'), (params.event = f.event);
      if (f.origin) where.push('d.origin = @origin'), (params.origin = f.origin);
      if (f.since !== undefined) where.push('d.created_at >= @since'), (params.since = f.since);
      if (f.until !== undefined) where.push('d.created_at <= @until'), (params.until = f.until);
      if (f.cursor) where.push('d.seq < @cursor'), (params.cursor = Number(f.cursor));
      const limit = Math.min(Math.max(f.limit ?? 50, 1), 500);
      const rows = await database.all(listStatement(where), { ...params, limit });
      return { deliveries: rows.map(view), nextCursor: rows.length === limit ? String(rows[rows.length - 1].seq) : null };
    },

    async counts(): Promise<Record<DeliveryStatus, number>> {
      const out = Object.fromEntries(DELIVERY_STATUSES.map((s) => [s, 0])) as Record<DeliveryStatus, number>;
      for (const r of await database.all(q.counts)) out[r.status] = Number(r.n);
      return out;
    },

    // --- Inspection (live tail, metrics) and retention; see src/inspection and src/retention. ---

    /** Attempts recorded after `afterId` (ascending; ids only grow), with their delivery: the tail's cursor read. */
    async attemptsAfter(afterId: number, limit: number, f: { installation?: string; type?: string } = {}): Promise<AttemptFeedItem[]> {
      return (await database.all(q.attemptsAfter, { after: afterId, limit, installation: f.installation ?? null, type: f.type ?? null })).map((r) => ({
        cursor: String(r.id),
        deliveryId: r.delivery_id,
        eventId: r.event_id,
        eventType: r.event_type,
        installationId: r.installation_id,
        deliveryStatus: r.delivery_status,
        attempt: attemptOf(r),
      }));
    },

    /** The newest attempt's id (0 when none): where a live tail starts. */
    async lastAttemptId(): Promise<number> {
      return Number((await database.get(q.lastAttempt))?.id ?? 0);
    },

    /** Retries whose time has come but that have not started (waiting for a slot; held ones are not due). */
    async retriesDue(now: number): Promise<number> {
      return Number((await database.get(q.retriesDue, [now]))?.n ?? 0);
    },

    /**
     * Delete up to `limit` delivered or cancelled deliveries completed before `before`, with their
     * attempts (ON DELETE CASCADE). Failed ones stay: they can still be replayed. The delivery that
     * holds the newest attempt is kept so attempt ids are never reused (a tail's cursor stays valid).
     */
    async purgeFinished(before: number, limit: number): Promise<number> {
      return (await database.run(q.purgeFinished, { before, limit })).changes;
    },

    /** Delete up to `limit` failed deliveries that failed before `before` (no longer replayable), with their attempts; same cursor rule. */
    async purgeFailed(before: number, limit: number): Promise<number> {
      return (await database.run(q.purgeFailed, { before, limit })).changes;
    },
  };
}
