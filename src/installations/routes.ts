/**
 * /api/v1/installations: the management API of installations (admin, or an installation for
 * itself), declared with route(): the schemas of its requests and answers are in api.ts.
 */
import type { H3 } from 'h3';
import { SwitchyardError } from '../errors.ts';
import { principalOf } from '../http/app.ts';
import { route } from '../http/route.ts';
import { installerOf, isIntegrationCode, mayReach, mayReveal, redactConfiguration, requireReach } from './access.ts';
import {
  componentAnswer,
  configureBody,
  installAnswer,
  installationAnswer,
  installBody,
  linkAnswer,
  linkBody,
  listAnswer,
  revokeAnswer,
  listQuery,
  renderBody,
  showQuery,
  tokenAnswer,
  type InstallationView,
} from './api.ts';
import { GITBOOK_NAME_PATTERN, missingRequired, NAME_HINT } from '../manifest/index.ts';
import type { Services, ServicesWith } from '../module/contract.ts';
import { installationEndpoint } from './urls.ts';
import { serverOrganizations } from './visibility.ts';
import { configurationSection, type Installation } from './service.ts';
import { WEBHOOK_INTEGRATION } from './webhook.ts';
import { refusedAhead, refusedAheadResolved } from '../net/index.ts';
import { gitbookApiRoutes } from './gitbook-api.ts';
import { catalogueRoutes } from './catalogue.ts';
import { installRefusal } from './visibility.ts';

/** The URL a webhook installation delivers to, if it is one. */
function webhookUrlOf(inst: Installation): string | undefined {
  return inst.integration === WEBHOOK_INTEGRATION && typeof inst.configuration.webhook_url === 'string' ? inst.configuration.webhook_url : undefined;
}

/**
 * `refusal`: what the private-address guard will refuse, found ahead (resolvedView resolves the
 * host name; by default only an address or a localhost name is read, no lookup per installation
 * listed).
 */
export function installationView(
  services: Services,
  inst: Installation,
  reveal = false,
  refusal = refusedAhead(webhookUrlOf(inst) ?? '', services.config.webhooks.allow_private_networks),
): InstallationView {
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
  const warnings = refusal ? [`configuration.webhook_url: ${refusal}`] : [];
  return { ...inst, configuration: redactConfiguration(inst.configuration, reveal), urls: { publicEndpoint }, connect, missing, warnings };
}

/**
 * One installation as installationView shows it, its webhook URL's host name first resolved by the
 * delivery guard's own lookup (at most 1 s): a name that resolves to a loopback or private address
 * is flagged at install as the guard will refuse it at send time.
 */
export async function resolvedView(services: Services, inst: Installation, reveal = false): Promise<InstallationView> {
  const url = webhookUrlOf(inst);
  return installationView(
    services,
    inst,
    reveal,
    url === undefined ? undefined : await refusedAheadResolved(url, services.config.webhooks.allow_private_networks),
  );
}

/**
 * The installations' routes: they parse, authorize, call one lifecycle step of the service and
 * answer. What follows a step (webhook secrets and queued deliveries, the runtime's events) is the
 * business of the modules that subscribe to the service's change hook (service.ts, onChange).
 */
