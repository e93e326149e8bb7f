/** /api/v1/events: ingest (admin token) and history. */
import type { H3 } from 'h3';
import { SwitchyardError } from '../errors.ts';
import { requireAdmin } from '../http/app.ts';
import { pageParams, readJson } from '../http/body.ts';
import type { Services } from '../services.ts';
import { parseTimeParam, type Deliveries } from '../webhooks/index.ts';
import type { Events } from './service.ts';

export function eventRoutes(app: H3, services: Services): void {
  const events = () => services.events as Events;
  const limit = services.config.server.body_limit;

  app.post('/api/v1/events', async (event) => {
    requireAdmin(event.req);
    const body = await readJson(event.req, limit);
    const result = await events().ingest(body);
    return Response.json(result, { status: result.duplicate ? 200 : 202 });
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
    const deliveries = (services.deliveries as Deliveries | undefined)?.list({ event: id, limit: 500 }).deliveries ?? [];
    return { ...e, deliveries };
  });
}
