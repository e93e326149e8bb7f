/** The webhooks module's part of /openapi.json: deliveries, their attempts and stats, signing secrets. */
import { errors, idParam, json, list, pageQuery, pathParam, q, ref, timeParams, body, type OpenApiPart } from '../http/openapi.ts';
import { ATTEMPT_OUTCOMES, DELIVERY_STATUSES } from './views.ts';

export const webhooksOpenApi: OpenApiPart = {
  schemas: {
    Delivery: {
      type: 'object',
      description: 'URLs are shown without credentials (https://***@host/)',
      properties: {
        id: { type: 'string' },
        eventId: { type: 'string' },
        eventType: { type: 'string' },
        installationId: { type: 'string' },
        url: { type: 'string' },
        status: { enum: [...DELIVERY_STATUSES], description: 'held: its installation is paused; sent when it resumes' },
        attemptCount: { type: 'integer', description: 'every attempt recorded (automatic, manual, interrupted), replays included' },
        scheduledAttempts: { type: 'integer', description: 'automatic attempts of the current schedule (since created or last replayed), against maxAttempts' },
        maxAttempts: { type: 'integer' },
        nextAttemptAt: { type: ['string', 'null'], format: 'date-time' },
        held: { type: 'boolean', description: 'status is held' },
        lastStatus: { type: ['integer', 'null'] },
        lastError: { type: ['string', 'null'] },
        createdAt: { type: 'string', format: 'date-time' },
        updatedAt: { type: 'string', format: 'date-time' },
        completedAt: { type: ['string', 'null'], format: 'date-time' },
      },
    },
    Attempt: {
      type: 'object',
      properties: {
        number: { type: 'integer' },
        manual: { type: 'boolean' },
        startedAt: { type: 'string', format: 'date-time' },
        durationMs: { type: ['number', 'null'] },
        url: { type: 'string' },
        signatureHeader: { type: ['string', 'null'] },
        status: { type: ['integer', 'null'] },
        outcome: {
          enum: [...ATTEMPT_OUTCOMES],
          description: 'retry: failed, and the next automatic attempt is scheduled (nextAttemptAt); failed: failed, and no retry follows from it (a permanent answer, the last attempt of a failed delivery, a manual attempt); interrupted: the server stopped under it, sent again',
        },
        error: { type: ['string', 'null'] },
        errorCode: { type: ['string', 'null'] },
        responseExcerpt: { type: ['string', 'null'] },
        responseTruncated: { type: 'boolean' },
        nextAttemptAt: { type: ['string', 'null'], format: 'date-time' },
      },
    },
    DeliveryDetail: {
      allOf: [
        ref('Delivery'),
        { type: 'object', properties: { body: { type: 'string', description: 'the exact bytes sent' }, payload: {}, signatureHeader: { type: ['string', 'null'] }, attempts: { type: 'array', items: ref('Attempt') } } },
      ],
    },
    Percentiles: {
      type: ['object', 'null'],
      properties: { count: { type: 'integer' }, p50: { type: 'number' }, p95: { type: 'number' }, max: { type: 'number' } },
    },
    DeliveryStats: {
      type: 'object',
      properties: {
        since: { type: 'string', format: 'date-time', description: 'start of the first bucket' },
        until: { type: 'string', format: 'date-time' },
        bucketMs: { type: 'integer' },
        endpoints: {
          type: 'array',
          description: 'busiest first',
          items: {
            type: 'object',
            properties: {
              endpoint: { type: 'string', description: 'URL origin' },
              total: { type: 'integer' },
              byStatus: { type: 'object', additionalProperties: { type: 'integer' } },
              buckets: {
                type: 'array',
                items: {
                  type: 'object',
                  properties: {
                    at: { type: 'string', format: 'date-time' },
                    counts: { type: 'object', additionalProperties: { type: 'integer' }, description: 'deliveries created in the bucket, by status now' },
                    latency: { ...ref('Percentiles'), description: 'ingest to delivery (ms) of the delivered ones' },
                    response: { ...ref('Percentiles'), description: 'attempt durations (ms) of attempts started in the bucket' },
                  },
                },
              },
            },
          },
        },
      },
    },
  },
  paths: {
    '/api/v1/deliveries': {
      get: {
        summary: 'Webhook deliveries, newest first',
        parameters: [
          q('status', DELIVERY_STATUSES.join(', '), { enum: [...DELIVERY_STATUSES] }),
          q('type', 'event type'),
          q('installation', 'installation id'),
          q('event', 'event id'),
          q('endpoint', 'URL origin the deliveries go to (https://hooks.example.com; a whole URL counts as its origin)'),
          ...timeParams,
          ...pageQuery,
        ],
        responses: { '200': list('deliveries', ref('Delivery')), ...errors },
      },
    },
    '/api/v1/deliveries/{id}': { get: { summary: 'One delivery: the body sent and every attempt', parameters: [idParam], responses: { '200': json(ref('DeliveryDetail')), ...errors } } },
    '/api/v1/deliveries/{id}/retry': {
      post: {
        summary: 'One attempt now, recorded as manual (does not change the automatic schedule unless it succeeds)',
        parameters: [idParam],
        responses: { '200': json({ type: 'object', properties: { attempt: ref('Attempt'), delivery: ref('DeliveryDetail') } }), ...errors, '409': json(ref('Error'), 'Cancelled, or an attempt is in flight') },
      },
    },
    '/api/v1/deliveries/replay': {
      post: {
        summary:
          'Deliveries of a status (failed or delivered) created in the window go back to the queue with a fresh schedule (held when their installation is paused; those of uninstalled installations are skipped). dryRun: only say which',
        requestBody: body({
          type: 'object',
          description: 'status, or failed: true (the same as status failed); since defaults to the first delivery, until to now',
          properties: {
            status: { enum: ['failed', 'delivered'] },
            failed: { const: true },
            since: { type: 'string' },
            until: { type: 'string' },
            installation: { type: 'string' },
            type: { type: 'string', description: 'only deliveries of this event type' },
            endpoint: { type: 'string', description: 'only deliveries to this URL origin' },
            dryRun: { type: 'boolean', description: 'change nothing; answer the deliveries a replay would take now' },
          },
        }),
        responses: {
          '200': json({
            type: 'object',
            properties: {
              replayed: { type: 'integer', description: '0 on a dry run' },
              deliveries: { type: 'array', items: { type: 'string' }, description: 'ids replayed, in event order (on a dry run: that would be)' },
              held: { type: 'array', items: { type: 'string' }, description: 'those held: their installation is paused' },
              dryRun: { type: 'boolean' },
              matched: { type: 'integer', description: 'dry run: how many a replay would take' },
            },
          }),
          ...errors,
        },
      },
    },
    '/api/v1/deliveries/{id}/replay': {
      post: {
        summary: 'One failed or delivered delivery back to the queue with a fresh schedule (held when its installation is paused)',
        parameters: [idParam],
        responses: { '200': json(ref('DeliveryDetail')), ...errors, '409': json(ref('Error'), 'Still queued, cancelled, its installation uninstalled, or an attempt in flight') },
      },
    },
    '/api/v1/deliveries/stats': {
      get: {
        summary:
          'Per endpoint (URL origin) and time bucket: deliveries created, by status now; ingest-to-delivery latency of the delivered ones; durations of their attempts (nearest-rank p50, p95, max in ms). Buckets are aligned to multiples of the bucket size; empty ones are left out. A window holding more than 200,000 deliveries is refused (400, where: since).',
        parameters: [
          q('since', 'a duration ago (1h) or a date-time; default 1h'),
          q('until', 'a duration ago or a date-time; default now'),
          q('bucket', 'bucket size: 1m (default), 15m, 1h ...; at most 1440 buckets'),
          q('endpoint', 'only this URL origin'),
          q('installation', 'only this installation'),
        ],
        responses: { '200': json(ref('DeliveryStats')), ...errors },
      },
    },
    '/api/v1/webhooks/{installationId}/secret': {
      get: {
        summary: "A webhook installation's signing secrets, masked unless ?reveal=true",
        parameters: [pathParam('installationId'), q('reveal', 'show the secrets whole', { type: 'boolean' })],
        responses: { '200': json({ type: 'object', properties: { installationId: { type: 'string' }, secret: { type: 'string' }, revealed: { type: 'boolean' }, createdAt: { type: 'string' }, previous: { type: 'array', items: { type: 'object', properties: { secret: { type: 'string' }, expiresAt: { type: 'string' } } } } } }), ...errors },
      },
    },
    '/api/v1/webhooks/{installationId}/secret/rotate': {
      post: {
        summary: 'A new signing secret (shown once); the old one keeps signing for webhooks.secret_rotation_overlap',
        parameters: [pathParam('installationId')],
        requestBody: { required: false, content: { 'application/json': { schema: { type: 'object', properties: { secret: { type: 'string', description: 'use this secret instead of a generated one' } } } } } },
        responses: { '200': json({ type: 'object', properties: { installationId: { type: 'string' }, secret: { type: 'string' }, previousExpiresAt: { type: 'string' } } }), ...errors },
      },
    },
  },
};