export function installationRoutes(app: H3, services: ServicesWith<'installations'>): void {
  const inst = () => services.installations;
  const limit = services.config.server.body_limit;
  const id = { id: 'installation id (inst_…)' };

  /**
   * The admin, an installation for itself, or an integration's token for its own installations
   * (`integration: false` leaves those out: rendering is the installation's own business).
   */
  async function own(req: Request, id: string, opts: { integration?: boolean } = {}): Promise<void> {
    const p = principalOf(req);
    if (p.kind === 'admin') return;
    if (p.kind === 'integration' && opts.integration === false)
      throw new SwitchyardError('forbidden', "an integration token cannot do this; use the installation's own token");
    const found = await inst().find(id);
    if (found) return requireReach(p, found);
    // A missing installation: 404 for its own token (the route says so), 403 for anyone else, as
    // for an installation they may not reach.
    if (p.kind === 'installation' && p.installationId === id) return;
    throw new SwitchyardError(
      'forbidden',
      p.kind === 'installation' ? `this token belongs to installation ${p.installationId}, not ${id}` : `installation ${id} is not one of "${p.integration}"`,
    );
  }

  route(
    app,
    {
      method: 'GET',
      path: '/api/v1/installations',
      summary: 'List installations (an installation token sees only its own)',
      auth: 'token',
      query: listQuery,
      response: listAnswer,
    },
    async ({ req, query }) => {
      const p = principalOf(req);
      let list = await inst().list({ integration: query.integration, status: query.status, includeUninstalled: query.all });
      if (p.kind !== 'admin') list = list.filter((i) => mayReach(p, i));
      return { installations: list.map((i) => installationView(services, i)) };
    },
  );

  route(
    app,
    {
      method: 'POST',
      path: '/api/v1/installations',
      summary:
        "Install an integration; emits installation_setup (and space_installation_setup on a space, site_installation_setup on a site). With the admin token any integration; with an install link (as the bearer token) that link's integration, under its visibility (a private one only for the server's organization)",
      auth: 'token',
      installLink: true,
      authorize: (req) => void installerOf(principalOf(req)),
      body: { schema: installBody, limit },
      status: 201,
      response: installAnswer,
      responseDescription: 'Installed',
    },
    async ({ req, body }) => {
      const by = installerOf(principalOf(req));
      const change = await inst().install({
        by,
        integration: body.integration,
        target: body.target,
        space: body.space,
        site: body.site,
        configuration: body.configuration,
        externalIds: body.externalIds,
        webhookSecret: body.webhook_secret,
      });
      services.log.info('installed', {
        integration: change.installation.integration,
        installation: change.installation.id,
        status: change.installation.status,
        by: by.kind === 'link' ? `install link ${by.linkId}` : 'admin',
      });
      return new Response(
        JSON.stringify({
          installation: await resolvedView(services, change.installation),
          token: change.token,
          ...(change.webhookSecret ? { webhookSecret: change.webhookSecret } : {}),
        }),
        { status: 201, headers: { 'content-type': 'application/json' } },
      );
    },
  );

  route(
    app,
    {
      method: 'GET',
      path: '/api/v1/installations/:id',
      summary: "One installation (credentials redacted unless ?reveal=true: the admin, or integration code with its invocation's token)",
      auth: 'token',
      authorize: (req, params) => own(req, params.id),
      params: id,
      query: showQuery,
      response: installationAnswer,
    },
    async ({ req, params, query }) => {
      const reveal = query.reveal && mayReveal(principalOf(req));
      return { installation: await resolvedView(services, await inst().require(params.id), reveal) };
    },
  );

  route(
    app,
    {
      method: 'PATCH',
      path: '/api/v1/installations/:id',
      summary:
        'Edit configuration: keys set, null removes (a property with a manifest default takes it back); validated against the manifest; emits installation_setup (and space_/site_installation_setup on a space or site); externalIds replaced when given',
      auth: 'token',
      authorize: (req, params) => own(req, params.id),
      params: id,
      body: { schema: configureBody, limit },
      response: installationAnswer,
    },
    async ({ req, params, body }) => {
      const change = await inst().configure(params.id, body.configuration, { byCode: isIntegrationCode(principalOf(req)), externalIds: body.externalIds });
      return { installation: await resolvedView(services, change.installation) };
    },
  );

  for (const action of ['pause', 'resume'] as const) {
    route(
      app,
      {
        method: 'POST',
        path: `/api/v1/installations/:id/${action}`,
        summary: action === 'pause' ? 'Pause: deliveries are held and invocations refused until resume' : 'Resume: held deliveries go out, in event order',
        auth: 'admin',
        params: id,
        response: installationAnswer,
        responses: { '409': { description: action === 'pause' ? 'Not active' : 'Not paused' } },
      },
      async ({ params }) => {
        const updated = await inst()[action](params.id);
        services.log.info(`installation ${action === 'pause' ? 'paused' : 'resumed'}`, { installation: updated.id, status: updated.status });
        return { installation: installationView(services, updated) };
      },
    );
  }

  route(
    app,
    { method: 'DELETE', path: '/api/v1/installations/:id', summary: 'Uninstall (final)', auth: 'admin', params: id, response: installationAnswer },
    async ({ params }) => {
      const updated = await inst().uninstall(params.id);
      services.log.info('uninstalled', { installation: updated.id });
      return { installation: installationView(services, updated) };
    },
  );

  route(
    app,
    {
      method: 'POST',
      path: '/api/v1/installations/:id/token',
      summary: 'Mint a new installation token (the old one stops working)',
      auth: 'admin',
      params: id,
      response: tokenAnswer,
    },
    async ({ params }) => ({ token: await inst().rotateToken(params.id) }),
  );

  route(
    app,
    {
      method: 'POST',
      path: '/api/v1/installations/:id/render',
      summary: 'ui_render: initialState / action / render of one component',
      auth: 'token',
      authorize: (req, params) => own(req, params.id, { integration: false }),
      params: id,
      body: { schema: renderBody, limit },
      response: componentAnswer,
      responses: { '501': { description: 'This server runs no integration code' } },
    },
    ({ params, body }) => {
      const runtime = services.runtime;
      if (!runtime) throw new SwitchyardError('not_implemented', 'this server runs no integration code (it has no runtime module)');
      return runtime.render(params.id, body);
    },
  );

  const integrationParam = { name: 'integration name' };

  route(
    app,
    {
      method: 'POST',
      path: '/api/v1/integrations/:name/links',
      summary: 'Make an install link: a bearer token that installs this integration (POST /api/v1/installations) until it expires, under its visibility',
      auth: 'admin',
      params: integrationParam,
      body: { schema: linkBody, limit, optional: true },
      status: 201,
      response: linkAnswer,
      responseDescription: 'The link, shown once',
    },
    async ({ params, body }) => {
      const manifest = services.registry?.get(params.name)?.manifest;
      if (!manifest)
        throw new SwitchyardError('not_found', `integration "${params.name}" is not loaded`, {
          hint: 'see `switchyard integrations list` for loaded integrations and their errors',
        });
      // A link that could never install is refused now rather than by whoever is given it.
      const refused = installRefusal(params.name, manifest, { kind: 'link', integration: params.name, linkId: '(new)' }, serverOrganizations(services.config));
      if (refused) throw refused;
      const { token, link } = await inst().links.mint(params.name, body.expires);
      services.log.info('install link made', { integration: params.name, link: link.id, expires_at: new Date(link.expiresAt).toISOString() });
      return new Response(
        JSON.stringify({
          link: token,
          id: link.id,
          integration: params.name,
          visibility: manifest.visibility,
          expiresAt: new Date(link.expiresAt).toISOString(),
          installUrl: `${services.config.publicUrl}/api/v1/installations`,
        }),
        { status: 201, headers: { 'content-type': 'application/json' } },
      );
    },
  );

  route(
    app,
    {
      method: 'DELETE',
      path: '/api/v1/integrations/:name/links',
      summary: 'Revoke every install link of this integration made so far (links made afterwards work); installations made with them stay',
      auth: 'admin',
      params: integrationParam,
      response: revokeAnswer,
    },
    async ({ params }) => {
      // Whatever state its folder is in, even gone: links made now must not work if it comes back.
      if (!GITBOOK_NAME_PATTERN.test(params.name))
        throw new SwitchyardError('bad_request', `"${params.name}" is not an integration name`, { where: 'name', hint: NAME_HINT });
      const { revokedAt } = await inst().links.revoke(params.name);
      services.log.info('install links revoked', { integration: params.name });
      return { integration: params.name, revokedAt };
    },
  );

  catalogueRoutes(app, services);
  gitbookApiRoutes(app, services);
}
