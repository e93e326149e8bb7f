/**
 * The management API of deliveries and signing secrets, declared once (src/schema): the requests
 * routes.ts validates, and the answers /openapi.json describes and the CLI's types are drawn from.
 * The answers' shapes are views.ts's interfaces (the browser console shares those without this
 * file); the checks at the end fail to type-check when the two drift apart.
 */
import { dateTime, array, boolean, named, nullable, number, object, oneOf, optional, record, string, any, withDefault, type Infer } from '../schema/index.ts';
import { enumParam, flag, pageQuery, param, text, timeField, timeQuery, requestBody } from '../http/params.ts';
import { formatDuration, MAX_DURATION_MS, parseDuration } from '../schema/index.ts';
import { quoted } from '../schema/time.ts';
import { REPLAYABLE_STATUSES } from './time.ts';
import { MAX_SECRET_LENGTH } from './secrets.ts';
import { originKey } from './queue-rows.ts';
import { ATTEMPT_OUTCOMES, DELIVERY_STATUSES, type Attempt, type Delivery, type DeliveryDetail, type DeliveryStats } from './views.ts';

const deliveryFields = {
  id: string(),
  eventId: string(),
  eventType: string(),
  installationId: string(),
  url: string({ description: 'shown without credentials (https://***@host/)' }),
  status: oneOf(DELIVERY_STATUSES, { description: 'held: its installation is paused; sent when it resumes' }),
  attemptCount: number({ integer: true, description: 'every attempt recorded (automatic, manual, interrupted), replays included' }),
  scheduledAttempts: number({ integer: true, description: 'automatic attempts of the current schedule (since created or last replayed), against maxAttempts' }),
  maxAttempts: number({ integer: true }),
  nextAttemptAt: nullable(dateTime()),
  held: boolean({ description: 'status is held' }),
  lastStatus: nullable(number({ integer: true })),
  lastError: nullable(string()),
  createdAt: dateTime(),
  updatedAt: dateTime(),
  completedAt: nullable(dateTime()),
};

export const deliverySchema = named('Delivery', object(deliveryFields));

export const attemptSchema = named(
  'Attempt',
  object({
    number: number({ integer: true }),
    manual: boolean(),
    startedAt: dateTime(),
    durationMs: nullable(number()),
    url: string(),
    signatureHeader: nullable(string({ description: 'the signature header value sent: X-Platform-Signature (t=…,v1=…) or webhook-signature (v1,…)' })),
    status: nullable(number({ integer: true })),
    outcome: oneOf(ATTEMPT_OUTCOMES, {
      description:
        'retry: failed, and the next automatic attempt is scheduled (nextAttemptAt); failed: failed, and no retry follows from it (a permanent answer, the last attempt of a failed delivery, a manual attempt); interrupted: the server stopped under it, sent again',
    }),
    error: nullable(string()),
    errorCode: nullable(string()),
    responseExcerpt: nullable(string()),
    responseTruncated: boolean(),
    nextAttemptAt: nullable(dateTime('when the retry this attempt scheduled is due')),
  }),
);

export const deliveryDetailSchema = named(
  'DeliveryDetail',
  object({
    ...deliveryFields,
    body: string({ description: 'the exact bytes sent' }),
    payload: any('the body, parsed'),
    signatureHeader: nullable(
      string({
        description: 'the signature header value of the latest attempt: X-Platform-Signature (t=…,v1=…) or, under standard-webhooks, webhook-signature (v1,…)',
      }),
    ),
    attempts: array(attemptSchema),
  }),
);

const percentiles = named(
  'Percentiles',
  nullable(object({ count: number({ integer: true }), p50: number(), p95: number(), max: number() }, { description: 'nearest-rank percentiles in ms' })),
);

export const deliveryStatsSchema = named(
  'DeliveryStats',
  object({
    since: dateTime('start of the first bucket'),
    until: dateTime(),
    bucketMs: number({ integer: true }),
    endpoints: array(
      object({
        endpoint: string({ description: 'URL origin' }),
        total: number({ integer: true }),
        byStatus: record(number({ integer: true })),
        buckets: array(
          object({
            at: dateTime(),
            counts: record(number({ integer: true }), { description: 'deliveries created in the bucket, by status now' }),
            latency: { ...percentiles, description: 'ingest to delivery (ms) of the delivered ones' },
            response: { ...percentiles, description: 'attempt durations (ms) of attempts started in the bucket' },
          }),
        ),
      }),
      { description: 'busiest first' },
    ),
  }),
);

/**
 * An endpoint: a URL origin (`https://hooks.example.com`, the unit deliveries are grouped and
 * limited by); a whole URL is taken as its origin.
 */
