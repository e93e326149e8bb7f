/**
 * The h3 application: JSON errors in one shape, the admin-token guard on /api/v1, health, and the
 * routes the composition root (src/server/) hands it. This layer imports no module: what it needs of
 * them (token and session resolvers, readiness, a response observer) arrives on HttpServices.
 */
import { jsonResponse } from './respond.ts';
import { H3, type HTTPError } from 'h3';
import { ERROR_CODES, errorCodeOf, SwitchyardError, type ErrorCode } from '../errors.ts';
import type { LoadedConfig } from '../config/index.ts';
import type { Logger } from '../log/index.ts';
import type { Store } from '../store/index.ts';
import { bearerToken, INSTALL_LINK_PREFIX, knownSecretEqual } from './auth.ts';
import { clientAddress, type AuthThrottle } from './throttle.ts';
import { VERSION } from '../version.ts';
import { openApiDocument, type OpenApiPart } from './openapi.ts';
import { any, record } from '../schema/index.ts';
import { storeFailureCode } from '../store/health.ts';
import { setPrincipal, type Principal } from './principal.ts';
import { passRoute, routeOperations, takesInstallLink } from './route.ts';
import { healthSchema } from './health-api.ts';
import type { PublicLane } from './public-lane.ts';

export { principalOf, requireAdmin, type Principal } from './principal.ts';

/** An error answer in the one shape, with the code's status. */
export function jsonError(code: ErrorCode, message: string, extra: Record<string, unknown> = {}): Response {
  return jsonResponse({ error: { code, message, ...extra } }, { status: ERROR_CODES[code].status });
}

/** Installation tokens are resolved by the installations module when it is loaded. */
export type TokenResolver = (token: string) => Promise<Principal | undefined> | Principal | undefined;

/**
 * The web console's session cookie (src/console): the admin principal, or undefined without the
 * cookie; throws when the cookie is stale or a write lacks its CSRF header.
 */
export type SessionResolver = (req: Request) => Promise<Principal | undefined> | Principal | undefined;

/**
 * What the HTTP layer reads of the running server. The server's services object is one (it has more);
 * the optional hooks are attached by the modules that provide them, and absent when a module is not
 * loaded.
 */
export interface HttpServices {
  config: LoadedConfig;
  log: Logger;
  store: Store;
  adminToken: string;
  startedAt: number;
  /** Set once shutdown begins. */
  closing: boolean;
  /** Serving processes beside this one, under the supervisor (src/process/serving.ts). */
  processes?: { count: number; allReady(): boolean };
  /** The failed-token throttle of the admin token (set by the server). */
  authThrottle?: AuthThrottle;
  /** Installation and invocation tokens (the installations module). */
  resolveToken?: TokenResolver;
  /** The console's session cookie (the console module). */
  resolveSession?: SessionResolver;
  /** How far the start-up load of the integrations is, as /healthz shows it (the registry module). */
  readiness?: () => { ready: boolean };
  /** The other nodes on a PostgreSQL store, and integration versions that differ (registry/peers.ts). */
  peers?: () => { node: string; count: number; differ: unknown[] };
  /** What a management request waits for while the integrations load (the registry module). */
  awaitIntegrations?: (pathname: string) => Promise<void> | undefined;
  /** Sees every answer, errors included (the metrics module). */
  onHttpResponse?: (method: string, route: string | null, status: number) => void;
  /** The public endpoints' handler, for the lane in front of the app (http/public-lane.ts; the runtime module). */
  publicLane?: PublicLane;
}

export async function authenticate(req: Request, services: HttpServices): Promise<Principal> {
  const token = bearerToken(req.headers.get('authorization'));
  if (!token && !req.headers.get('authorization')) {
    const session = await services.resolveSession?.(req);
    if (session) return session;
  }
  if (!token)
    throw new SwitchyardError('unauthorized', 'missing Authorization: Bearer <token>', {
      hint: 'use the admin_token from config.yaml, or the one in <data_dir>/admin-token',
    });
  // Installation and invocation tokens first: they cannot be guessed, so the throttle below (which
  // guards the admin token) never stands between an integration and the API.
  const p = await services.resolveToken?.(token);
  if (p) return p;
  if (isAdminToken(req, token, services)) return { kind: 'admin' };
  if (token.startsWith(INSTALL_LINK_PREFIX))
    throw new SwitchyardError('install_link_invalid', 'this install link is not valid: it was altered (cut short when copied?), or another server made it', {
      hint: 'copy the whole link again, or ask for a new one (`switchyard integrations link <name>`)',
    });
  throw new SwitchyardError('unauthorized', 'the token is not valid', {
    hint: 'use the admin_token from config.yaml, or the one in <data_dir>/admin-token',
  });
}

/**
 * Compare a presented token with the admin token, under the failed-token throttle: refused with 429
 * while the client's address is blocked (nothing compared), and a mismatch counts against it.
 * The API's bearer check and the console login both go through here.
 */
const adminTokenEqual = knownSecretEqual();

export function isAdminToken(req: Request, token: string, services: HttpServices): boolean {
  const throttle = services.authThrottle;
  const address = clientAddress(req, services.config.server.trust_proxy);
  throttle?.check(address);
  if (adminTokenEqual(token, services.adminToken)) return true;
  if (throttle?.fail(address)) services.log.warn('authentication refused for a while: too many wrong tokens', { address });
  return false;
}

/**
 * The answer to what a route threw: the app's (h3's onError) and the public lane's
 * (http/public-lane.ts). Errors are logged once, here, with secrets redacted.
 */
