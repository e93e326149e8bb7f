/**
 * Inspection: the live feeds behind `switchyard deliveries tail` and `switchyard logs --follow`
 * (server-sent events, resumable by cursor). Attaches `services.streams`. The invocation log API
 * (`GET /api/v1/logs`, `GET /api/v1/logs/:requestId`) is the runtime's, beside its data
 * (src/runtime/log-routes.ts); the feed reads the same `services.invocations`.
 *
 * - `GET /api/v1/deliveries/stream?after=&installation=&type=`: `attempt` events (AttemptFeedItem)
 * - `GET /api/v1/logs/stream?after=&integration=&installation=&errors=`: `invocation` events
 *   (InvocationView) and `log` events ({requestId, line}) for lines printed after a response
 */
import type { H3 } from 'h3';
import { SwitchyardError } from '../errors.ts';
import { requireAdmin } from '../http/app.ts';
import { invocationFilterParams, type InvocationFilter } from '../runtime/index.ts';
import { defineModule, type ServicesWith } from '../server/services.ts';
import { createStreamHub, resumeCursor, type FeedItem, type StreamHub } from './sse.ts';

export { createStreamHub, resumeCursor, type Feed, type FeedItem, type StreamHub } from './sse.ts';

declare module '../server/services.ts' {
  interface Capabilities {
    streams?: StreamHub;
  }
}

function cursorParam(req: Request, q: URLSearchParams, newest: () => number): number {
  const c = resumeCursor(req, q);
  if (c !== undefined && Number.isNaN(c))
    throw new SwitchyardError('bad_request', 'after must be the cursor of an item already received (a whole number)', { where: 'after' });
  return c ?? newest();
}

export function inspectionRoutes(app: H3, services: ServicesWith<'streams'>): void {
  const hub = () => services.streams;

  app.get('/api/v1/deliveries/stream', (event) => {
    requireAdmin(event.req);
    const deliveries = services.deliveries;
    if (!deliveries) throw new SwitchyardError('not_found', 'webhook delivery is not running on this server');
    const q = new URL(event.req.url).searchParams;
    const filter = { installation: q.get('installation') || undefined, type: q.get('type') || undefined };
    return hub().response(event.req, {
      start: cursorParam(event.req, q, () => deliveries.lastAttemptId()),
      read: (after, limit) => deliveries.attemptsAfter(after, limit, filter).map((a) => ({ cursor: Number(a.cursor), event: 'attempt', data: a })),
      subscribe: (changed) => deliveries.onAttempt(changed),
    });
  });

  app.get('/api/v1/logs/stream', (event) => {
    requireAdmin(event.req);
    const invocations = services.invocations;
    if (!invocations) throw new SwitchyardError('not_found', 'the runtime is not running on this server');
    const q = new URL(event.req.url).searchParams;
    const filter: Omit<InvocationFilter, 'limit' | 'cursor'> = invocationFilterParams(q);
    const runtime = services.runtime;
    return hub().response(event.req, {
      start: cursorParam(event.req, q, () => invocations.lastCursor()),
      read: (after, limit) => invocations.after(after, limit, filter).map((i) => ({ cursor: Number(i.cursor), event: 'invocation', data: i })),
      subscribe(changed, push) {
        if (!runtime) return () => {};
        return runtime.observe((n) => {
          if (n.kind === 'recorded') return changed();
          if (n.kind !== 'log') return;
          // A line printed after the response (waitUntil): the row is updated, so send the line itself.
          const inv = invocations.get(n.id);
          if (!inv || filter.errors) return;
          if ((filter.integration && inv.integration !== filter.integration) || (filter.installation && inv.installationId !== filter.installation)) return;
          const item: FeedItem = {
            cursor: Number(inv.cursor),
            event: 'log',
            data: { requestId: n.id, integration: inv.integration, installationId: inv.installationId, line: { ...n.line, time: new Date(n.line.time).toISOString() } },
          };
          push(item);
        });
      },
    });
  });
}

export const inspectionModule = defineModule({
  name: 'inspection',
  provides: ['streams'],
  async start(services) {
    // Other processes' (and, on PostgreSQL, other nodes') work is seen by looking, not by being told.
    const hub = createStreamHub({ closing: () => services.closing, poll: (services.processes?.count ?? 1) > 1 || services.store.engine === 'postgres' });
    services.streams = hub;
    return () => hub.closeAll();
  },
  routes(app, services) {
    inspectionRoutes(app, services);
  },
});