export const endpointQuery = (description: string) =>
  param<string>('endpoint-param', { type: 'string', description }, (v) => {
    let url: URL | undefined;
    try {
      url = new URL(v);
    } catch {
      url = undefined;
    }
    if (!url || (url.protocol !== 'http:' && url.protocol !== 'https:'))
      return { error: `must be an http(s) origin such as https://hooks.example.com, got ${JSON.stringify(v)}` };
    return originKey(url.origin);
  });

export const deliveriesQuery = object({
  status: enumParam(DELIVERY_STATUSES, DELIVERY_STATUSES.join(', ')),
  type: text('event type'),
  installation: text('installation id'),
  event: text('event id'),
  endpoint: endpointQuery('URL origin the deliveries go to (https://hooks.example.com; a whole URL counts as its origin)'),
  since: timeQuery('created since'),
  until: timeQuery('created until'),
  ...pageQuery,
});

export const deliveryListSchema = object({ deliveries: array(deliverySchema), nextCursor: nullable(string()) });

export const replayBody = requestBody(
  {
    status: optional(oneOf(REPLAYABLE_STATUSES)),
    failed: optional(oneOf([true], { description: 'the same as status failed' })),
    since: optional(timeField('created since; default: from the first delivery')),
    until: optional(timeField('created until; default: now')),
    installation: optional(string({ min: 1, description: 'only deliveries of this installation' })),
    type: optional(string({ min: 1, description: 'only deliveries of this event type' })),
    endpoint: optional(string({ description: 'only deliveries to this URL origin' })),
    dryRun: withDefault(boolean({ description: 'change nothing; answer the deliveries a replay would take now' }), false),
  },
  { description: 'status, or failed: true (the same as status failed)' },
);

export const replayAnswer = object({
  replayed: number({ integer: true, description: '0 on a dry run' }),
  deliveries: array(string(), { description: 'ids replayed, in event order (on a dry run: that would be)' }),
  held: optional(array(string(), { description: 'those held: their installation is paused' })),
  dryRun: optional(boolean()),
  matched: optional(number({ integer: true, description: 'dry run: how many a replay would take' })),
});
/** The CLI's reading of a replay's answer. */
export type ReplayAnswer = Infer<typeof replayAnswer>;

/** A duration from a second to MAX_DURATION_MS (`1m`, `15m`): the stats' bucket size in whole ms. */
const bucketQuery = param<number>('bucket-param', { type: 'string', description: 'bucket size: 1m (default), 15m, 1h ...; at most 1440 buckets' }, (v) => {
  const ms = parseDuration(v);
  if (ms === undefined || Number.isNaN(ms) || ms < 1000) return { error: `must be a duration of at least 1s (1m, 15m, 1h), got ${quoted(v)}` };
  if (ms > MAX_DURATION_MS) return { error: `must be at most ${formatDuration(MAX_DURATION_MS)}, got ${quoted(v)}` };
  return Math.round(ms);
});

export const statsQuery = object({
  since: timeQuery('from (default 1h ago)'),
  until: timeQuery('to (default now)'),
  bucket: bucketQuery,
  endpoint: endpointQuery('only this URL origin'),
  installation: text('only this installation'),
});

export const retryAnswer = object({ attempt: attemptSchema, delivery: optional(deliveryDetailSchema) });

export const secretQuery = object({ reveal: withDefault(flag('show the secrets whole'), false) });

export const secretAnswer = object({
  installationId: string(),
  secret: string({ description: 'masked (whsec_…Ab3x) unless revealed' }),
  revealed: boolean(),
  createdAt: dateTime(),
  previous: array(object({ secret: string(), expiresAt: dateTime() }), { description: 'older secrets still signing until they expire' }),
});

export const rotateBody = requestBody({ secret: optional(string({ max: MAX_SECRET_LENGTH, description: 'use this secret instead of a generated one' })) });

export const rotateAnswer = object({ installationId: string(), secret: string({ description: 'the new secret, shown once' }), previousExpiresAt: dateTime() });

// The answers' shapes and views.ts's interfaces are one: each must be assignable to the other.
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
type Assert<T extends true> = T;
export type SchemasMatchViews = [
  Assert<Same<Infer<typeof deliverySchema>, Delivery>>,
  Assert<Same<Infer<typeof attemptSchema>, Attempt>>,
  Assert<Same<Infer<typeof deliveryDetailSchema>, DeliveryDetail>>,
  Assert<Same<Infer<typeof deliveryStatsSchema>, DeliveryStats>>,
];
