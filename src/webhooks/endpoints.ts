/**
 * What the webhooks module reads of the installations' webhook endpoints (attached by the
 * installations module, possibly after this one starts, so read at each use): where an
 * installation's webhook points now, whether it points nowhere any more, and how it signs.
 */
import type { Subscription } from './contracts.ts';
import { DEFAULT_SIGNATURE_SCHEME, type SignatureScheme } from './schemes.ts';

/** Where installations' webhooks point, and how they sign (undefined in a server without the installations module). */
export type Subscriptions =
  | {
      forEventType(type: string): Subscription[];
      urlOf?(installationId: string): string | undefined;
      /** The URL of an active webhook installation (undefined when it is paused, has none, or is gone). */
      activeUrlOf?(installationId: string): string | undefined;
      schemeOf?(installationId: string): SignatureScheme;
    }
  | undefined;

export interface Endpoints {
  /**
   * The installation's URL now, whether or not it still takes this event type: a replay or a
   * manual retry the person asked for goes where the installation points today.
   */
  currentUrl(d: { eventType: string; installationId: string }): string | undefined;
  /** Whether the installation has no URL any more (the installations module knows; without it, nothing is refused). */
  urlGone(installationId: string): boolean;
  /** How the installation signs now: read at each attempt, so a change of scheme applies from the next one. */
  schemeOf(installationId: string): SignatureScheme;
  /**
   * Whether a delivery leased and waiting for a slot may go: its installation is active and still
   * points to `url` (without the installations module: yes).
   */
  sendable(d: { installationId: string; url: string }): boolean;
}

export function endpointsOf(subscriptions: () => Subscriptions): Endpoints {
  return {
    currentUrl(d) {
      const subs = subscriptions();
      return subs?.urlOf?.(d.installationId) ?? subs?.forEventType(d.eventType).find((s) => s.installationId === d.installationId)?.url;
    },
    urlGone(installationId) {
      const subs = subscriptions();
      return subs?.urlOf !== undefined && subs.urlOf(installationId) === undefined;
    },
    schemeOf: (installationId) => subscriptions()?.schemeOf?.(installationId) ?? DEFAULT_SIGNATURE_SCHEME,
    sendable(d) {
      const subs = subscriptions();
      return subs?.activeUrlOf === undefined || subs.activeUrlOf(d.installationId) === d.url;
    },
  };
}
