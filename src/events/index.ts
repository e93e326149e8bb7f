/**
 * Events: ingest (`POST /api/v1/events`), validation against spec 2.8, fan-out to webhook
 * deliveries and to handler runs of integrations' event handlers (both in the event's transaction,
 * both retried on the webhook schedule). Attaches `services.events` and `services.handlerRuns`.
 */
import { defineModule } from '../module/contract.ts';
import { createEvents, type Events } from './service.ts';
import { createHandlerQueue, type HandlerQueue } from './handlers.ts';
import { eventRoutes } from './routes.ts';
import { leftoverLeases } from '../store/lease-owner.ts';

export { validateEventPayload, samplePayload, setPath, newEventId, EVENT_TYPES, WEBHOOK_EVENT_TYPES, MAX_BATCH_EVENTS } from './types.ts';
export { createEvents, type Events, type StoredEvent, type IngestResult, type BatchResult, type BatchItemResult } from './service.ts';
export { createHandlerQueue, type EventHandlers, type HandlerQueue } from './handlers.ts';
export { createHandlerRuns, type HandlerRuns, type HandlerRunFilter } from './handler-runs.ts';
export type { HandlerRun } from './handler-views.ts';
export type { RunOutcome } from './handler-runner.ts';
export { eventsMigrations } from './schema.ts';
export { eventSchema, storedEventSchema, handlerRunSchema, type EventDetail } from './api.ts';

/** Handler runs in flight per process (each is one sandbox invocation). */
const HANDLER_CONCURRENCY = 16;

declare module '../module/contract.ts' {
  interface Capabilities {
    events?: Events;
    handlerRuns?: HandlerQueue;
  }
}

export const eventsModule = defineModule({
  name: 'events',
  provides: ['events', 'handlerRuns'],
  // Ingest enqueues each event's deliveries to its subscribers, in the event's transaction.
  needs: ['subscriptions', 'deliveries'],
  // A server that runs no integration code has no handlers (their runs are not enqueued). Started
  // after the runtime: runs owed from before this start go out as soon as this module starts.
  uses: ['eventHandlers'],
  async start(services) {
    const log = services.log.child({ module: 'events' });
    const handlerRuns = createHandlerQueue({
      database: services.store.database,
      log,
      // Optional (uses): absent on a server that runs no integration code, so looked up at each run.
      handlers: () => services.eventHandlers,
      leftovers: services.processes ? undefined : leftoverLeases(services.store),
      event: async (id) => (await events.get(id))?.payload as (Record<string, unknown> & { eventId: string; type: string }) | undefined,
      config: () => {
        const { webhooks, sandbox } = services.config;
        // A lease outlives the longest invocation (its start-up, its wall time, the supervisor's grace).
        return { ...webhooks, concurrency: HANDLER_CONCURRENCY, leaseMs: Math.max(webhooks.lease, sandbox.startup_time + sandbox.wall_time + 10_000) };
      },
    });
    const events = createEvents({
      database: services.store.database,
      log,
      subscriptions: services.subscriptions,
      deliveries: services.deliveries,
      handlerRuns,
    });
    services.events = events;
    services.handlerRuns = handlerRuns;
    // The last stop's leases back; runs owed from before this start (retries due, leases of a process that died) go out now.
    await handlerRuns.start();
    // (Deliveries stored due at ingest are announced as deliveries alone: no handler run is owed.)
    services.processes?.onDue((deliveriesOnly) => {
      if (!deliveriesOnly) handlerRuns.wake();
    });
    // Several nodes may share a PostgreSQL store: the others schedule runs and leave leases to run
    // out, and nothing tells this node; it looks every second. (On SQLite one node owns the store
    // and its supervisor tells its processes: processes.onDue.)
    const poll = services.store.shared ? setInterval(() => handlerRuns.wake(), 1_000) : undefined;
    poll?.unref();
    return () => {
      if (poll) clearInterval(poll);
      return handlerRuns.stop(services.config.server.shutdown_timeout);
    };
  },
  routes(app, services) {
    eventRoutes(app, services);
  },
});
