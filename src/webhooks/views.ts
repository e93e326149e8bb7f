/**
 * The JSON shapes of deliveries and attempts as the management API shows them (documented in
 * docs/inspection.md, "JSON shapes"). Free of Node imports so the web console's browser code shares them instead of copying.
 */
import type { AttemptOutcome } from './policy.ts';

export { ATTEMPT_OUTCOMES, type AttemptOutcome } from './policy.ts';

/**
 * `pending` (no attempt yet), `retrying` (an automatic retry is scheduled), `held` (its installation
 * is paused: not attempted until resume), `delivered`, `failed` (no automatic attempt left: the
 * last one was recorded `failed`), `cancelled` (its installation was uninstalled).
 */
export const DELIVERY_STATUSES = ['pending', 'retrying', 'held', 'delivered', 'failed', 'cancelled'] as const;
export type DeliveryStatus = (typeof DELIVERY_STATUSES)[number];

/** One delivery as the management API shows it (stable shape, documented in docs/inspection.md). */
export interface Delivery {
  id: string;
  eventId: string;
  eventType: string;
  installationId: string;
  url: string;
  status: DeliveryStatus;
  /** Every attempt recorded: automatic, manual and interrupted, before and after replays. */
  attemptCount: number;
  /** Automatic attempts of the current schedule (since the delivery was created or last replayed), counted against maxAttempts. */
  scheduledAttempts: number;
  maxAttempts: number;
  nextAttemptAt: string | null;
  /** Status `held`: the installation is paused; the delivery waits, it is not dropped. */
  held: boolean;
  lastStatus: number | null;
  lastError: string | null;
  createdAt: string;
  updatedAt: string;
  completedAt: string | null;
}

export interface Attempt {
  number: number;
  manual: boolean;
  startedAt: string;
  durationMs: number | null;
  url: string;
  signatureHeader: string | null;
  status: number | null;
  outcome: AttemptOutcome;
  error: string | null;
  errorCode: string | null;
  responseExcerpt: string | null;
  responseTruncated: boolean;
  /** When the retry this attempt scheduled is due (null when none). */
  nextAttemptAt: string | null;
}

export interface DeliveryDetail extends Delivery {
  /** The exact body bytes sent (UTF-8 JSON text), and the same parsed. */
  body: string;
  payload: unknown;
  /** The signature header value of the latest attempt: X-Platform-Signature's or webhook-signature's (see signatureHeaderName in schemes.ts). */
  signatureHeader: string | null;
  attempts: Attempt[];
}

// Delivery statistics (GET /api/v1/deliveries/stats, computed in stats.ts).

/** Nearest-rank percentiles, in milliseconds, over `count` values. */
export interface Percentiles {
  count: number;
  p50: number;
  p95: number;
  max: number;
}

export interface StatsBucket {
  /** Start of the bucket (ISO-8601). */
  at: string;
  /** Deliveries created in the bucket, by their status now (any status string the store holds). */
  counts: Record<string, number>;
  /** Ingest to delivery, of the bucket's delivered deliveries. */
  latency: Percentiles | null;
  /** Duration of the HTTP attempts to the endpoint that started in the bucket (attempts of deliveries created in the window). */
  response: Percentiles | null;
}

export interface EndpointStats {
  endpoint: string;
  total: number;
  byStatus: Record<string, number>;
  buckets: StatsBucket[];
}

export interface DeliveryStats {
  since: string;
  until: string;
  bucketMs: number;
  endpoints: EndpointStats[];
}
