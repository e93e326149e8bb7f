/**
 * GitBook's REST API shape at `environment.apiEndpoint`, for GitBook integrations' context.api:
 * - installation endpoints (`/integrations/{name}/installations[/{id}[/spaces|sites/{id}]]`,
 *   `/integrations/{name}/spaces|sites`, `.../installations/{id}/tokens`) answered here from this
 *   server's installations;
 * - content endpoints (`/spaces/...`, `/orgs/...`, `/urls/...`) hold data this server does not
 *   have: forwarded to `gitbook.api_url` with `gitbook.api_token` when configured, else 501.
 * An installation's token reaches its own installation; the integration-wide token of an
 * invocation (GitBook's `apiTokens.integration`) reaches every installation of its integration and
 * may mint installation tokens for them; the admin reaches all. Content calls are held to where
 * the integration is installed (see contentReach), not only to the scopes it declares.
 */
import type { H3, H3Event } from 'h3';
import { SwitchyardError } from '../errors.ts';
import { principalOf, type Principal } from '../http/app.ts';
import { readJson } from '../http/body.ts';
import { installationEndpoint, installationLocation } from './urls.ts';
import { invocationTokenTtl } from './tokens.ts';
import type { Services, ServicesWith } from '../module/contract.ts';
import { isIntegrationCode, mayListFor, mayReveal, redactConfiguration, requireReach } from './access.ts';
import type { Config } from '../config/index.ts';
import type { Installation } from './service.ts';
import { passRoute, type RouteSpec } from '../http/route.ts';
import { any, array, dateTime, named, number, object, oneOf, optional, record, string, type Infer, type Schema } from '../schema/index.ts';
import { INSTALLATION_STATUSES } from './api.ts';

/** One installation as GitBook's API answers it (view below); a space or site installation is its own `installation`. */
const gitbookInstallation = named(
  'GitBookInstallation',
  object({
    id: string(),
    installation: optional(string({ description: 'a space or site installation: its own id' })),
    space: optional(string()),
    site: optional(string()),
    integration: string(),
    status: oneOf(INSTALLATION_STATUSES),
    configuration: record(any(), { description: 'credentials in URLs redacted unless the caller may see them' }),
    externalIds: array(string()),
    urls: object({ location: string(), publicEndpoint: string(), publicContentEndpoint: string() }),
    target: optional(object({ organization: string() })),
    space_selection: optional(oneOf(['all'])),
    site_selection: optional(oneOf(['all'])),
    createdAt: optional(dateTime()),
    updatedAt: optional(dateTime()),
  }),
);
const gitbookList = object({
  items: array(gitbookInstallation),
  count: number({ integer: true }),
  next: optional(object({ page: string({ description: 'hand it back as ?page= for the next page' }) })),
});
const tokenAnswer = object({ token: string(), expiresAt: dateTime() });
/** The body of an update: GitBook replaces the configuration (keys left out are removed on an organization installation). */
const updateBody = object({ configuration: optional(record(any())), externalIds: optional(array(string())) });

/** One installation as GitBook's API answers it; stored credentials only for who may see them. */
function view(services: Services, i: Installation, reveal: boolean) {
  const publicUrl = services.config.publicUrl;
  const endpoint = installationEndpoint(publicUrl, i.integration, i.id);
  const urls = { location: installationLocation(publicUrl, i.integration, i.id), publicEndpoint: endpoint, publicContentEndpoint: endpoint };
  const base = { integration: i.integration, status: i.status, configuration: redactConfiguration(i.configuration, reveal), externalIds: i.externalIds, urls };
  // A space or site installation is its own installation here: `installation` is its own id.
  if (i.target === 'space') return { id: i.id, installation: i.id, space: i.space, ...base };
  if (i.target === 'site') return { id: i.id, installation: i.id, site: i.site, ...base };
  return {
    id: i.id,
    ...base,
    target: { organization: services.config.gitbook.organization },
    space_selection: 'all' as const,
    site_selection: 'all' as const,
    createdAt: i.createdAt,
    updatedAt: i.updatedAt,
  };
}

