/**
 * Installations: lifecycle, configuration edits validated against the manifest, tokens and
 * scopes. Attaches `services.installations`, `services.subscriptions` (webhook fan-out) and
 * `services.resolveToken` (installation tokens on /api/v1).
 */
import type { Module, Services } from '../server/services.ts';
import type { Registry } from '../registry/index.ts';
import { createInstallations, type Installations } from './service.ts';
import { installationRoutes } from './routes.ts';

export { createInstallations, RESERVED_CONFIGURATION_KEYS, newEventId, concerns, configurationSection } from './service.ts';
export type { Installation, InstallationStatus, InstallationTarget, Installations, Change } from './service.ts';
export { scopesAllow, EVENT_SCOPES } from './scopes.ts';
export { WEBHOOK_INTEGRATION, WEBHOOK_EVENT_TYPES, parseEventTypes } from './webhook.ts';
export { installationsMigrations } from './schema.ts';

export const installationsModule: Module = {
  name: 'installations',
  start(services: Services) {
    const registry = services.registry as Registry;
    const installations = createInstallations({
      db: services.store.db,
      manifestOf: (name) => registry.get(name)?.manifest,
      dialectOf: (name) => registry.get(name)?.dialect,
    });
    services.installations = installations;
    services.resolveToken = installations.resolveToken;
    services.subscriptions = { forEventType: installations.webhookSubscriptions, urlOf: installations.webhookUrl };
  },
  routes: installationRoutes,
};

export function installationsOf(services: Services): Installations {
  return services.installations as Installations;
}
