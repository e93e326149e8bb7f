/**
 * HTTP face of the console, all under /console:
 * - the page and its assets (public: they hold no data);
 * - login (admin token, checked in constant time) -> session cookie; session; logout;
 * - small helpers the page needs that the management API does not have: integration images
 *   (an <img> cannot send a bearer token), sample event payloads, a script's exported components.
 */
import { jsonResponse } from '../http/respond.ts';
import type { H3, H3Event } from 'h3';
import { SwitchyardError } from '../errors.ts';
import { authenticate, isAdminToken } from '../http/app.ts';
import { readJson } from '../http/body.ts';
import { passRoute } from '../http/route.ts';
import { samplePayload, WEBHOOK_EVENT_TYPES } from '../events/index.ts';
import { IMAGE_HEADERS, readImageInside } from '../manifest/index.ts';
import type { Services } from '../module/contract.ts';
import { renderContextFor } from '../runtime/render-context.ts';
import { consoleAssets } from './assets.ts';
import { ASSET_PREFIX, securityHeaders, shellHtml } from './html.ts';
import { consoleUrl, onConsoleHost, requireConsolePage } from '../http/origins.ts';
import { clearedCookie, cookieValue, LOGIN_HEADER, requestSession, SESSION_COOKIE, sessionCookie, withoutCookie, type Sessions } from './session.ts';

/** The render context of a component shown in the console that is not a GitBook block. */
const CONSOLE_CONTEXT = { type: 'console' };

const json = (body: unknown, init: ResponseInit = {}) =>
  jsonResponse(body, { ...init, headers: { 'cache-control': 'no-store', ...(init.headers as Record<string, string> | undefined) } });

/** Admin only: a bearer admin token or a console session (with CSRF for writes). */
async function requireConsoleAdmin(req: Request, services: Services): Promise<void> {
  if ((await authenticate(req, services)).kind !== 'admin')
    throw new SwitchyardError('forbidden', 'the console needs the admin token', { hint: 'installation tokens cannot use the console' });
}

/** The bundle, or a 503 that says why (a source error in a checkout, or a build without the console). */
async function assetsOrError(services: Services) {
  try {
    return await consoleAssets();
  } catch (e) {
    services.log.error('the console cannot be served', { error: (e as Error).message });
    throw new SwitchyardError('console_unavailable', `the console's browser bundle could not be built: ${(e as Error).message}`, {
      hint: 'in a checkout, fix src/console/web/; an executable must be built with the console embedded (scripts/sea/embed.ts)',
    });
  }
}

