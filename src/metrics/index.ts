/**
 * `GET /metrics` in the Prometheus text format (admin token required: the server listens on its
 * public port). Counters and histograms count from the process start; queue gauges are read from
 * the database at each scrape. Fed by the delivery sender's attempt hook, the runtime's invocation
 * observer and the HTTP app's response hook (`services.onHttpResponse`).
 */
import type { H3 } from 'h3';
import { SwitchyardError } from '../errors.ts';
import { authenticate } from '../http/app.ts';
import { bearerToken, safeEqual } from '../http/auth.ts';
import { clientAddress } from '../http/throttle.ts';
import { passRoute } from '../http/route.ts';
import { defineModule, type Services, type ServicesWith } from '../module/contract.ts';
import { VERSION } from '../version.ts';
import { ATTEMPT_OUTCOMES, DELIVERY_STATUSES, type RecordedAttempt } from '../webhooks/index.ts';
import { createRegistry, type Registry, type Snapshot } from './prometheus.ts';

declare module '../module/contract.ts' {
  interface Capabilities {
    /** The metrics this process exposes on GET /metrics. */
    metrics?: Registry;
  }
}

export { createRegistry, formatValue, type Registry, type Counter, type Histogram, type Labels } from './prometheus.ts';

interface ProcessSnapshot {
  pid: number;
  metrics: Snapshot;
}

const isSnapshot = (s: unknown): s is ProcessSnapshot =>
  typeof s === 'object' && s !== null && typeof (s as ProcessSnapshot).pid === 'number' && typeof (s as ProcessSnapshot).metrics === 'object';

/** Called by the HTTP app for every answer (errors included); `route` is the matched pattern, null when none matched. */
export type HttpObserver = (method: string, route: string | null, status: number) => void;

export const CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

const ATTEMPT_SECONDS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];
/** Slot hold: an attempt's HTTP exchange and the little around it (signing, the next start). */
const SLOT_SECONDS = [0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];
const LATENCY_SECONDS = [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600];

/** Build the registry and wire its sources; returns the registry and the unsubscribe function. */
/**
 * The queue's gauges read the store, asynchronously: a scrape reads them first (readQueue) and the
 * gauges answer from that reading.
 */
const queueReadings = new WeakMap<object, { counts: Record<string, number>; retriesDue: number }>();
async function readQueue(services: Services): Promise<void> {
  const d = services.deliveries;
  if (d) queueReadings.set(services, { counts: await d.counts(), retriesDue: await d.retriesDue(Date.now()) });
}

