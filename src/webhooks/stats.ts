/**
 * Delivery statistics per endpoint (URL origin, the unit of per-endpoint concurrency), in time
 * buckets, computed in SQL from the deliveries and attempts already stored: how many deliveries
 * were created in each bucket and what their status is now, how long the delivered ones took from
 * ingest to delivery (the latency `switchyard_webhook_delivery_latency_seconds` measures), and how
 * long the endpoint took to answer their attempts. Read by `GET /api/v1/deliveries/stats` (the
 * console's charts).
 *
 * Buckets are aligned to multiples of the bucket size since the epoch (minute buckets start on
 * the minute), so two reads a few seconds apart agree on every bucket but the last. Only non-empty
 * buckets are listed; the caller fills the gaps with zeros.
 */
import { SwitchyardError } from '../errors.ts';
import { statement, type Database, type Statement } from '../store/contract.ts';
import type { DeliveryStats, Percentiles, StatsBucket } from './views.ts';

export type { DeliveryStats, EndpointStats, Percentiles, StatsBucket } from './views.ts';

export interface StatsFilter {
  /** Window start and end, ms since the epoch (the start is rounded down to a bucket boundary). */
  since: number;
  until: number;
  bucketMs: number;
  /** Only deliveries to this URL origin. */
  origin?: string;
  installation?: string;
}

/**
 * Percentiles of `ms` per (origin, bucket) over the rows of `source` (a SELECT of origin, b, ms):
 * nearest-rank, i.e. the smallest value whose cumulative share (CUME_DIST, one sort) reaches p.
 */
const percentilesOf = (source: string) => `
  WITH x AS (${source}),
  r AS (SELECT origin, b, ms, CUME_DIST() OVER (PARTITION BY origin, b ORDER BY ms) AS share FROM x)
  SELECT origin, b, COUNT(*) AS n,
    MIN(CASE WHEN share >= 0.5 THEN ms END) AS p50,
    MIN(CASE WHEN share >= 0.95 THEN ms END) AS p95,
    MAX(ms) AS max
  FROM r GROUP BY origin, b`;

interface PercentileRow {
  origin: string;
  b: number;
  n: number;
  p50: number;
  p95: number;
  max: number;
}

const round = (ms: number) => Math.round(ms * 10) / 10;
const percentiles = (r: PercentileRow): Percentiles => ({ count: r.n, p50: round(r.p50), p95: round(r.p95), max: round(r.max) });

/**
 * The most deliveries one answer reads: the numbers are computed on the serving process's event
 * loop (about 4 us a delivery measured, with its attempts), which also answers requests, sends
 * deliveries and keeps the heartbeat that the supervisor kills a silent process for. 200,000 is
 * under a second.
 */
export const MAX_STATS_DELIVERIES = 200_000;

interface StatsQuery {
  sql: string;
  params: Record<string, unknown>;
}

/**
 * The three statements of an answer. Every one reads the window's deliveries through the
 * created_at index and nothing else: the filters' columns carry a unary `+`, which keeps SQLite
 * from picking their index instead (the status index would read every delivered delivery ever
 * kept, the installation index all of that installation's), so the work is bounded by the window.
 */
export function statsQueries(f: StatsFilter): { counts: StatsQuery; latency: StatsQuery; response: StatsQuery } {
  const from = Math.floor(f.since / f.bucketMs) * f.bucketMs;
  const params: Record<string, unknown> = { from, until: f.until, bucket: f.bucketMs };
  const where = ['d.created_at >= @from', 'd.created_at < @until'];
  if (f.origin !== undefined) where.push('+d.origin = @origin'), (params.origin = f.origin);
  if (f.installation !== undefined) where.push('+d.installation_id = @installation'), (params.installation = f.installation);
  const inWindow = where.join(' AND ');
  return {
    counts: {
      sql: `SELECT d.origin AS origin, CAST(d.created_at / @bucket AS INTEGER) AS b, d.status AS status, COUNT(*) AS n
       FROM webhook_deliveries d WHERE ${inWindow} GROUP BY d.origin, b, d.status`,
      params,
    },
    latency: {
      sql: percentilesOf(
        `SELECT d.origin AS origin, CAST(d.created_at / @bucket AS INTEGER) AS b, d.completed_at - d.created_at AS ms FROM webhook_deliveries d
         WHERE ${inWindow} AND +d.status = 'delivered' AND d.completed_at IS NOT NULL`,
      ),
      params,
    },
    response: {
      sql: percentilesOf(
        `SELECT d.origin AS origin, CAST(a.started_at / @bucket AS INTEGER) AS b, a.duration_ms AS ms
         FROM webhook_deliveries d JOIN webhook_attempts a ON a.delivery_seq = d.seq
         WHERE ${inWindow} AND a.started_at >= @from AND a.started_at < @until AND a.duration_ms IS NOT NULL`,
      ),
      params,
    },
  };
}

