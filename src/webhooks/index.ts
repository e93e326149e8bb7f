/**
 * Webhook delivery: signing and verification, the retry policy, the durable queue and its sender,
 * signing secrets, and the reference receiver. Attaches `services.webhooks` (secrets, called by
 * the installations module) and `services.deliveries` (the queue, called by events ingest and the
 * management API); both are built in service.ts.
 */
import { defineModule } from '../module/contract.ts';
import { createWebhooks } from './service.ts';
import { webhookRoutes } from './routes.ts';
import type { Deliveries, WebhooksService } from './contracts.ts';

export { signPayload, signatureHeader, verifySignature, parseSignatureHeader, SIGNATURE_HEADER, DEFAULT_TOLERANCE_SEC } from './signature.ts';
export type { Verification } from './signature.ts';
export { SIGNATURE_SCHEMES, DEFAULT_SIGNATURE_SCHEME, signatureSchemeOf, signatureHeaderName, type SignatureScheme } from './schemes.ts';
export { STANDARD_HEADERS, standardKey, standardSecretProblem, signStandard, standardSignatureHeader, verifyStandardSignature } from './standard-webhooks.ts';
export {
  retryDelay,
  classifyOutcome,
  nextAttemptDelay,
  parseRetryAfter,
  ATTEMPT_OUTCOMES,
  type AttemptOutcome,
  type Outcome,
  type RetryConfig,
} from './policy.ts';
export { createReceiver, type ReceiverOptions, type ReceivedEvent } from './receiver.ts';
export { webhooksMigrations } from './schema.ts';
export { parseTimeParam, replayWindow, replaySelection, REPLAYABLE_STATUSES } from './time.ts';
export { deliverySchema, deliveryDetailSchema, attemptSchema, endpointQuery, type ReplayAnswer } from './api.ts';
export { endpointParam, maskSecret } from './routes.ts';
export {
  DELIVERY_STATUSES,
  type Delivery,
  type DeliveryDetail,
  type Attempt,
  type DeliveryStatus,
  type DeliveryFilter,
  type AttemptFeedItem,
  type ReplayFilter,
} from './queue.ts';
export { createQueue, newDeliveryId, originOf, type Queue } from './queue.ts';
export { deliveryStats, statsQueries, MAX_STATS_DELIVERIES, type DeliveryStats, type EndpointStats, type StatsBucket, type StatsFilter } from './stats.ts';
export type { RecordedAttempt } from './sender.ts';
export { newSecret } from './secrets.ts';

export type { WebhooksService, Subscription, Deliveries, InstallationLifecycle } from './contracts.ts';
export { createWebhooks, shareOf, type WebhooksDeps } from './service.ts';
export { deliveryBody, sentEventId } from './body.ts';

declare module '../module/contract.ts' {
  interface Capabilities {
    webhooks?: WebhooksService;
    deliveries?: Deliveries;
  }
}

export const webhooksModule = defineModule({
  name: 'webhooks',
  provides: ['webhooks', 'deliveries'],
  // A server without the installations module delivers to the subscriptions a stand-in attaches.
  uses: ['installations', 'subscriptions'],
  async start(services) {
    const service = await createWebhooks({
      database: services.store.database,
      log: services.log.child({ module: 'webhooks' }),
      config: () => services.config.webhooks,
      // Read at each use: attached by the installations module (absent in a server without it).
      subscriptions: () => services.subscriptions,
      processes: services.processes,
      health: services.store.health,
    });
    services.webhooks = service.webhooks;
    services.deliveries = service.deliveries;
    // Secrets, endpoint URL, hold/release and cancel follow the installations' lifecycle, in each step's transaction.
    const unfollow = services.installations?.onChange(service.follow);
    service.start();
    return () => {
      unfollow?.();
      return service.stop(services.config.server.shutdown_timeout);
    };
  },
  routes(app, services) {
    webhookRoutes(app, services);
  },
});