/** Scopes that allow a content call: reads need one of the read scopes of the area, writes a write one. */
function contentScopes(path: string, method: string): string[] {
  const write = method !== 'GET' && method !== 'HEAD';
  if (/^\/spaces\/[^/]+\/git\//.test(path)) return ['space:git:sync'];
  if (path.startsWith('/spaces/') || path.startsWith('/urls/'))
    return write ? ['space:content:write', 'space:metadata:write'] : ['space:content:read', 'space:metadata:read'];
  if (/\/adaptive-schema$/.test(path)) return write ? ['site:adaptive:write'] : ['site:adaptive:read', 'site:adaptive:write'];
  return write ? ['site:metadata:write'] : ['site:metadata:read'];
}

/**
 * Throws 403 unless `p` may have `method path` forwarded upstream. gitbook.api_token is the
 * operator's and answers for all it can see; the scopes a manifest declares are the integration's
 * own claim, which nobody reviews. So a content call is also held to where the integration is
 * installed (active installations): `/spaces/{id}` to a space installation on that space,
 * `/orgs/{id}` to gitbook.organization, its `/sites/{id}` to a site installation on that site; an
 * organization installation covers every space and site, and alone covers the organization's other
 * paths and `/urls/...` (content found by URL, in any space). Only the integration's own code, with
 * an invocation's tokens: never a long-lived installation token, nor the admin (the caller a
 * leaked or scripted token would be). Encoded separators and dots are refused, so the path checked
 * is the path the upstream reads.
 */
function contentReach(p: Principal, method: string, path: string, installed: (integration: string) => Installation[], gitbook: Config['gitbook']): void {
  const call = `${method} ${path}`;
  if (!isIntegrationCode(p) || p.kind === 'admin')
    throw new SwitchyardError(
      'forbidden',
      `${call} is forwarded to GitBook only for an integration's own code, with its invocation's tokens; not for ${p.kind === 'admin' ? 'the admin token' : p.kind === 'link' ? 'an install link' : 'a long-lived installation token'}`,
    );
  if (/%2f|%5c|%2e|\\/i.test(path)) throw new SwitchyardError('bad_request', `${call}: encoded slashes, backslashes or dots are not forwarded`);
  let parts: string[];
  try {
    parts = path.split('/').slice(1).map(decodeURIComponent);
  } catch {
    throw new SwitchyardError('bad_request', `${call}: the path is not valid percent-encoding`);
  }
  const [area, id, sub, subId] = parts;
  const installations = installed(p.integration);
  const organizationWide = installations.some((i) => i.target === 'organization');
  const on = (kind: 'space' | 'site', which: string | undefined) =>
    which !== undefined && which !== '' && installations.some((i) => i.target === kind && i[kind] === which);
  const refuse = (why: string): never => {
    throw new SwitchyardError('forbidden', `${call} is not forwarded: ${why}`, { hint: 'install the integration there, or on the organization' });
  };
  if (area === 'spaces') {
    if (!on('space', id) && !organizationWide) refuse(`"${p.integration}" is not installed on space "${id ?? ''}" nor on the organization`);
  } else if (area === 'orgs') {
    if (id !== gitbook.organization) refuse(`"${id ?? ''}" is not this server's organization ("${gitbook.organization}", gitbook.organization)`);
    if (sub === 'sites' && subId) {
      if (!on('site', subId) && !organizationWide) refuse(`"${p.integration}" is not installed on site "${subId}" nor on the organization`);
    } else if (!organizationWide) refuse(`"${p.integration}" is not installed on the organization`);
  } else if (area === 'urls') {
    if (!organizationWide) refuse(`content found by URL may be in any space: only an organization installation reaches it, and "${p.integration}" has none`);
  } else refuse('not a content path');
}

/** GitBook's list paging: `limit` (1-1000) and `page` (an offset handed back as `next.page`). */
function page<T>(items: T[], q: URLSearchParams): { items: T[]; count: number; next?: { page: string } } {
  const limit = Math.min(Math.max(Number.parseInt(q.get('limit') ?? '', 10) || 1000, 1), 1000);
  const from = Math.max(Number.parseInt(q.get('page') ?? '', 10) || 0, 0);
  const slice = items.slice(from, from + limit);
  return { items: slice, count: items.length, ...(from + limit < items.length ? { next: { page: String(from + limit) } } : {}) };
}

export function gitbookApiRoutes(app: H3, services: ServicesWith<'installations'>): void {
  const inst = () => services.installations;
  const limit = services.config.server.body_limit;

  /** The installations the caller may see of integration `name`: all for the admin and the integration, else its own. */
  async function visible(p: Principal, name: string): Promise<Installation[]> {
    const scope = mayListFor(p, name);
    if (!scope)
      throw new SwitchyardError(
        'forbidden',
        `this token belongs to ${p.kind === 'admin' ? 'the admin' : `"${(p as { integration: string }).integration}"`}, not "${name}"`,
      );
    const all = await inst().list({ integration: name });
    return scope === 'all' ? all : all.filter((i) => p.kind === 'installation' && i.id === p.installationId);
  }

  async function one(p: Principal, name: string, id: string): Promise<Installation> {
    if (p.kind === 'installation' && (p.integration !== name || p.installationId !== id))
      throw new SwitchyardError('forbidden', `this token belongs to installation ${p.installationId} of "${p.integration}", not ${id} of "${name}"`);
    if (p.kind === 'integration' && p.integration !== name)
      throw new SwitchyardError('forbidden', `this token belongs to integration "${p.integration}", not "${name}"`);
    const i = await inst().find(id);
    if (!i || i.integration !== name) throw new SwitchyardError('not_found', `no installation ${id} of integration "${name}"`);
    requireReach(p, i);
    return i;
  }

  /** The space or site installation `which` under installation `id` (itself, when it is that one). */
  async function child(p: Principal, name: string, id: string, kind: 'space' | 'site', which: string): Promise<Installation> {
    const parent = await one(p, name, id);
    if (parent.target === kind && parent[kind] === which) return parent;
    // Under an organization installation: the integration's installation on that space or site
    // (installations are flat here), for who may reach every installation of the integration.
    const found =
      parent.target === 'organization' && mayListFor(p, name) === 'all'
        ? (await inst().list({ integration: name })).find((i) => i.target === kind && i[kind] === which)
        : undefined;
    if (!found) throw new SwitchyardError('not_found', `integration "${name}" has no installation on ${kind} "${which}" under installation ${id}`);
    return found;
  }

  async function update(event: H3Event, target: Installation) {
    const body = await readJson<Record<string, unknown>>(event.req, limit);
    for (const k of Object.keys(body))
      if (k !== 'configuration' && k !== 'externalIds')
        throw new SwitchyardError('bad_request', `"${k}" cannot be changed here; send configuration and/or externalIds`, { where: k });
    const { configuration, externalIds } = body;
    if (configuration !== undefined && (typeof configuration !== 'object' || configuration === null || Array.isArray(configuration)))
      throw new SwitchyardError('bad_request', 'configuration must be an object', { where: 'configuration' });
    if (externalIds !== undefined && (!Array.isArray(externalIds) || externalIds.some((x) => typeof x !== 'string')))
      throw new SwitchyardError('bad_request', 'externalIds must be a list of strings', { where: 'externalIds' });
    let updated = target;
    if (configuration) {
      // GitBook replaces the configuration: keys left out are removed. Not on a space or site
      // installation: it holds the account's configuration and its own in one here (GitBook
      // keeps two, updated by separate calls), so one call's keys must not erase the other's.
      const patch: Record<string, unknown> = { ...(configuration as Record<string, unknown>) };
      if (target.target === 'organization') for (const k of Object.keys(target.configuration)) if (!(k in patch)) patch[k] = null;
      updated = (
        await inst().configure(target.id, patch, { byCode: isIntegrationCode(principalOf(event.req)), externalIds: externalIds as string[] | undefined })
      ).installation;
    } else if (externalIds) updated = await inst().setExternalIds(target.id, externalIds as string[]);
    return view(services, updated, mayReveal(principalOf(event.req)));
  }

  const base = '/api/v1/integrations/:name';
  /** Filters GitBook's list calls take: `externalId` (one of an installation's externalIds). */
  const listed = async (event: H3Event, kind?: 'space' | 'site') => {
    const q = new URL(event.req.url).searchParams;
    const p = principalOf(event.req);
    const externalId = q.get('externalId');
    const items = (await visible(p, event.context.params!.name)).filter(
      (i) => (!kind || i.target === kind) && (!externalId || i.externalIds.includes(externalId)),
    );
    return page(
      items.map((i) => view(services, i, mayReveal(p))),
      q,
    );
  };
  /** A route of GitBook's API shape: the /api/v1 guard took the token, the handler decides what it reaches. */
  const gitbook = <const P extends string, R extends Schema<any>>(
    method: 'GET' | 'PATCH' | 'POST',
    path: P,
    summary: string,
    response: R,
    handler: (event: H3Event) => Infer<R> | Promise<Infer<R>>,
    more: Pick<RouteSpec<P, undefined, undefined, R>, 'responses'> = {},
  ) =>
    passRoute(
      app,
      {
        method,
        path,
        summary: `GitBook API shape: ${summary}`,
        auth: 'token',
        response,
        ...(method === 'PATCH' ? { passThrough: { media: 'application/json', schema: updateBody } } : {}),
        ...more,
      },
      handler,
    );
  gitbook('GET', `${base}/installations`, 'installations of an integration', gitbookList, (event) => listed(event));
  for (const kind of ['space', 'site'] as const) {
    gitbook('GET', `${base}/${kind}s`, `${kind} installations`, gitbookList, (event) => listed(event, kind));
    gitbook('GET', `${base}/installations/:id/${kind}s/:which`, `one ${kind} installation`, gitbookInstallation, async (event) => {
      const { name, id, which } = event.context.params!;
      const p = principalOf(event.req);
      return view(services, await child(p, name, id, kind, which), mayReveal(p));
    });
    gitbook('PATCH', `${base}/installations/:id/${kind}s/:which`, `update one ${kind} installation`, gitbookInstallation, async (event) => {
      const { name, id, which } = event.context.params!;
      return update(event, await child(principalOf(event.req), name, id, kind, which));
    });
  }
  gitbook('GET', `${base}/installations/:id`, 'one installation', gitbookInstallation, async (event) => {
    const p = principalOf(event.req);
    return view(services, await one(p, event.context.params!.name, event.context.params!.id), mayReveal(p));
  });
  gitbook('PATCH', `${base}/installations/:id`, 'update one installation', gitbookInstallation, async (event) =>
    update(event, await one(principalOf(event.req), event.context.params!.name, event.context.params!.id)),
  );

  // GitBook's createIntegrationInstallationToken (api.createInstallationClient): the integration
  // acting as one of its installations. A short-lived invocation token, never the long-lived one.
  gitbook(
    'POST',
    `${base}/installations/:id/tokens`,
    "a short-lived token acting as this installation (the integration's own token or the admin's; createInstallationClient)",
    tokenAnswer,
    async (event) => {
      const p = principalOf(event.req);
      if (p.kind === 'installation') throw new SwitchyardError('forbidden', 'installation tokens are minted with the integration token (or the admin token)');
      const i = await one(p, event.context.params!.name, event.context.params!.id);
      if (i.status === 'uninstalled') throw new SwitchyardError('gone', `installation ${i.id} is uninstalled`);
      if (i.status === 'paused') throw new SwitchyardError('conflict', `installation ${i.id} is paused`);
      const ttl = invocationTokenTtl(services.config.sandbox);
      return { token: inst().invocationToken(i.id, ttl), expiresAt: new Date(Date.now() + ttl / 2).toISOString() };
    },
    { responses: { '409': { description: 'The installation is paused' }, '410': { description: 'The installation is uninstalled' } } },
  );

  // Content endpoints: forwarded upstream, or a 501 that says how to configure it.
  const content = async (event: H3Event) => {
    const url = new URL(event.req.url);
    const path = url.pathname.slice('/api/v1'.length);
    const method = event.req.method;
    const p = principalOf(event.req);
    const needs = contentScopes(path, method);
    if ((p.kind === 'installation' || p.kind === 'integration') && !needs.some((s) => p.scopes.includes(s)))
      throw new SwitchyardError(
        'forbidden',
        `${method} ${path} needs one of the scopes ${needs.join(', ')}; the manifest of "${p.integration}" does not ask for it`,
      );
    await inst().fresh();
    contentReach(
      p,
      method,
      path,
      (integration) =>
        inst()
          .active()
          .filter((i) => i.integration === integration),
      services.config.gitbook,
    );
    const upstream = services.config.gitbook?.api_url;
    if (!upstream)
      throw new SwitchyardError('not_implemented', `${method} ${path} reads GitBook content, which this server does not hold`, {
        hint: 'set gitbook.api_url (https://api.gitbook.com) and gitbook.api_token (${{ env.GITBOOK_API_TOKEN }}) in config.yaml to forward these calls to GitBook',
      });
    const target = `${upstream.replace(/\/+$/, '')}/v1${path}${url.search}`;
    const body = method === 'GET' || method === 'HEAD' ? undefined : await event.req.arrayBuffer();
    const res = await fetch(target, {
      method,
      headers: {
        accept: 'application/json',
        ...(body ? { 'content-type': event.req.headers.get('content-type') ?? 'application/json' } : {}),
        ...(services.config.gitbook?.api_token ? { authorization: `Bearer ${services.config.gitbook.api_token}` } : {}),
      },
      body,
      redirect: 'manual',
      signal: AbortSignal.timeout(services.config.sandbox.subrequest_timeout),
    });
    return new Response(await res.arrayBuffer(), { status: res.status, headers: { 'content-type': res.headers.get('content-type') ?? 'application/json' } });
  };
  for (const [prefix, what] of [
    ['/api/v1/spaces/**', 'spaces'],
    ['/api/v1/orgs/**', 'organizations'],
    ['/api/v1/urls/**', 'URL resolution'],
  ] as const)
    passRoute(
      app,
      {
        method: 'ANY',
        path: prefix,
        summary: `GitBook API shape: ${what}, forwarded upstream (gitbook.api_url)`,
        auth: 'token',
        passThrough: { media: 'application/json', schema: record(any()), required: false },
        responseDescription: "GitBook's answer, as it came",
        responses: { '501': { description: 'No upstream platform API configured (gitbook.api_url)' } },
      },
      content,
    );
}
