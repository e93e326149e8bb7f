/**
 * Management API of deliveries and webhook secrets (admin token), declared with route(): the
 * schemas of their requests and answers are in api.ts. JSON shapes are documented in
 * docs/inspection.md ("JSON shapes") and used by the inspection CLI: keep them stable.
 */
import type { H3 } from 'h3';
import { SwitchyardError } from '../errors.ts';
import { route } from '../http/route.ts';
import type { ServicesWith } from '../module/contract.ts';
import { replaySelection } from './time.ts';
import { originKey } from './queue-rows.ts';
import {
  deliveriesQuery,
  deliveryDetailSchema,
  deliveryListSchema,
  deliveryStatsSchema,
  replayAnswer,
  replayBody,
  retryAnswer,
  rotateAnswer,
  rotateBody,
  secretAnswer,
  secretQuery,
  statsQuery,
} from './api.ts';

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
  return originKey(url.origin);
}

/** `whsec_…Ab3x`: enough to tell secrets apart, not enough to use one. */
export function maskSecret(secret: string): string {
  return `${secret.startsWith('whsec_') ? 'whsec_' : ''}…${secret.slice(-4)}`;
}

export function webhookRoutes(app: H3, services: ServicesWith<'webhooks' | 'deliveries'>): void {
  const deliveries = () => services.deliveries;
  const webhooks = () => services.webhooks;
  const limit = services.config.server.body_limit;
  const id = { id: 'delivery id (dlv_…)' };
  const installationId = { installationId: 'an installation of the webhook integration' };

  route(
    app,
    {
      method: 'GET',
      path: '/api/v1/deliveries',
      summary: 'Webhook deliveries, newest first',
      auth: 'admin',
      query: deliveriesQuery,
      response: deliveryListSchema,
    },
    ({ query: { endpoint, ...q } }) => deliveries().list({ ...q, origin: endpoint }),
  );

  route(
    app,
    {
      method: 'POST',
      path: '/api/v1/deliveries/replay',
      summary:
        'Deliveries of a status (failed or delivered) created in the window go back to the queue with a fresh schedule (held when their installation is paused; those of uninstalled installations are skipped). dryRun: only say which',
      auth: 'admin',
      body: { schema: replayBody, limit },
      response: replayAnswer,
    },
    async ({ body }) => {
      const filter = { ...replaySelection(body), type: body.type, origin: endpointParam(body.endpoint, 'endpoint') };
      if (body.dryRun) {
        // What a replay would take now, for a confirmation: nothing changes.
        const ids = await deliveries().replayable(filter);
        return { dryRun: true, replayed: 0, matched: ids.length, deliveries: ids };
      }
      const replayed = await deliveries().replay(filter);
      return { replayed: replayed.length, deliveries: replayed.map((r) => r.id), held: replayed.filter((r) => r.held).map((r) => r.id) };
    },
  );

  route(
    app,
    {
      method: 'GET',
      path: '/api/v1/deliveries/stats',
      summary:
        'Per endpoint (URL origin) and time bucket: deliveries created, by status now; ingest-to-delivery latency of the delivered ones; durations of their attempts (nearest-rank p50, p95, max in ms). Buckets are aligned to multiples of the bucket size; empty ones are left out. A window holding more than 200,000 deliveries is refused (400, where: since).',
      auth: 'admin',
      query: statsQuery,
      response: deliveryStatsSchema,
    },
    ({ query, req }) => {
      const now = Date.now();
      // No delivery is older than the epoch: a longer duration ago (one past what a date holds) reads from it.
      const since = Math.max(0, query.since ?? now - 3_600_000);
      const until = query.until ?? now;
      if (until <= since) throw new SwitchyardError('bad_request', 'until must be later than since', { where: 'until' });
      const bucketMs = query.bucket ?? 60_000;
      const buckets = Math.ceil((until - Math.floor(since / bucketMs) * bucketMs) / bucketMs);
      if (buckets > MAX_STATS_BUCKETS)
        throw new SwitchyardError(
          'bad_request',
          `the window holds ${buckets} buckets of ${new URL(req.url).searchParams.get('bucket') ?? '1m'}; at most ${MAX_STATS_BUCKETS}`,
          {
            where: 'bucket',
            hint: 'choose a larger bucket or a shorter window',
          },
        );
      return deliveries().stats({ since, until, bucketMs, origin: query.endpoint, installation: query.installation });
    },
  );

  route(
    app,
    {
      method: 'GET',
      path: '/api/v1/deliveries/:id',
      summary: 'One delivery: the body sent and every attempt',
      auth: 'admin',
      params: id,
      response: deliveryDetailSchema,
    },
    async ({ params }) => {
      const d = await deliveries().get(params.id);
      if (!d) throw new SwitchyardError('not_found', `no delivery ${params.id}`, { hint: 'list them with GET /api/v1/deliveries' });
      return d;
    },
  );

  route(
    app,
    {
      method: 'POST',
      path: '/api/v1/deliveries/:id/replay',
      summary: 'One failed or delivered delivery back to the queue with a fresh schedule (held when its installation is paused)',
      auth: 'admin',
      params: id,
      response: deliveryDetailSchema,
      responses: { '409': { description: 'Still queued, cancelled, its installation uninstalled, or an attempt in flight' } },
    },
    ({ params }) => deliveries().replayOne(params.id),
  );

  route(
    app,
    {
      method: 'POST',
      path: '/api/v1/deliveries/:id/retry',
      summary: 'One attempt now, recorded as manual (does not change the automatic schedule unless it succeeds)',
      auth: 'admin',
      params: id,
      response: retryAnswer,
      responses: { '409': { description: 'Cancelled, or an attempt is in flight' } },
    },
    async ({ params }) => {
      const attempt = await deliveries().retry(params.id);
      return { attempt, delivery: await deliveries().get(params.id) };
    },
  );

  route(
    app,
    {
      method: 'GET',
      path: '/api/v1/webhooks/:installationId/secret',
      summary: "A webhook installation's signing secrets, masked unless ?reveal=true",
      auth: 'admin',
      params: installationId,
      query: secretQuery,
      response: secretAnswer,
    },
    async ({ params, query }) => {
      const id = params.installationId;
      const reveal = query.reveal;
      const d = await webhooks().describe(id);
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
    },
  );

  route(
    app,
    {
      method: 'POST',
      path: '/api/v1/webhooks/:installationId/secret/rotate',
      summary: 'A new signing secret (shown once); the old one keeps signing for webhooks.secret_rotation_overlap',
      auth: 'admin',
      params: installationId,
      body: { schema: rotateBody, limit, optional: true },
      response: rotateAnswer,
    },
    async ({ params, body }) => {
      const id = params.installationId;
      if (!(await webhooks().describe(id)))
        throw new SwitchyardError('not_found', `installation ${id} has no webhook signing secret`, {
          hint: 'secrets belong to installations of the built-in webhook integration',
        });
      const r = await webhooks().rotateSecret(id, body.secret);
      services.log.info('webhook secret rotated', { installation: id, previous_expires_at: r.previousExpiresAt });
      // The new secret is shown once here, to the admin who asked for it.
      return { installationId: id, secret: r.secret, previousExpiresAt: r.previousExpiresAt };
    },
  );
}