export function createServerMetrics(services: Services): { registry: Registry; stop(): void } {
  const r = createRegistry();
  const deliveries = () => services.deliveries;
  const stops: Array<() => void> = [];

  r.gauge('switchyard_build_info', 'Version of the running server (always 1)', () => [[{ version: VERSION }, 1]]);
  r.gauge('switchyard_start_time_seconds', 'When the server started, seconds since the epoch', () => [[{}, Math.floor(services.startedAt / 1000)]]);

  // Queue: read at scrape time, so they are right after a restart too.
  r.gauge(
    'switchyard_webhook_deliveries',
    'Webhook deliveries by state (queue depth: pending, retrying; waiting for a resume: held; history: delivered, failed, cancelled)',
    () => {
      const reading = queueReadings.get(services);
      if (!deliveries() || !reading) return [];
      const counts = reading.counts;
      return DELIVERY_STATUSES.map((s) => [{ state: s }, counts[s] ?? 0]);
    },
  );
  r.gauge(
    'switchyard_webhook_retries_due',
    'Retries whose time has come but that have not started yet (waiting for a slot; held deliveries are not due)',
    () => {
      const reading = queueReadings.get(services);
      return deliveries() && reading ? [[{}, reading.retriesDue]] : [];
    },
  );
  r.gauge(
    'switchyard_webhook_attempts_in_flight',
    'Webhook attempts being sent now',
    () => {
      const d = deliveries();
      return d ? [[{}, d.inFlight()]] : [];
    },
    { perProcess: true },
  );

  r.gauge(
    'switchyard_webhook_slots_borrowed',
    "Delivery slots held beyond a serving process's share of webhooks.concurrency and per_endpoint_concurrency, lent by the processes beside it (each lends what it does not use)",
    () => {
      const d = deliveries();
      return d ? [[{}, d.slotsBorrowed()]] : [];
    },
    { perProcess: true },
  );

  const attempts = r.counter(
    'switchyard_webhook_attempts',
    `Webhook attempts by outcome (${ATTEMPT_OUTCOMES.filter((o) => o !== 'interrupted').join(', ')}: failed = no retry follows, the last attempt of a failed delivery included) and trigger (automatic, manual)`,
  );
  // Every series exists from the start, so an alert on a rate of failed attempts has a series to read.
  for (const outcome of ['success', 'retry', 'failed'] as const) attempts.inc({ outcome, trigger: 'automatic' }, 0);
  const attemptSeconds = r.histogram('switchyard_webhook_attempt_duration_seconds', 'Duration of one webhook attempt (the HTTP request)', ATTEMPT_SECONDS);
  const slotSeconds = r.histogram(
    'switchyard_webhook_slot_hold_seconds',
    'How long one attempt held its endpoint slot: from its start to the end of its HTTP exchange (recording comes after)',
    SLOT_SECONDS,
  );
  const latency = r.histogram(
    'switchyard_webhook_delivery_latency_seconds',
    'From event ingest to the successful attempt, retries included (automatic deliveries only)',
    LATENCY_SECONDS,
  );
  const d = deliveries();
  if (d)
    stops.push(
      d.onAttempt((e: RecordedAttempt) => {
        const trigger = e.record.manual ? 'manual' : 'automatic';
        attempts.inc({ outcome: e.record.outcome, trigger });
        if (e.record.durationMs !== null) attemptSeconds.observe(e.record.durationMs / 1000);
        slotSeconds.observe(e.slotMs / 1000);
        if (e.record.outcome === 'success' && !e.record.manual && e.next.completedAt !== null)
          latency.observe(Math.max(0, e.next.completedAt - e.delivery.createdAt) / 1000);
      }),
    );

  const invocations = r.counter('switchyard_sandbox_invocations', 'Invocations of integration code, per integration');
  const errors = r.counter('switchyard_sandbox_errors', 'Invocations that ended in a fault, per integration and kind (exception, limit, crash, load)');
  const breaches = r.counter(
    'switchyard_sandbox_limit_breaches',
    'Invocations stopped by a sandbox limit, per integration and limit (cpu_time, memory_mb, ...)',
  );
  const droppedLines = r.counter(
    'switchyard_sandbox_log_lines_dropped',
    'Console lines not stored, per integration and reason (invocation: sandbox.log_bytes, integration: sandbox.log_bytes_per_minute, disk: sandbox.log_disk_reserve)',
  );
  const droppedBytes = r.counter('switchyard_sandbox_log_bytes_dropped', 'Message bytes of the console lines not stored, per integration and reason');
  const runtime = services.runtime;
  if (runtime)
    stops.push(
      runtime.observe((n) => {
        if (n.kind === 'dropped') {
          droppedLines.inc({ integration: n.integration, reason: n.reason }, n.lines);
          droppedBytes.inc({ integration: n.integration, reason: n.reason }, n.bytes);
          return;
        }
        if (n.kind !== 'recorded') return;
        invocations.inc({ integration: n.integration });
        if (!n.error) return;
        errors.inc({ integration: n.integration, kind: n.error.kind });
        if (n.error.kind === 'limit') breaches.inc({ integration: n.integration, limit: n.error.limit ?? 'unknown' });
      }),
    );

  const http = r.counter('switchyard_http_requests', 'HTTP requests answered, by method, route pattern and status');
  const observer: HttpObserver = (method, route, status) => http.inc({ method, route: route ?? 'unmatched', status: String(status) });
  services.onHttpResponse = observer;
  stops.push(() => {
    if (services.onHttpResponse === observer) services.onHttpResponse = undefined;
  });

  return { registry: r, stop: () => stops.forEach((s) => s()) };
}

export function metricsRoutes(app: H3, services: ServicesWith<'metrics'>): void {
  const summary =
    'Prometheus metrics (text format 0.0.4; the admin token or metrics.token): queue depth, attempts, latency, sandbox invocations and faults, HTTP requests';
  passRoute(app, { method: 'GET', path: '/metrics', summary, auth: 'self', responseMedia: CONTENT_TYPE }, async (event) => {
    // Least privilege for the scraper: metrics.token reads this page and nothing else.
    const scrapeToken = services.config.metrics.token;
    const token = scrapeToken ? bearerToken(event.req.headers.get('authorization')) : undefined;
    const throttle = services.authThrottle;
    if (token) throttle?.check(clientAddress(event.req, services.config.server.trust_proxy));
    if (!(token && safeEqual(token, scrapeToken)) && (await authenticate(event.req, services)).kind !== 'admin')
      throw new SwitchyardError('forbidden', 'GET /metrics needs the admin token or metrics.token', {
        hint: 'scrape with Authorization: Bearer <metrics.token from config.yaml>',
      });
    const registry = services.metrics;
    await readQueue(services);
    // Under the supervisor, counters and histograms are summed over every serving process.
    const link = services.processes;
    const others = link && link.count > 1 ? (await link.collect()).filter((s): s is ProcessSnapshot => isSnapshot(s) && s.pid !== process.pid) : [];
    return new Response(registry.render(others.map((o) => o.metrics)), { headers: { 'content-type': CONTENT_TYPE } });
  });
}

export const metricsModule = defineModule({
  name: 'metrics',
  provides: ['metrics'],
  // Its start subscribes to the queue's attempts and the runtime's invocations when the server has them.
  uses: ['deliveries', 'runtime'],
  async start(services) {
    const m = createServerMetrics(services);
    services.metrics = m.registry;
    services.processes?.setSnapshot(() => ({ pid: process.pid, metrics: m.registry.snapshot() }) satisfies ProcessSnapshot);
    return () => m.stop();
  },
  routes(app, services) {
    metricsRoutes(app, services);
  },
});