export function errorAnswer(error: unknown, services: HttpServices, method: string, url: string): Response {
  const cause = (error as HTTPError).cause ?? error;
  if (cause instanceof SwitchyardError) {
    // A storage failure the store already worded (a lock held past the wait, PostgreSQL out of
    // reach): /healthz says failing too, and the probe watches for the store's return.
    if (storeFailureCode(cause, services.store.localDir)) services.store.health.failed(cause);
    return jsonResponse(cause.toJSON(), { status: cause.status, headers: cause.headers });
  }
  if (storeFailureCode(cause, services.store.localDir)) {
    // A full disk, a read-only or locked database, a database out of reach: say so, and what to do (never a bare 500).
    // (An operating system's code counts only for a file of the store's: see storeFailureCode.)
    services.store.health.failed(cause);
    const e = services.store.health.storageError(cause);
    services.log.error(e.code === 'storage_unavailable' ? 'the store cannot be reached' : 'a write to the store failed', { error: e.message });
    return jsonResponse(e.toJSON(), { status: e.status, headers: e.headers });
  }
  const status = (error as HTTPError).status ?? 500;
  if (status >= 500) {
    services.log.error('request failed', { error: cause instanceof Error ? cause : String(cause) });
    return jsonError('internal', 'Internal server error');
  }
  const message = (error as HTTPError).message || 'request failed';
  if (status === 404 && message.startsWith('Cannot find any route'))
    return jsonError('no_route', `no route for ${method} ${new URL(url).pathname}`, { hint: 'see GET /openapi.json' });
  // An h3 error of another status: the code of that status (bad_request for one the table lacks).
  return jsonError(errorCodeOf(undefined, status), message);
}

/**
 * The app, with the routes `routes` adds (every module's, from the composition root), each declared
 * with route() or passRoute() (src/http/route.ts): GET /openapi.json is written from their declarations.
 */
export function createApp(services: HttpServices, opts: { routes(app: H3): void }): H3 {
  const app = new H3({
    // Errors are logged once, by us, with secrets redacted.
    silent: true,
    onError: (error, event) => errorAnswer(error, services, event.req.method, event.req.url),
    // Every answer, errors included, is counted by the metrics module when it is loaded.
    onResponse(response, event) {
      services.onHttpResponse?.(event.req.method, event.context.matchedRoute?.route ?? null, response.status);
    },
  });

  // The store's read answers within a bound (store/health.ts): a store that is away is said so at once.
  const health = async () => {
    const readable = await services.store.health.readable();
    const writes = services.store.health.status();
    const ok = readable && writes.ok && !services.closing;
    const r = services.readiness?.();
    // Several serving processes: ready once every one of them has loaded its integrations.
    const processesReady = services.processes ? services.processes.allReady() : true;
    const ready = ok && (r?.ready ?? true) && processesReady;
    return {
      ok,
      ready,
      body: {
        ok,
        ready,
        version: VERSION,
        uptime_s: Math.round((Date.now() - services.startedAt) / 1000),
        store: !readable ? 'unavailable' : writes.ok ? 'ok' : 'failing',
        ...(writes.ok ? {} : { store_error: { code: writes.code, message: writes.message, since: writes.since, hint: writes.hint } }),
        status: services.closing ? 'shutting_down' : r && !r.ready ? 'starting' : 'serving',
        ...(r ? { integrations: r } : {}),
        ...(services.processes ? { processes: { count: services.processes.count, ready: processesReady } } : {}),
        ...(services.peers ? { nodes: services.peers() } : {}),
      },
    };
  };
  // Liveness: answers as soon as the server listens, while the integrations still load.
  passRoute(
    app,
    {
      method: 'GET',
      path: '/healthz',
      auth: 'none',
      summary: 'Liveness: answers as soon as the server listens (version, uptime, store, and how far the integrations have loaded)',
      response: healthSchema,
      responses: { '503': { description: 'Shutting down or store unavailable', schema: healthSchema } },
    },
    async () => {
      const h = await health();
      return jsonResponse(h.body, { status: h.ok ? 200 : 503 });
    },
  );
  // Readiness: 200 once every integration is loaded (in every serving process) and the store works.
  passRoute(
    app,
    {
      method: 'GET',
      path: '/readyz',
      auth: 'none',
      summary: 'Readiness: 200 once every integration is loaded (in every serving process) and the store works; 503 with Retry-After before',
      response: healthSchema,
      responses: { '503': { description: 'Starting (integrations still loading), shutting down, or store unavailable', schema: healthSchema } },
    },
    async () => {
      const h = await health();
      return jsonResponse(h.body, { status: h.ready ? 200 : 503, ...(h.ready ? {} : { headers: { 'retry-after': '1' } }) });
    },
  );

  // Written from the declared routes; read once they are all registered.
  let generated: OpenApiPart | undefined;
  passRoute(app, { method: 'GET', path: '/openapi.json', auth: 'none', summary: 'This document', response: record(any()) }, () => {
    generated ??= routeOperations(app);
    return jsonResponse(openApiDocument(services.config.publicUrl, generated));
  });

  // While the integrations load at start, the routes that need them wait (see registry/index.ts),
  // before the caller is authenticated: an installation token's scopes come from its manifest.
  app.use('/api/v1/**', (event) => {
    const admit = async () => {
      const p = await authenticate(event.req, services);
      // An install link installs its integration and reads its catalogue entry: every route not
      // declared to take one refuses it here, before it runs (fail closed).
      if (p.kind === 'link' && !takesInstallLink(event))
        throw new SwitchyardError('forbidden', `an install link only installs its integration ("${p.integration}") and reads its catalogue entry`, {
          hint: 'install with POST /api/v1/installations (`switchyard install <name> --link <link>`); anything else takes the admin token',
        });
      setPrincipal(event.req, p);
    };
    const waiting = services.awaitIntegrations?.(event.url.pathname);
    if (waiting) return waiting.then(admit);
    return admit();
  });

  opts.routes(app);
  return app;
}
