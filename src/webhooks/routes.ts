/**
 * Management API of deliveries and webhook secrets (admin token). JSON shapes are documented in
 * the README and used by the inspection CLI: keep them stable.
 */
import type { H3 } from 'h3';
import { SwitchyardError } from '../errors.ts';
import { requireAdmin } from '../http/app.ts';
import { oneOfParam, pageParams, readJson } from '../http/body.ts';
import type { Services } from '../services.ts';
import type { Deliveries, WebhooksService } from './index.ts';
import { DELIVERY_STATUSES } from './queue.ts';
import { parseTimeParam, replaySelection } from './time.ts';

/** `whsec_…Ab3x`: enough to tell secrets apart, not enough to use one. */
export function maskSecret(secret: string): string {
  return `${secret.startsWith('whsec_') ? 'whsec_' : ''}…${secret.slice(-4)}`;
}

export function webhookRoutes(app: H3, services: Services): void {
  const deliveries = () => services.deliveries as Deliveries;
  const webhooks = () => services.webhooks as WebhooksService;
  const limit = services.config.server.body_limit;

  app.get('/api/v1/deliveries', (event) => {
    requireAdmin(event.req);
    const q = new URL(event.req.url).searchParams;
    const page = pageParams(q);
    return deliveries().list({
      status: oneOfParam(q.get('status'), 'status', DELIVERY_STATUSES),
      type: q.get('type') ?? undefined,
      installation: q.get('installation') ?? undefined,
      event: q.get('event') ?? undefined,
      since: parseTimeParam(q.get('since'), 'since'),
      until: parseTimeParam(q.get('until'), 'until'),
      ...page,
    });
  });

  app.post('/api/v1/deliveries/replay', async (event) => {
    requireAdmin(event.req);
    const body = await readJson<Record<string, unknown>>(event.req, limit);
    const replayed = deliveries().replay(replaySelection(body));
    return { replayed: replayed.length, deliveries: replayed.map((r) => r.id), held: replayed.filter((r) => r.held).map((r) => r.id) };
  });

  app.get('/api/v1/deliveries/:id', (event) => {
    requireAdmin(event.req);
    const id = event.context.params!.id;
    const d = deliveries().get(id);
    if (!d) throw new SwitchyardError('not_found', `no delivery ${id}`, { hint: 'list them with GET /api/v1/deliveries' });
    return d;
  });

  app.post('/api/v1/deliveries/:id/replay', (event) => {
    requireAdmin(event.req);
    return deliveries().replayOne(event.context.params!.id);
  });

  app.post('/api/v1/deliveries/:id/retry', async (event) => {
    requireAdmin(event.req);
    const id = event.context.params!.id;
    const attempt = await deliveries().retry(id);
    return { attempt, delivery: deliveries().get(id) };
  });

  app.get('/api/v1/webhooks/:installationId/secret', (event) => {
    requireAdmin(event.req);
    const id = event.context.params!.installationId;
    const reveal = new URL(event.req.url).searchParams.get('reveal') === 'true';
    const d = webhooks().describe(id);
    if (!d)
      throw new SwitchyardError('not_found', `installation ${id} has no webhook signing secret`, {
        hint: 'secrets belong to installations of the built-in webhook integration',
      });
    const show = (s: string) => (reveal ? s : maskSecret(s));
    return {
      installationId: id,
      secret: show(d.secret),
      revealed: reveal,
      createdAt: d.createdAt,
      previous: d.previous.map((p) => ({ secret: show(p.secret), expiresAt: p.expiresAt })),
    };
  });

  app.post('/api/v1/webhooks/:installationId/secret/rotate', async (event) => {
    requireAdmin(event.req);
    const id = event.context.params!.installationId;
    const body = await readJson<Record<string, unknown>>(event.req, limit, { optional: true });
    if (body.secret !== undefined && typeof body.secret !== 'string')
      throw new SwitchyardError('bad_request', '"secret" must be a string', { where: 'secret' });
    if (!webhooks().describe(id))
      throw new SwitchyardError('not_found', `installation ${id} has no webhook signing secret`, {
        hint: 'secrets belong to installations of the built-in webhook integration',
      });
    const r = webhooks().rotateSecret(id, body.secret as string | undefined);
    services.log.info('webhook secret rotated', { installation: id, previous_expires_at: r.previousExpiresAt });
    // The new secret is shown once here, to the admin who asked for it.
    return { installationId: id, secret: r.secret, previousExpiresAt: r.previousExpiresAt };
  });
}
