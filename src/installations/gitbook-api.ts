/**
 * GitBook's REST API shape at `environment.apiEndpoint`, for GitBook integrations' context.api:
 * - installation endpoints (`/integrations/{name}/installations[/{id}[/spaces|sites/{id}]]`,
 *   `/integrations/{name}/spaces|sites`) answered here from this server's installations;
 * - content endpoints (`/spaces/...`, `/orgs/...`, `/urls/...`) hold data this server does not
 *   have: forwarded to `gitbook.api_url` with `gitbook.api_token` when configured, else 501.
 * An installation's token reaches its own installation only (the hosted platform's integration
 * token reaches them all; here that stays with the admin). Content calls need a scope that covers
 * them, as on the platform.
 */
import type { H3, H3Event } from 'h3';
import { SwitchyardError } from '../errors.ts';
import { principalOf } from '../http/app.ts';
import { readJson } from '../http/body.ts';
import { installationEndpoint } from '../runtime/environment.ts';
import type { Services } from '../services.ts';
import type { Change, Installation, Installations } from './service.ts';

/** One installation as GitBook's API answers it. */
function view(services: Services, i: Installation) {
  const endpoint = installationEndpoint(services.config.publicUrl, i.integration, i.id);
  const base = { integration: i.integration, status: i.status, configuration: i.configuration, externalIds: i.externalIds };
  if (i.target === 'space') return { ...base, id: i.id, installation: i.id, space: i.space, target: 'space', urls: { publicEndpoint: endpoint, publicContentEndpoint: endpoint } };
  if (i.target === 'site') return { ...base, id: i.id, installation: i.id, site: i.site, target: 'site', urls: { publicEndpoint: endpoint, publicContentEndpoint: endpoint } };
  return { ...base, id: i.id, target: 'organization', space_selection: 'all', urls: { publicEndpoint: endpoint } };
}

