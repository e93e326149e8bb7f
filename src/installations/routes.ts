/** /api/v1/installations: the management API of installations (admin, or an installation for itself). */
import type { H3 } from 'h3';
import { SwitchyardError } from '../errors.ts';
import { principalOf, requireAdmin } from '../http/app.ts';
import { isIntegrationCode, mayReach, mayReveal, redactConfiguration, requireReach } from './access.ts';
import { oneOfParam, readJson } from '../http/body.ts';
import { missingRequired } from '../manifest/index.ts';
import type { Services, ServicesWith } from '../server/services.ts';
import { installationEndpoint } from './urls.ts';
import { configurationSection, type Installation } from './service.ts';
import { WEBHOOK_INTEGRATION } from './webhook.ts';
import { refusedAhead } from '../net/index.ts';
import { gitbookApiRoutes } from './gitbook-api.ts';

export function installationView(services: Services, inst: Installation, reveal = false) {
  const publicEndpoint = installationEndpoint(services.config.publicUrl, inst.integration, inst.id);
  const manifest = services.registry?.get(inst.integration)?.manifest;
  const section = configurationSection(manifest, inst.target) as
    | { properties?: Record<string, { type: string; callback_url?: string; button_text?: string }> }
    | undefined;
  const connect: Array<{ property: string; label: string; url: string }> = [];
  for (const [name, p] of Object.entries(section?.properties ?? {}))
    if (p.type === 'button' && p.callback_url) connect.push({ property: name, label: p.button_text ?? name, url: `${publicEndpoint}${p.callback_url}` });
  // What still keeps a pending installation from becoming active.
  const missing = inst.status === 'pending' ? missingRequired(section as Parameters<typeof missingRequired>[0], inst.configuration) : [];
  // Said at install and on every view, not first in a failed delivery: a URL the SSRF guard will refuse.
  const refusal = inst.integration === WEBHOOK_INTEGRATION && typeof inst.configuration.webhook_url === 'string'
    ? refusedAhead(inst.configuration.webhook_url, services.config.webhooks.allow_private_networks)
    : undefined;
  const warnings = refusal ? [`configuration.webhook_url: ${refusal}`] : [];
  return { ...inst, configuration: redactConfiguration(inst.configuration, reveal), urls: { publicEndpoint }, connect, missing, warnings };
}

/**
 * The installations' routes: they parse, authorize, call one lifecycle step of the service and
 * answer. What follows a step (webhook secrets and queued deliveries, the runtime's events) is the
 * business of the modules that subscribe to the service's change hook (service.ts, onChange).
 */
