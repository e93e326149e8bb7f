/**
 * Management API of deliveries and webhook secrets (admin token). JSON shapes are documented in
 * the README and used by the inspection CLI: keep them stable.
 */
import type { H3 } from 'h3';
import { SwitchyardError } from '../errors.ts';
import { requireAdmin } from '../http/app.ts';
import { oneOfParam, pageParams, readJson } from '../http/body.ts';
import type { ServicesWith } from '../server/services.ts';
import { DELIVERY_STATUSES } from './queue.ts';
import { parseTimeParam, replaySelection } from './time.ts';
import { parseDuration } from '../schema/index.ts';

/** At most this many buckets in one statistics answer (a day of minutes). */
export const MAX_STATS_BUCKETS = 1440;

/**
 * An endpoint names a URL origin (`https://hooks.example.com`, the unit deliveries are grouped and
 * limited by); a whole URL is taken as its origin. Undefined when absent; 400 naming `where` otherwise.
 */
export function endpointParam(value: unknown, where: string): string | undefined {
  if (value === undefined || value === null || value === '') return undefined;
  let url: URL | undefined;
  try {
    url = typeof value === 'string' ? new URL(value) : undefined;
  } catch {
    url = undefined;
  }
  if (!url || (url.protocol !== 'http:' && url.protocol !== 'https:'))
    throw new SwitchyardError('bad_request', `${where} must be an http(s) origin such as https://hooks.example.com, got ${JSON.stringify(value)}`, { where });
  return url.origin;
}

/** A positive duration query parameter (`1m`, `15m`), or `fallback` when absent. */
function durationParam(value: string | null, name: string, fallback: number): number {
  if (value === null || value === '') return fallback;
  const ms = parseDuration(value);
  if (ms === undefined || ms < 1000 || !Number.isFinite(ms))
    throw new SwitchyardError('bad_request', `${name} must be a duration of at least 1s (1m, 15m, 1h), got "${value}"`, { where: name });
  return ms;
}

/** `whsec_…Ab3x`: enough to tell secrets apart, not enough to use one. */
export function maskSecret(secret: string): string {
  return `${secret.startsWith('whsec_') ? 'whsec_' : ''}…${secret.slice(-4)}`;
}

export function webhookRoutes(app: H3, services: ServicesWith<'webhooks' | 'deliveries'>): void {
  const deliveries = () => services.deliveries;
  const webhooks = () => services.webhooks;
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
      origin: endpointParam(q.get('endpoint'), 'endpoint'),
      since: parseTimeParam(q.get('since'), 'since'),
      until: parseTimeParam(q.get('until'), 'until'),
      ...page,
    });
  });

  app.post('/api/v1/deliveries/replay', async (event) => {
    requireAdmin(event.req);
    const body = await readJson<Record<string, unknown>>(event.req, limit);
    if (body.type !== undefined && (typeof body.type !== 'string' || !body.type))
      throw new SwitchyardError('bad_request', '"type" must be an event type', { where: 'type' });
    if (body.dryRun !== undefined && typeof body.dryRun !== 'boolean') throw new SwitchyardError('bad_request', '"dryRun" must be true or false', { where: 'dryRun' });
    const filter = { ...replaySelection(body), type: body.type as string | undefined, origin: endpointParam(body.endpoint, 'endpoint') };
    if (body.dryRun) {
      // What a replay would take now, for a confirmation: nothing changes.
      const ids = deliveries().replayable(filter);
      return { dryRun: true, replayed: 0, matched: ids.length, deliveries: ids };
    }
    const replayed = deliveries().replay(filter);
    return { replayed: replayed.length, deliveries: replayed.map((r) => r.id), held: replayed.filter((r) => r.held).map((r) => r.id) };
  });

  app.get('/api/v1/deliveries/stats', (event) => {
    requireAdmin(event.req);
    const q = new URL(event.req.url).searchParams;
    const now = Date.now();
    // No delivery is older than the epoch: a longer duration ago (one past what a date holds) reads from it.
    const since = Math.max(0, parseTimeParam(q.get('since'), 'since', now) ?? now - 3_600_000);
    const until = parseTimeParam(q.get('until'), 'until', now) ?? now;
    if (until <= since) throw new SwitchyardError('bad_request', 'until must be later than since', { where: 'until' });
    const bucketMs = durationParam(q.get('bucket'), 'bucket', 60_000);
    const buckets = Math.ceil((until - Math.floor(since / bucketMs) * bucketMs) / bucketMs);
    if (buckets > MAX_STATS_BUCKETS)
      throw new SwitchyardError('bad_request', `the window holds ${buckets} buckets of ${q.get('bucket') ?? '1m'}; at most ${MAX_STATS_BUCKETS}`, {
        where: 'bucket',
        hint: 'choose a larger bucket or a shorter window',
      });
    return deliveries().stats({ since, until, bucketMs, origin: endpointParam(q.get('endpoint'), 'endpoint'), installation: q.get('installation') || undefined });
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