const held = statement<{ n: number }>(
  'SELECT COUNT(*) AS n FROM (SELECT 1 FROM webhook_deliveries WHERE created_at >= @from AND created_at < @until LIMIT @max + 1) AS capped',
);
/** The statements statsQueries makes (one per filter combination and kind: at most 12), each declared once. */
const made = new Map<string, Statement>();
const statementOf = <R>(sql: string): Statement<R> => {
  let s = made.get(sql);
  if (!s) made.set(sql, (s = statement(sql)));
  return s as Statement<R>;
};

export async function deliveryStats(database: Database, f: StatsFilter, opts: { maxDeliveries?: number } = {}): Promise<DeliveryStats> {
  const from = Math.floor(f.since / f.bucketMs) * f.bucketMs;
  const max = opts.maxDeliveries ?? MAX_STATS_DELIVERIES;
  // Failure policy: refuse, before any work, a window that holds more than `max` deliveries (the
  // count itself stops at max + 1). A filter does not help: it is checked on each row read.
  const count = Number((await database.get(held, { from, until: f.until, max }))!.n);
  if (count > max)
    throw new SwitchyardError('bad_request', `the window holds more than ${max} deliveries; statistics read at most ${max} at once`, {
      where: 'since',
      hint: 'ask for a shorter window (since, until)',
    });

  const q = statsQueries(f);
  const counts = await database.all(statementOf<{ origin: string; b: number; status: string; n: number }>(q.counts.sql), q.counts.params);
  const latency = await database.all(statementOf<PercentileRow>(q.latency.sql), q.latency.params);
  const response = await database.all(statementOf<PercentileRow>(q.response.sql), q.response.params);

  const endpoints = new Map<string, { total: number; byStatus: Record<string, number>; buckets: Map<number, StatsBucket> }>();
  const bucketOf = (origin: string, b: number): StatsBucket => {
    let e = endpoints.get(origin);
    if (!e) endpoints.set(origin, (e = { total: 0, byStatus: {}, buckets: new Map() }));
    let bucket = e.buckets.get(b);
    if (!bucket) e.buckets.set(b, (bucket = { at: new Date(b * f.bucketMs).toISOString(), counts: {}, latency: null, response: null }));
    return bucket;
  };
  for (const r of counts) {
    bucketOf(r.origin, r.b).counts[r.status] = r.n;
    const e = endpoints.get(r.origin)!;
    e.total += r.n;
    e.byStatus[r.status] = (e.byStatus[r.status] ?? 0) + r.n;
  }
  for (const r of latency) bucketOf(r.origin, r.b).latency = percentiles(r);
  for (const r of response) bucketOf(r.origin, r.b).response = percentiles(r);

  return {
    since: new Date(from).toISOString(),
    until: new Date(f.until).toISOString(),
    bucketMs: f.bucketMs,
    endpoints: [...endpoints]
      .map(([endpoint, e]) => ({ endpoint, total: e.total, byStatus: e.byStatus, buckets: [...e.buckets].sort((a, b) => a[0] - b[0]).map(([, v]) => v) }))
      // The busiest endpoints first, then by name for a stable order.
      .sort((a, b) => b.total - a.total || a.endpoint.localeCompare(b.endpoint)),
  };
}