export function installationRoutes(app: H3, services: ServicesWith<'installations'>): void {
  const inst = () => services.installations;
  const limit = services.config.server.body_limit;

  /**
   * The admin, an installation for itself, or an integration's token for its own installations
   * (`integration: false` leaves those out: rendering is the installation's own business).
   */
  function own(req: Request, id: string, opts: { integration?: boolean } = {}): void {
    const p = principalOf(req);
    if (p.kind === 'admin') return;
    if (p.kind === 'integration' && opts.integration === false) throw new SwitchyardError('forbidden', 'an integration token cannot do this; use the installation\'s own token');
    const found = inst().get(id);
    if (found) return requireReach(p, found);
    // A missing installation: 404 for its own token (the route says so), 403 for anyone else, as
    // for an installation they may not reach.
    if (p.kind === 'installation' && p.installationId === id) return;
    throw new SwitchyardError('forbidden', p.kind === 'installation' ? `this token belongs to installation ${p.installationId}, not ${id}` : `installation ${id} is not one of "${p.integration}"`);
  }

  app.get('/api/v1/installations', (event) => {
    const q = new URL(event.req.url).searchParams;
    const p = principalOf(event.req);
    const status = oneOfParam(q.get('status'), 'status', ['pending', 'active', 'paused', 'uninstalled'] as const);
    let list = inst().list({ integration: q.get('integration') ?? undefined, status, includeUninstalled: q.get('all') === 'true' });
    if (p.kind !== 'admin') list = list.filter((i) => mayReach(p, i));
    return { installations: list.map((i) => installationView(services, i)) };
  });

  app.post('/api/v1/installations', async (event) => {
    requireAdmin(event.req);
    const body = await readJson<Record<string, unknown>>(event.req, limit);
    if (typeof body.integration !== 'string' || !body.integration)
      throw new SwitchyardError('bad_request', '"integration" is required: the name of a loaded integration', { where: 'integration' });
    const target = body.target as string | undefined;
    if (target !== undefined && !['organization', 'space', 'site'].includes(target))
      throw new SwitchyardError('bad_request', `target must be organization, space or site, got "${target}"`, { where: 'target' });
    if (body.configuration !== undefined && (typeof body.configuration !== 'object' || body.configuration === null || Array.isArray(body.configuration)))
      throw new SwitchyardError('bad_request', 'configuration must be an object', { where: 'configuration' });
    if (body.externalIds !== undefined && (!Array.isArray(body.externalIds) || body.externalIds.some((x) => typeof x !== 'string')))
      throw new SwitchyardError('bad_request', 'externalIds must be a list of strings', { where: 'externalIds' });
    const given = body.webhook_secret;
    if (given !== undefined && (typeof given !== 'string' || given.length < 16))
      throw new SwitchyardError('bad_request', 'webhook_secret must be a string of at least 16 characters', { where: 'webhook_secret' });
    const change = inst().install({
      integration: body.integration as string,
      target: target as 'organization' | 'space' | 'site' | undefined,
      space: body.space as string | undefined,
      site: body.site as string | undefined,
      configuration: body.configuration as Record<string, unknown> | undefined,
      externalIds: body.externalIds as string[] | undefined,
      webhookSecret: given as string | undefined,
    });
    services.log.info('installed', { integration: change.installation.integration, installation: change.installation.id, status: change.installation.status });
    return new Response(
      JSON.stringify({
        installation: installationView(services, change.installation),
        token: change.token,
        ...(change.webhookSecret ? { webhookSecret: change.webhookSecret } : {}),
      }),
      { status: 201, headers: { 'content-type': 'application/json' } },
    );
  });

  app.get('/api/v1/installations/:id', (event) => {
    const id = event.context.params!.id;
    own(event.req, id);
    const reveal = new URL(event.req.url).searchParams.get('reveal') === 'true' && mayReveal(principalOf(event.req));
    return { installation: installationView(services, inst().require(id), reveal) };
  });

  app.patch('/api/v1/installations/:id', async (event) => {
    const id = event.context.params!.id;
    own(event.req, id);
    const body = await readJson<Record<string, unknown>>(event.req, limit);
    const patch = body.configuration;
    const externalIds = body.externalIds;
    if (!patch || typeof patch !== 'object' || Array.isArray(patch))
      throw new SwitchyardError('bad_request', 'send {"configuration": {"key": value}} (null removes a key), and optionally "externalIds"', { where: 'configuration' });
    if (externalIds !== undefined && (!Array.isArray(externalIds) || externalIds.some((x) => typeof x !== 'string')))
      throw new SwitchyardError('bad_request', 'externalIds must be a list of strings', { where: 'externalIds' });
    const change = inst().configure(id, patch as Record<string, unknown>, {
      byCode: isIntegrationCode(principalOf(event.req)),
      externalIds: externalIds as string[] | undefined,
    });
    return { installation: installationView(services, change.installation) };
  });

  for (const action of ['pause', 'resume'] as const) {
    app.post(`/api/v1/installations/:id/${action}`, (event) => {
      requireAdmin(event.req);
      const updated = inst()[action](event.context.params!.id);
      services.log.info(`installation ${action === 'pause' ? 'paused' : 'resumed'}`, { installation: updated.id, status: updated.status });
      return { installation: installationView(services, updated) };
    });
  }

  app.delete('/api/v1/installations/:id', (event) => {
    requireAdmin(event.req);
    const updated = inst().uninstall(event.context.params!.id);
    services.log.info('uninstalled', { installation: updated.id });
    return { installation: installationView(services, updated) };
  });

  app.post('/api/v1/installations/:id/token', (event) => {
    requireAdmin(event.req);
    return { token: inst().rotateToken(event.context.params!.id) };
  });

  app.post('/api/v1/installations/:id/render', async (event) => {
    const id = event.context.params!.id;
    own(event.req, id, { integration: false });
    const body = await readJson<Record<string, unknown>>(event.req, limit);
    if (typeof body.componentId !== 'string' || !body.componentId)
      throw new SwitchyardError('bad_request', '"componentId" is required', { where: 'componentId' });
    const runtime = services.runtime;
    if (!runtime) throw new SwitchyardError('not_implemented', 'this server runs no integration code (it has no runtime module)');
    return runtime.render(id, {
      componentId: body.componentId,
      props: body.props,
      state: body.state,
      action: body.action,
      context: body.context,
    });
  });

  gitbookApiRoutes(app, services);
}
