/**
 * Events: ingest (`POST /api/v1/events`), validation against spec 2.8, fan-out to webhook
 * deliveries (same transaction) and to integrations' event handlers (after commit).
 * Attaches `services.events`.
 */
import type { Module, Services } from '../services.ts';
import type { Deliveries, Subscription } from '../webhooks/index.ts';
import { createEvents } from './service.ts';
import { eventRoutes } from './routes.ts';

export { validateEventPayload, samplePayload, setPath, newEventId, EVENT_TYPES, WEBHOOK_EVENT_TYPES } from './types.ts';
export { createEvents, type Events, type StoredEvent, type IngestResult } from './service.ts';
export { eventsMigrations } from './schema.ts';

export const eventsModule: Module = {
  name: 'events',
  start(services: Services) {
    services.events = createEvents({
      db: services.store.db,
      log: services.log.child({ module: 'events' }),
      // Read at each ingest: modules may attach these after us.
      subscriptions: () => services.subscriptions as { forEventType(type: string): Subscription[] } | undefined,
      deliveries: () => services.deliveries as Deliveries | undefined,
      eventHandlers: () => services.eventHandlers as { dispatch(event: object, eventId: string): Promise<void> } | undefined,
    });
  },
  routes: eventRoutes,
};
