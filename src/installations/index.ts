/**
 * Installations: lifecycle, configuration edits validated against the manifest, tokens and
 * scopes. Attaches `services.installations`, `services.subscriptions` (webhook fan-out) and
 * `services.resolveToken` (installation tokens on /api/v1).
 */
import { defineModule } from '../module/contract.ts';
import type { SignatureScheme, Subscription } from '../webhooks/index.ts';
import { createInstallations, type Installations } from './service.ts';
import { installationRoutes } from './routes.ts';
import { serverOrganizations } from './visibility.ts';
import { generationsFor } from '../store/generations.ts';

export { createInstallations, RESERVED_CONFIGURATION_KEYS, newEventId, concerns, configurationSection } from './service.ts';
export type {
  Installation,
  InstallationStatus,
  InstallationTarget,
  Installations,
  Change,
  InstallationChange,
  ChangeKind,
  ChangeListener,
  CommittedListener,
} from './service.ts';
export { scopesAllow, missingScope, EVENT_SCOPES } from './scopes.ts';
export { WEBHOOK_INTEGRATION, WEBHOOK_EVENT_TYPES, parseEventTypes } from './webhook.ts';
export { installationsMigrations } from './schema.ts';
export { installationSchema, type InstallationView, type CatalogueEntry, type LinkAnswer } from './api.ts';
export { installRefusal, serverOrganizations, type Installer } from './visibility.ts';

/** The webhook installations subscribed to an event type, and where each one's deliveries go now. */
export interface Subscriptions {
  forEventType(type: string): Subscription[];
  urlOf?(installationId: string): string | undefined;
  /** The URL of an active webhook installation (undefined when it is paused, has none, or is gone). */
  activeUrlOf?(installationId: string): string | undefined;
  /** How the installation's deliveries are signed now (its `signature_scheme`). */
  schemeOf?(installationId: string): SignatureScheme;
  /**
   * Resolves once the answers above include what other processes changed until now (they are kept
   * in memory and answer synchronously): awaited before an event's fan-out.
   */
  fresh?(): Promise<void>;
}

declare module '../module/contract.ts' {
  interface Capabilities {
    installations?: Installations;
    /** The webhook fan-out reads the subscriptions here (the installations module, or a test's stand-in). */
    subscriptions?: Subscriptions;
  }
}

export const installationsModule = defineModule({
  name: 'installations',
  provides: ['installations', 'subscriptions'],
  needs: ['registry'],
  // Its render route calls services.runtime when the server has one (routes are added after every
  // module started); not listed in `uses`, since the runtime needs this module (a cycle).
  async start(services) {
    const registry = services.registry;
    const installations = await createInstallations({
      database: services.store.database,
      generations: generationsFor(services.store),
      manifestOf: (name) => registry.get(name)?.manifest,
      dialectOf: (name) => registry.get(name)?.dialect,
      log: services.log.child({ module: 'installations' }),
      organizations: serverOrganizations(services.config),
    });
    services.installations = installations;
    services.resolveToken = installations.resolveToken;
    services.subscriptions = {
      forEventType: installations.webhookSubscriptions,
      urlOf: installations.webhookUrl,
      activeUrlOf: installations.webhookActiveUrl,
      schemeOf: installations.webhookScheme,
      fresh: installations.fresh,
    };
  },
  routes(app, services) {
    installationRoutes(app, services);
  },
});