export function consoleRoutes(app: H3, services: Services, sessions: Sessions): void {
  // The session cookie is `Secure` whenever the console is reached over HTTPS: the request came over
  // TLS (server.tls), or the console's (or the public) URL says https (a TLS proxy in front).
  const secure = (req: Request) =>
    new URL(req.url).protocol === 'https:' || consoleUrl(services).startsWith('https:') || services.config.publicUrl.startsWith('https:');
  const registry = () => services.registry;

  // The console's cookie is the admin's: it must never reach integration code, which sees the
  // request headers of its public endpoint (/v1/integrations/<name>/installations/<id>/...).
  app.use('/v1/**', (event) => {
    const header = event.req.headers.get('cookie');
    if (!header || cookieValue(header, SESSION_COOKIE) === undefined) return;
    const rest = withoutCookie(header, SESSION_COOKIE);
    if (rest) event.req.headers.set('cookie', rest);
    else event.req.headers.delete('cookie');
  });

  // The console answers on its own origin only (http/origins.ts). A browser that arrives at the
  // public endpoints' host is sent there; anything else is refused.
  const guard = (event: H3Event) => {
    if (onConsoleHost(event.req, services)) return;
    const url = new URL(event.req.url);
    if (event.req.method === 'GET' || event.req.method === 'HEAD')
      return new Response(null, { status: 302, headers: { location: `${consoleUrl(services)}${url.pathname}${url.search}`, 'cache-control': 'no-store' } });
    throw new SwitchyardError('not_found', `the console is served at ${consoleUrl(services)}/console/, not on this host`, {
      hint: 'set server.console_url to serve it elsewhere',
    });
  };
  app.use('/console', guard);
  app.use('/console/**', guard);
  passRoute(
    app,
    {
      method: 'GET',
      path: '/',
      summary: "Redirects to the web console's page (on the console's origin)",
      auth: 'none',
      status: 302,
      responseDescription: 'Location: <console origin>/console/',
    },
    () => new Response(null, { status: 302, headers: { location: `${consoleUrl(services)}/console/`, 'cache-control': 'no-store' } }),
  );

  const page = async (event: H3Event) => {
    // The router matches /console and /console/ alike: one canonical address, with the slash.
    if (!new URL(event.req.url).pathname.endsWith('/')) return new Response(null, { status: 302, headers: { location: '/console/' } });
    const assets = await assetsOrError(services);
    return new Response(shellHtml(assets), {
      headers: { 'content-type': 'text/html; charset=utf-8', ...securityHeaders(services.config.publicUrl) },
    });
  };
  app.get('/console', page);

  app.get(`${ASSET_PREFIX}:file`, async (event) => {
    const file = event.context.params!.file;
    const assets = await assetsOrError(services);
    const m = /^app\.([0-9a-f]+)\.(js|css)$/.exec(file);
    if (!m) throw new SwitchyardError('not_found', `no console asset "${file}"`);
    const current = m[1] === assets.hash;
    return new Response(m[2] === 'js' ? assets.js : assets.css, {
      headers: {
        'content-type': m[2] === 'js' ? 'text/javascript; charset=utf-8' : 'text/css; charset=utf-8',
        'x-content-type-options': 'nosniff',
        // An old hash (after a rebuild) gets today's file, uncached.
        'cache-control': current ? 'public, max-age=31536000, immutable' : 'no-store',
      },
    });
  });

  app.post('/console/login', async (event) => {
    requireConsolePage(event.req);
    if (event.req.headers.get(LOGIN_HEADER) !== 'login')
      throw new SwitchyardError('forbidden', `log in from the console page (the request needs the ${LOGIN_HEADER} header)`);
    const body = await readJson<Record<string, unknown>>(event.req, 16 * 1024);
    const token = typeof body.token === 'string' ? body.token.trim() : '';
    if (!token) throw new SwitchyardError('bad_request', 'paste the admin token', { where: 'token' });
    if (!isAdminToken(event.req, token, services)) {
      services.log.warn('console login refused: wrong token');
      throw new SwitchyardError('unauthorized', 'that is not the admin token', {
        where: 'token',
        hint: 'use admin_token from config.yaml, or the one in <data_dir>/admin-token',
      });
    }
    const { session, value } = sessions.issue();
    services.log.info('console login', { expires_at: new Date(session.expiresAt).toISOString() });
    return json(
      { expiresAt: new Date(session.expiresAt).toISOString(), csrf: session.csrf },
      { headers: { 'set-cookie': sessionCookie(value, { maxAgeMs: sessions.ttlMs, secure: secure(event.req) }) } },
    );
  });

  app.get('/console/session', async (event) => {
    requireConsolePage(event.req); // it answers the CSRF value
    let session;
    try {
      session = await requestSession(event.req, sessions);
    } catch (e) {
      if (!(e instanceof SwitchyardError)) throw e;
      session = undefined;
    }
    // 200 either way: "not logged in" is an answer here, not a failure.
    if (!session) return json({ authenticated: false }, { headers: { 'set-cookie': clearedCookie(secure(event.req)) } });
    return json({ authenticated: true, csrf: session.csrf, expiresAt: new Date(session.expiresAt).toISOString(), publicUrl: services.config.publicUrl });
  });

  app.post('/console/logout', async (event) => {
    const session = await requestSession(event.req, sessions);
    if (session) await sessions.revoke(session);
    return json({ loggedOut: true }, { headers: { 'set-cookie': clearedCookie(secure(event.req)) } });
  });

  app.get('/console/integrations/:name/icon', (event) => imageResponse(event.req, event.context.params!.name, (m) => m.icon as string | undefined, true));
  app.get('/console/integrations/:name/preview/:n', async (event) => {
    const n = Number(event.context.params!.n);
    return imageResponse(event.req, event.context.params!.name, (m) => (m.previewImages as string[] | undefined)?.[n], false);
  });

  /** An integration, waiting for it while the server starts (see Registry.whenLoaded). */
  const integrationNamed = async (name: string) => {
    const r = registry();
    return r?.get(name) ?? (await r?.whenLoaded(name));
  };

  async function imageResponse(req: Request, name: string, pick: (manifest: Record<string, unknown>) => string | undefined, svg: boolean): Promise<Response> {
    await requireConsoleAdmin(req, services);
    const integration = await integrationNamed(decodeURIComponent(name));
    // A built-in integration has no folder to read from.
    const image =
      integration && !integration.builtin ? readImageInside(integration.dir, pick(integration.manifest as Record<string, unknown>), svg) : undefined;
    if (!image) throw new SwitchyardError('not_found', `integration "${name}" has no such image`);
    return new Response(new Uint8Array(image.bytes), { headers: { 'content-type': image.type, ...IMAGE_HEADERS } });
  }

  app.get('/console/api/samples/:type', async (event) => {
    await requireConsoleAdmin(event.req, services);
    const type = event.context.params!.type;
    if (!(WEBHOOK_EVENT_TYPES as readonly string[]).includes(type))
      throw new SwitchyardError('bad_request', `no sample for "${type}"`, { where: 'type', hint: `types: ${WEBHOOK_EVENT_TYPES.join(', ')}` });
    return json({ type, payload: samplePayload(type) });
  });

  /** Component ids of an integration: its manifest's blocks and what its script exports. */
  app.get('/console/api/integrations/:name/components', async (event) => {
    await requireConsoleAdmin(event.req, services);
    const name = decodeURIComponent(event.context.params!.name);
    const integration = await integrationNamed(name);
    if (!integration) throw new SwitchyardError('not_found', `integration "${name}" is not loaded`);
    // Each with the context its render is given here: GitBook's for a GitBook block, else the console's.
    const blocks = ((integration.manifest as { blocks?: Array<{ id: string; title?: string; description?: string }> }).blocks ?? []).map((b) => ({
      id: b.id,
      title: b.title ?? b.id,
      description: b.description ?? '',
      context: renderContextFor(integration, b.id, CONSOLE_CONTEXT),
    }));
    let exported: string[] | null = null;
    const runtime = services.runtime;
    if (runtime && integration.script) {
      try {
        exported = (await runtime.exportsOf(integration)).components;
      } catch (e) {
        services.log.warn('console: cannot list exported components', { integration: name, error: (e as Error).message });
      }
    }
    return json({ integration: name, blocks, exported, context: CONSOLE_CONTEXT });
  });
}