/** Scopes that allow a content call: reads need one of the read scopes of the area, writes a write one. */
function contentScopes(path: string, method: string): string[] {
  const write = method !== 'GET' && method !== 'HEAD';
  if (/^\/spaces\/[^/]+\/git\//.test(path)) return ['space:git:sync'];
  if (path.startsWith('/spaces/') || path.startsWith('/urls/')) return write ? ['space:content:write', 'space:metadata:write'] : ['space:content:read', 'space:metadata:read'];
  if (/\/adaptive-schema$/.test(path)) return write ? ['site:adaptive:write'] : ['site:adaptive:read', 'site:adaptive:write'];
  return write ? ['site:metadata:write'] : ['site:metadata:read'];
}

export function gitbookApiRoutes(app: H3, services: Services, afterChange: (c: Change) => void): void {
  const inst = () => services.installations as Installations;
  const limit = services.config.server.body_limit;

  /** The installations the caller may see of integration `name`: all for the admin, else its own. */
  function visible(req: Request, name: string): Installation[] {
    const p = principalOf(req);
    if (p.kind === 'installation' && p.integration !== name)
      throw new SwitchyardError('forbidden', `this token belongs to an installation of "${p.integration}", not "${name}"`);
    const all = inst().list({ integration: name });
    return p.kind === 'admin' ? all : all.filter((i) => i.id === p.installationId);
  }

  function one(req: Request, name: string, id: string): Installation {
    const p = principalOf(req);
    if (p.kind === 'installation' && (p.integration !== name || p.installationId !== id))
      throw new SwitchyardError('forbidden', `this token belongs to installation ${p.installationId} of "${p.integration}", not ${id} of "${name}"`);
    const i = inst().get(id);
    if (!i || i.integration !== name) throw new SwitchyardError('not_found', `no installation ${id} of integration "${name}"`);
    return i;
  }

  /** The space or site installation `which` under installation `id` (itself, when it is that one). */
  function child(req: Request, name: string, id: string, kind: 'space' | 'site', which: string): Installation {
    const parent = one(req, name, id);
    if (parent.target === kind && parent[kind] === which) return parent;
    const p = principalOf(req);
    const found = parent.target === 'organization' && p.kind === 'admin' ? inst().list({ integration: name }).find((i) => i.target === kind && i[kind] === which) : undefined;
    if (!found) throw new SwitchyardError('not_found', `integration "${name}" has no installation on ${kind} "${which}" under installation ${id}`);
    return found;
  }

  async function update(event: H3Event, target: Installation) {
    const body = await readJson<Record<string, unknown>>(event.req, limit);
    for (const k of Object.keys(body))
      if (k !== 'configuration' && k !== 'externalIds') throw new SwitchyardError('bad_request', `"${k}" cannot be changed here; send configuration and/or externalIds`, { where: k });
    const { configuration, externalIds } = body;
    if (configuration !== undefined && (typeof configuration !== 'object' || configuration === null || Array.isArray(configuration)))
      throw new SwitchyardError('bad_request', 'configuration must be an object', { where: 'configuration' });
    if (externalIds !== undefined && (!Array.isArray(externalIds) || externalIds.some((x) => typeof x !== 'string')))
      throw new SwitchyardError('bad_request', 'externalIds must be a list of strings', { where: 'externalIds' });
    const result = services.store.db.transaction(() => {
      let change: Change | undefined;
      if (configuration) {
        // GitBook replaces the configuration: keys left out are removed.
        const patch: Record<string, unknown> = { ...(configuration as Record<string, unknown>) };
        for (const k of Object.keys(target.configuration)) if (!(k in patch)) patch[k] = null;
        change = inst().configure(target.id, patch);
      }
      const updated = externalIds ? inst().setExternalIds(target.id, externalIds as string[]) : (change?.installation ?? target);
      return { change, updated };
    })();
    if (result.change) afterChange(result.change);
    return view(services, result.updated);
  }

  const base = '/api/v1/integrations/:name';
  app.get(`${base}/installations`, (event) => {
    const q = new URL(event.req.url).searchParams;
    const externalId = q.get('externalId');
    const items = visible(event.req, event.context.params!.name).filter((i) => !externalId || i.externalIds.includes(externalId));
    return { items: items.map((i) => view(services, i)), count: items.length };
  });
  for (const kind of ['space', 'site'] as const) {
    app.get(`${base}/${kind}s`, (event) => {
      const items = visible(event.req, event.context.params!.name).filter((i) => i.target === kind);
      return { items: items.map((i) => view(services, i)), count: items.length };
    });
    app.get(`${base}/installations/:id/${kind}s/:which`, (event) => {
      const { name, id, which } = event.context.params!;
      return view(services, child(event.req, name, id, kind, which));
    });
    app.patch(`${base}/installations/:id/${kind}s/:which`, (event) => {
      const { name, id, which } = event.context.params!;
      return update(event, child(event.req, name, id, kind, which));
    });
  }
  app.get(`${base}/installations/:id`, (event) => view(services, one(event.req, event.context.params!.name, event.context.params!.id)));
  app.patch(`${base}/installations/:id`, (event) => update(event, one(event.req, event.context.params!.name, event.context.params!.id)));

  // Content endpoints: forwarded upstream, or a 501 that says how to configure it.
  const content = async (event: H3Event) => {
    const url = new URL(event.req.url);
    const path = url.pathname.slice('/api/v1'.length);
    const method = event.req.method;
    const p = principalOf(event.req);
    const needs = contentScopes(path, method);
    if (p.kind === 'installation' && !needs.some((s) => p.scopes.includes(s)))
      throw new SwitchyardError('forbidden', `${method} ${path} needs one of the scopes ${needs.join(', ')}; the manifest of "${p.integration}" does not ask for it`);
    const upstream = services.config.gitbook?.api_url;
    if (!upstream)
      throw new SwitchyardError(
        'not_implemented',
        `${method} ${path} reads GitBook content, which this server does not hold`,
        { hint: 'set gitbook.api_url (https://api.gitbook.com) and gitbook.api_token (${{ env.GITBOOK_API_TOKEN }}) in config.yaml to forward these calls to GitBook' },
      );
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
  for (const prefix of ['/api/v1/spaces/**', '/api/v1/orgs/**', '/api/v1/urls/**']) app.all(prefix, content);
}
