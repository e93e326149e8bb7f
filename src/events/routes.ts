/**
 * /api/v1/events: ingest of one event or a batch (admin token) and history; /api/v1/handler-runs:
 * the events owed to integrations' handlers. Declared with route(): the schemas of their requests
 * and answers are in api.ts.
 */
import type { H3 } from 'h3';
import { SwitchyardError } from '../errors.ts';
import { jsonResponse } from '../http/respond.ts';
import { readJsonObjectOrArray } from '../http/body.ts';
import { route } from '../http/route.ts';
import type { ServicesWith } from '../module/contract.ts';
import { replayWindow } from '../webhooks/index.ts';
import {
  batchResultSchema,
  eventDetailSchema,
  eventListSchema,
  eventsQuery,
  handlerReplayAnswer,
  handlerReplayBody,
  handlerRunListSchema,
  handlerRunSchema,
  handlerRunsQuery,
  ingestAnswer,
  ingestBody,
  ingestDocumented,
  ingestResultSchema,
} from './api.ts';

export function eventRoutes(app: H3, services: ServicesWith<'events' | 'handlerRuns'>): void {
  const events = () => services.events;
  const runs = () => services.handlerRuns;
  const limit = services.config.server.body_limit;
  const limits = {
    object: { bytes: limit, key: 'server.body_limit' },
    array: { bytes: services.config.server.batch_body_limit, key: 'server.batch_body_limit' },
  };

  route(
    app,
    {
      method: 'POST',
      path: '/api/v1/events',
      summary:
        'Ingest a platform event (validated by type), or a batch: a JSON array of 1-1000 events. Each is fanned out to integration handlers and webhook subscribers. A repeated eventId answers 200 with duplicate: true',
      description:
        'One event object: 202 (stored and queued), 200 (duplicate eventId), 400 (invalid, nothing stored); body at most server.body_limit. A JSON array: each item is validated as one event would be, and the valid ones are stored with their deliveries and handler runs in one transaction (all of them, or none if storing fails: then the whole request fails). Invalid items are refused one by one (their problem paths prefixed with the index, `[3].type`) while the valid ones are stored. The answer lists one result per item, in order; 202 when every item was stored or a duplicate, 207 when at least one was refused. A batch body is at most server.batch_body_limit, each of its events at most server.body_limit (else that item is a 413).',
      auth: 'admin',
      body: { schema: ingestBody, documented: ingestDocumented, read: (req) => readJsonObjectOrArray(req, limits) },
      status: 202,
      response: ingestAnswer,
      responseDescription: 'Accepted: the event, or every item of the batch, is stored (or was already)',
      responses: {
        '200': { description: 'Already ingested (one event): duplicate is true', schema: ingestResultSchema },
        '207': { description: 'A batch of which at least one item was refused: see each result', schema: batchResultSchema },
        '413': { description: 'The body is larger than server.body_limit (one object) or server.batch_body_limit (an array); `where` names the limit' },
      },
    },
    async ({ body }) => {
      if (Array.isArray(body)) {
        // A batch: one result per item, in order. 202 when every item was taken (stored, or a
        // duplicate: either way the server has it); 207 Multi-Status as soon as one was refused, so a
        // sender that checks only the status still learns that it must look at the items.
        const result = await events().ingestBatch(body, { itemLimit: limit });
        return jsonResponse(result, { status: result.rejected ? 207 : 202 });
      }
      const result = await events().ingest(body);
      return jsonResponse(result, { status: result.duplicate ? 200 : 202 });
    },
  );

  route(
    app,
    { method: 'GET', path: '/api/v1/events', summary: 'Ingested events, newest first', auth: 'admin', query: eventsQuery, response: eventListSchema },
    ({ query }) => events().list(query),
  );

  route(
    app,
    {
      method: 'GET',
      path: '/api/v1/events/:id',
      summary: 'One event: its payload, its deliveries and its handler runs',
      auth: 'admin',
      params: { id: 'the eventId' },
      response: eventDetailSchema,
    },
    async ({ params: { id } }) => {
      const e = await events().get(id);
      if (!e) throw new SwitchyardError('not_found', `no event ${id}`, { hint: 'list events with GET /api/v1/events' });
      const deliveries = (await services.deliveries?.list({ event: id, limit: 500 }))?.deliveries ?? [];
      return { ...e, deliveries, handlerRuns: await runs().ofEvent(id) };
    },
  );

  route(
    app,
    {
      method: 'GET',
      path: '/api/v1/handler-runs',
      summary: 'Handler runs (one per event and installation whose integration handles it), newest first',
      auth: 'admin',
      query: handlerRunsQuery,
      response: handlerRunListSchema,
    },
    ({ query }) => runs().list(query),
  );

  route(
    app,
    {
      method: 'POST',
      path: '/api/v1/handler-runs/replay',
      summary: 'Failed handler runs created in {since, until} (optionally of one installation) back to pending with a fresh retry schedule',
      auth: 'admin',
      body: { schema: handlerReplayBody, limit },
      response: handlerReplayAnswer,
    },
    async ({ body }) => {
      const ids = await runs().replay(replayWindow(body, 'handler runs'));
      return { replayed: ids.length, handlerRuns: ids };
    },
  );

  route(
    app,
    {
      method: 'GET',
      path: '/api/v1/handler-runs/:id',
      summary: 'One handler run',
      auth: 'admin',
      params: { id: 'handler run id' },
      response: handlerRunSchema,
    },
    async ({ params: { id } }) => {
      const run = await runs().get(id);
      if (!run) throw new SwitchyardError('not_found', `no handler run ${id}`, { hint: 'list them with GET /api/v1/handler-runs' });
      return run;
    },
  );

  route(
    app,
    {
      method: 'POST',
      path: '/api/v1/handler-runs/:id/replay',
      summary: 'Run a finished (failed or delivered) handler run again with a fresh retry schedule',
      auth: 'admin',
      params: { id: 'handler run id' },
      response: handlerRunSchema,
      responses: { '409': { description: 'Still scheduled, or cancelled' } },
    },
    ({ params: { id } }) => runs().replayOne(id),
  );
}
