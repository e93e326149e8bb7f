/**
 * Inspection: the live feeds behind `switchyard deliveries tail` and `switchyard logs --follow`
 * (server-sent events, resumable by cursor). Attaches `services.streams`. The invocation log API
 * (`GET /api/v1/logs`, `GET /api/v1/logs/:requestId`) is the runtime's, beside its data
 * (src/runtime/log-routes.ts); the feed reads the same `services.invocations`.
 *
 * - `GET /api/v1/deliveries/stream?after=&installation=&type=`: `attempt` events (AttemptFeedItem)
 * - `GET /api/v1/logs/stream?after=&integration=&installation=&errors=&renders=`: `invocation` events
 *   (InvocationView) and `log` events ({requestId, line}) for lines printed after a response
 */
import type { H3 } from 'h3';
import { SwitchyardError } from '../errors.ts';
import { cursorParam, text } from '../http/params.ts';
import { route } from '../http/route.ts';
import { logsQuery } from '../runtime/api.ts';
import { RENDER_EVENT } from '../runtime/invocations.ts';
import { object } from '../schema/index.ts';
import { defineModule, type ServicesWith } from '../module/contract.ts';
import { createStreamHub, resumeCursor, type FeedItem, type StreamHub } from './sse.ts';

export { createStreamHub, resumeCursor, type Feed, type FeedItem, type StreamHub } from './sse.ts';

declare module '../module/contract.ts' {
  interface Capabilities {
    streams?: StreamHub;
  }
}

/** Where a feed starts: after `?after=` or the Last-Event-ID header (checked as `after` is), else the newest item. */
function start(req: Request, after: string | undefined, newest: () => number | Promise<number>): number | Promise<number> {
  const c = resumeCursor(req, after);
  if (c !== undefined && Number.isNaN(c))
    throw new SwitchyardError('bad_request', `Last-Event-ID must be the cursor of an item already received (a whole number up to ${Number.MAX_SAFE_INTEGER})`, {
      where: 'after',
    });
  return c ?? newest();
}

const after = cursorParam('resume after this cursor (or send Last-Event-ID); default: from now', 'after');

const { integration, installation, event: eventFilter, errors, renders, since, until } = logsQuery.shape;

export function inspectionRoutes(app: H3, services: ServicesWith<'streams'>): void {
  const hub = () => services.streams;

  route(
    app,
    {
      method: 'GET',
      path: '/api/v1/deliveries/stream',
      summary: 'Delivery attempts as they are recorded (server-sent `attempt` events)',
      auth: 'admin',
      query: object({ after, installation: text('installation id'), type: text('event type') }),
      responseMedia: 'text/event-stream',
    },
    ({ req, query }) => {
      const deliveries = services.deliveries;
      if (!deliveries) throw new SwitchyardError('not_found', 'webhook delivery is not running on this server');
      const filter = { installation: query.installation, type: query.type };
      return hub().response(req, {
        start: start(req, query.after, () => deliveries.lastAttemptId()),
        read: async (after, limit) =>
          (await deliveries.attemptsAfter(after, limit, filter)).map((a) => ({ cursor: Number(a.cursor), event: 'attempt', data: a })),
        subscribe: (changed) => deliveries.onAttempt(changed),
      });
    },
  );

  route(
    app,
    {
      method: 'GET',
      path: '/api/v1/logs/stream',
      summary: 'Invocations as they are recorded, and lines printed after their answer (server-sent `invocation` and `log` events)',
      auth: 'admin',
      query: object({ after, integration, installation, event: eventFilter, errors, renders, since, until }),
      responseMedia: 'text/event-stream',
    },
    ({ req, query: { after, ...filter } }) => {
      const invocations = services.invocations;
      if (!invocations) throw new SwitchyardError('not_found', 'the runtime is not running on this server');
      const runtime = services.runtime;
      return hub().response(req, {
        start: start(req, after, () => invocations.lastCursor()),
        read: async (after, limit) => (await invocations.after(after, limit, filter)).map((i) => ({ cursor: Number(i.cursor), event: 'invocation', data: i })),
        subscribe(changed, push) {
          if (!runtime) return () => {};
          return runtime.observe((n) => {
            if (n.kind === 'recorded') return changed();
            if (n.kind !== 'log') return;
            // A line printed after the response (waitUntil): the row is updated, so send the line itself.
            if (filter.errors) return;
            const line = n.line;
            void invocations.get(n.id).then(
              (inv) => {
                if (!inv) return;
                if ((filter.integration && inv.integration !== filter.integration) || (filter.installation && inv.installationId !== filter.installation))
                  return;
                if (filter.renders === false && inv.eventType === RENDER_EVENT) return;
                const item: FeedItem = {
                  cursor: Number(inv.cursor),
                  event: 'log',
                  data: {
                    requestId: n.id,
                    integration: inv.integration,
                    installationId: inv.installationId,
                    line: { ...line, time: new Date(line.time).toISOString() },
                  },
                };
                push(item);
              },
              () => undefined, // the store closed under us: the row itself carries the line
            );
          });
        },
      });
    },
  );
}

export const inspectionModule = defineModule({
  name: 'inspection',
  provides: ['streams'],
  // Each feed follows its module when the server runs it (a feed of an absent one answers not_found).
  uses: ['deliveries', 'invocations', 'runtime'],
  async start(services) {
    // Other processes' (and, on PostgreSQL, other nodes') work is seen by looking, not by being told.
    const hub = createStreamHub({ closing: () => services.closing, poll: (services.processes?.count ?? 1) > 1 || services.store.shared });
    services.streams = hub;
    return () => hub.closeAll();
  },
  routes(app, services) {
    inspectionRoutes(app, services);
  },
});
