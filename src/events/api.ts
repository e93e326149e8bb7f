/**
 * The management API of events and handler runs, declared once (src/schema): the requests routes.ts
 * validates, and the answers /openapi.json describes. The answers' shapes are the service's and
 * handler-views.ts's types; the checks at the end fail to type-check when they drift apart.
 */
import { dateTime, any, array, boolean, named, nullable, number, object, oneOf, optional, string, union, type Infer, type Schema } from '../schema/index.ts';
import { enumParam, pageQuery, text, timeField, timeQuery, requestBody } from '../http/params.ts';
import { deliverySchema, DELIVERY_STATUSES } from '../webhooks/index.ts';
import type { BatchResult, IngestResult, StoredEvent } from './service.ts';
import type { HandlerRun } from './handler-views.ts';
import { EVENT_TYPES, MAX_BATCH_EVENTS } from './types.ts';

/** A platform event as sent: its type says which other fields it has (validated by type at ingest). */
export const eventSchema = named(
  'Event',
  object(
    {
      eventId: optional(string({ min: 1, max: 200, pattern: /^[A-Za-z0-9_.:-]{1,200}$/, description: 'the dedup key; generated when left out' })),
      type: oneOf(EVENT_TYPES, { description: 'the platform event type' }),
      installationId: optional(
        string({ min: 1, max: 200, description: 'only for this installation: its webhook delivery or its handler run (an id no installation has: none)' }),
      ),
    },
    { passthrough: true, description: 'A platform event: eventId, type and the fields of its type' },
  ),
);

/**
 * What POST /api/v1/events takes: one JSON object, or an array, as readJsonObjectOrArray read it
 * (it refused anything else, so nothing is left to check here, and the hot path copies nothing).
 * Each event is validated by the service, by its type; a batch's items one by one (refused items
 * do not refuse the others). /openapi.json shows `ingestDocumented`.
 */
export const ingestBody: Schema<Record<string, unknown> | unknown[]> = { kind: 'any', check: (v) => v as Record<string, unknown> | unknown[] };
export const ingestDocumented = union([eventSchema, array(eventSchema, { min: 1, max: MAX_BATCH_EVENTS })]);

const fannedOut = array(object({ id: string(), installationId: string() }));

export const ingestResultSchema = named(
  'IngestResult',
  object({
    eventId: string(),
    type: string(),
    duplicate: boolean({ description: 'the eventId was ingested before: nothing new is queued' }),
    deliveries: fannedOut,
    handlers: { ...fannedOut, description: 'one handler run per installation whose integration handles the event' },
  }),
);

const problem = object({
  where: string(),
  message: string(),
  hint: optional(string()),
  severity: optional(oneOf(['error', 'warning'])),
  needsEnv: optional(string()),
});
const errorBody = object({
  code: string(),
  message: string(),
  hint: optional(string()),
  where: optional(string()),
  problems: optional(array(problem)),
});

export const batchResultSchema = named(
  'BatchResult',
  object(
    {
      stored: number({ integer: true, description: 'new events stored' }),
      duplicates: number({ integer: true, description: 'eventIds seen before, or earlier in the same batch' }),
      rejected: number({ integer: true, description: 'items refused (nothing of them stored)' }),
      results: array(
        union([
          object({ ...ingestResultSchema.shape, index: number({ integer: true }), status: oneOf([202, 200]) }),
          object({ index: number({ integer: true }), status: oneOf([400, 413]), error: errorBody }),
        ]),
        { description: 'one per item, in the order sent' },
      ),
    },
    { description: 'The answer to a batch: counts, and one result per item in the order sent' },
  ),
);

export const ingestAnswer = union([ingestResultSchema, batchResultSchema]);

const storedEventFields = {
  eventId: string(),
  type: string(),
  installationId: nullable(string()),
  receivedAt: dateTime(),
  deliveryCount: number({ integer: true }),
};

export const storedEventSchema = named(
  'StoredEvent',
  object(storedEventFields, { description: 'An event as ingested (its payload: GET /api/v1/events/{id})' }),
);

export const eventsQuery = object({
  type: text('only this event type'),
  installation: text('only events for this installation'),
  since: timeQuery('received since'),
  until: timeQuery('received until'),
  ...pageQuery,
});

export const eventListSchema = object({ events: array(storedEventSchema), nextCursor: nullable(string()) });

export const handlerRunSchema = named(
  'HandlerRun',
  object({
    id: string(),
    eventId: string(),
    eventType: string(),
    installationId: string(),
    integration: string(),
    status: oneOf(DELIVERY_STATUSES, {
      description: 'delivered: the handler ran without a fault; failed: every attempt failed (replayable); cancelled: the installation is gone',
    }),
    attemptCount: number({ integer: true, description: 'attempts made so far (each is an invocation carrying the eventId and installationId)' }),
    maxAttempts: number({ integer: true }),
    nextAttemptAt: nullable(dateTime()),
    running: boolean({ description: 'a process holds its lease' }),
    lastInvocation: nullable(string({ description: 'request id of the latest attempt (switchyard logs show <id>)' })),
    lastError: nullable(string()),
    createdAt: dateTime(),
    updatedAt: dateTime(),
    completedAt: nullable(dateTime()),
  }),
);

export const eventDetailSchema = object({
  ...storedEventFields,
  payload: any('the event as ingested'),
  deliveries: array(deliverySchema),
  handlerRuns: array(handlerRunSchema),
});

/** One event as GET /api/v1/events/{id} answers it (the CLI's reading of it, online or offline). */
export type EventDetail = Infer<typeof eventDetailSchema>;

export const handlerRunsQuery = object({
  status: enumParam(DELIVERY_STATUSES, DELIVERY_STATUSES.join(', ')),
  type: text('event type'),
  installation: text('installation id'),
  event: text('event id'),
  since: timeQuery('created since'),
  until: timeQuery('created until'),
  ...pageQuery,
});

export const handlerRunListSchema = object({ handlerRuns: array(handlerRunSchema), nextCursor: nullable(string()) });

/** `{failed: true, since, until?, installation?}`: the window of failed handler runs to run again. */
export const handlerReplayBody = requestBody({
  failed: oneOf([true], { description: 'only failed handler runs are replayed' }),
  since: timeField('created since'),
  until: optional(timeField('created until; default: now')),
  installation: optional(string({ min: 1, description: 'only runs of this installation' })),
});

export const handlerReplayAnswer = object({ replayed: number({ integer: true }), handlerRuns: array(string(), { description: 'ids of the runs replayed' }) });

// The answers' shapes and the service's types are one: each must be assignable to the other.
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
type Assert<T extends true> = T;
export type SchemasMatchTypes = [
  Assert<Same<Infer<typeof handlerRunSchema>, HandlerRun>>,
  Assert<Same<Infer<typeof storedEventSchema>, StoredEvent>>,
  Assert<Same<Infer<typeof ingestResultSchema>, IngestResult>>,
  Assert<Same<Infer<typeof batchResultSchema>['results'][number]['status'], BatchResult['results'][number]['status']>>,
];
