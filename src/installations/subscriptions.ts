/**
 * The installations not uninstalled, in memory, and the webhook subscriptions derived from them:
 * what ingest reads synchronously for every event (the webhook installations subscribed to its
 * type, the active installations whose handlers it may be owed) and every attempt (a webhook's URL
 * and scheme). Read at start; a step sets its installation once it commits; another process's
 * change reads them all again (reload).
 */
import type { Database } from '../store/contract.ts';
import { signatureSchemeOf, type SignatureScheme } from '../webhooks/index.ts';
import { fromRow, lists, type Installation } from './rows.ts';
import { WEBHOOK_INTEGRATION, parseEventTypes } from './webhook.ts';

/** How a webhook installation's deliveries are signed (its `signature_scheme` setting). */
export const schemeOf = (i: Installation): SignatureScheme => signatureSchemeOf(i.configuration.signature_scheme);

export interface LiveInstallations {
  /** One not uninstalled, or undefined. */
  get(id: string): Installation | undefined;
  /** One installation as a committed step left it (an uninstalled one goes). */
  set(installation: Installation): void;
  /** Read them all again (one reading at a time; again if a step committed meanwhile). */
  reload(): Promise<void>;
  /** The active installations, oldest first. */
  active(): Installation[];
  /** The webhook installations subscribed to an event type: active ones first, then paused ones. */
  subscribers(type: string): Array<{ installationId: string; url: string }>;
  /** A webhook installation's URL now, whatever event types it takes. */
  url(installationId: string): string | undefined;
  /** An active webhook installation's URL now (undefined when it is paused, has none, or is gone). */
  activeUrl(installationId: string): string | undefined;
  /** How a webhook installation signs now (the default when it is not known). */
  scheme(installationId: string): SignatureScheme;
}

type WebhookEndpoint = { installationId: string; url: string; types: string[]; scheme: SignatureScheme };
// Active ones, and paused ones with a URL: their deliveries are stored held and wait for the resume.
const webhookEndpointOf = (i: Installation): WebhookEndpoint | undefined =>
  i.integration === WEBHOOK_INTEGRATION && (i.status === 'active' || (i.status === 'paused' && typeof i.configuration.webhook_url === 'string'))
    ? { installationId: i.id, url: String(i.configuration.webhook_url), types: parseEventTypes(i.configuration.event_types), scheme: schemeOf(i) }
    : undefined;
const byAge = (a: Installation, b: Installation) => (a.createdAt < b.createdAt ? -1 : a.createdAt > b.createdAt ? 1 : a.id < b.id ? -1 : a.id > b.id ? 1 : 0);

/** Empty until the first reload. */
export function createLiveInstallations(database: Database): LiveInstallations {
  let live = new Map<string, Installation>();
  /** What is derived from `live`, made again on the first use after it changed. */
  let derived: { endpoints: WebhookEndpoint[]; byId: Map<string, WebhookEndpoint>; active: Installation[] } | undefined;
  /** Moves with every installation set here: a reading of them all that began before it is read again. */
  let liveEpoch = 0;
  function derive() {
    if (!derived) {
      const all = [...live.values()].sort(byAge);
      const active = all.filter((i) => i.status === 'active');
      // Active ones first, then paused ones, each in the order they were made.
      const endpoints = [...active, ...all.filter((i) => i.status === 'paused')].map(webhookEndpointOf).filter((e) => e !== undefined);
      derived = { endpoints, byId: new Map(endpoints.map((e) => [e.installationId, e])), active };
    }
    return derived;
  }
  let reloading: Promise<void> | undefined;
  return {
    get: (id) => live.get(id),
    set(i) {
      liveEpoch++;
      if (i.status === 'uninstalled') live.delete(i.id);
      else live.set(i.id, i);
      derived = undefined;
    },
    reload() {
      return (reloading ??= (async () => {
        for (;;) {
          const at = liveEpoch;
          const rows = await database.all(lists.live);
          if (at !== liveEpoch) continue; // a step committed meanwhile: read again
          live = new Map(rows.map((r) => [r.id, fromRow(r)]));
          derived = undefined;
          return;
        }
      })().finally(() => (reloading = undefined)));
    },
    active: () => derive().active,
    subscribers: (type) =>
      derive()
        .endpoints.filter((s) => s.types.includes(type))
        .map(({ installationId, url }) => ({ installationId, url })),
    url: (installationId) => derive().byId.get(installationId)?.url,
    activeUrl: (installationId) => (live.get(installationId)?.status === 'active' ? derive().byId.get(installationId)?.url : undefined),
    scheme(installationId) {
      const i = live.get(installationId);
      return i ? schemeOf(i) : signatureSchemeOf(undefined);
    },
  };
}
