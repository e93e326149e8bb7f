/** /api/v1/events: ingest of one event or a batch (admin token) and history; /api/v1/handler-runs: the events owed to integrations' handlers. */
import type { H3 } from 'h3';
import { SwitchyardError } from '../errors.ts';
import { jsonResponse } from '../http/respond.ts';
import { requireAdmin } from '../http/app.ts';
import { pageParams, readJson, readJsonObjectOrArray } from '../http/body.ts';
import type { ServicesWith } from '../server/services.ts';
import { parseTimeParam, replayWindow } from '../webhooks/index.ts';
import { DELIVERY_STATUSES, type DeliveryStatus } from '../webhooks/views.ts';

function statusParam(v: string | null): DeliveryStatus | undefined {
  if (v === null || v === '') return undefined;
  if (!(DELIVERY_STATUSES as readonly string[]).includes(v))
    throw new SwitchyardError('bad_request', `status must be one of ${DELIVERY_STATUSES.join(', ')}, got "${v}"`, { where: 'status' });
  return v as DeliveryStatus;
}

export function eventRoutes(app: H3, services: ServicesWith<'events' | 'handlerRuns'>): void {
  const events = () => services.events;
  const limit = services.config.server.body_limit;
  const limits = {
    object: { bytes: limit, key: 'server.body_limit' },
    array: { bytes: services.config.server.batch_body_limit, key: 'server.batch_body_limit' },
  };

  app.post('/api/v1/events', async (event) => {
    requireAdmin(event.req);
    const body = await readJsonObjectOrArray(event.req, limits);
    if (Array.isArray(body)) {
      // A batch: one result per item, in order. 202 when every item was taken (stored, or a
      // duplicate: either way the server has it); 207 Multi-Status as soon as one was refused, so a
      // sender that checks only the status still learns that it must look at the items.
      const result = await events().ingestBatch(body, { itemLimit: limit });
      return jsonResponse(result, { status: result.rejected ? 207 : 202 });
    }
    const result = await events().ingest(body);
    return jsonResponse(result, { status: result.duplicate ? 200 : 202 });
  });

  app.get('/api/v1/events', (event) => {
    requireAdmin(event.req);
    const q = new URL(event.req.url).searchParams;
    const page = pageParams(q);
    return events().list({
      type: q.get('type') ?? undefined,
      installation: q.get('installation') ?? undefined,
      since: parseTimeParam(q.get('since'), 'since'),
      until: parseTimeParam(q.get('until'), 'until'),
      ...page,
    });
  });

  app.get('/api/v1/events/:id', (event) => {
    requireAdmin(event.req);
    const id = event.context.params!.id;
    const e = events().get(id);
    if (!e) throw new SwitchyardError('not_found', `no event ${id}`, { hint: 'list events with GET /api/v1/events' });
    const deliveries = services.deliveries?.list({ event: id, limit: 500 }).deliveries ?? [];
    return { ...e, deliveries, handlerRuns: runs().ofEvent(id) };
  });

  const runs = () => services.handlerRuns;

  app.get('/api/v1/handler-runs', (event) => {
    requireAdmin(event.req);
    const q = new URL(event.req.url).searchParams;
    return runs().list({
      status: statusParam(q.get('status')),
      type: q.get('type') || undefined,
      installation: q.get('installation') || undefined,
      event: q.get('event') || undefined,
      since: parseTimeParam(q.get('since'), 'since'),
      until: parseTimeParam(q.get('until'), 'until'),
      ...pageParams(q),
    });
  });

  app.post('/api/v1/handler-runs/replay', async (event) => {
    requireAdmin(event.req);
    const body = await readJson<Record<string, unknown>>(event.req, limit);
    const ids = runs().replay(replayWindow(body, 'handler runs'));
    return { replayed: ids.length, handlerRuns: ids };
  });

  app.get('/api/v1/handler-runs/:id', (event) => {
    requireAdmin(event.req);
    const id = event.context.params!.id;
    const run = runs().get(id);
    if (!run) throw new SwitchyardError('not_found', `no handler run ${id}`, { hint: 'list them with GET /api/v1/handler-runs' });
    return run;
  });

  app.post('/api/v1/handler-runs/:id/replay', (event) => {
    requireAdmin(event.req);
    return runs().replayOne(event.context.params!.id);
  });
}
