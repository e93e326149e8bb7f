/**
 * HTTP faces of the runtime:
 * - `POST /{version}/integrations/{name}`: the runtime endpoint (multipart envelope, spec 4.1);
 * - `<public_url>/v1/integrations/{name}/installations/{id}[/{path}]`: each installation's public
 *   endpoint, any method, handed to the integration's `fetch`;
 * - `<public_url>/v1/integrations/{name}/integration[/{path}]`: the integration's own public
 *   endpoint, the same with no installation (or the one an OAuth callback's signed state names).
 */
import type { H3, H3Event } from 'h3';
import { SwitchyardError } from '../errors.ts';
import { authenticate } from '../http/app.ts';
import type { ServicesWith } from '../module/contract.ts';
import { decodeEnvelope } from './envelope.ts';
import { readBodyLimited } from '../http/body.ts';
import { refuseOnConsoleHost } from '../http/origins.ts';
import { responseOf, toResponse } from './public-fetch.ts';
import { headerOf, PUBLIC_METHODS, publicRequestOf, type PublicAnswer, type PublicRequest } from '../http/public-lane.ts';
import { runnable, scopeGranted } from './runnable.ts';
import { callerFields, chosenInstallationId } from './caller-environment.ts';
import { passRoute } from '../http/route.ts';
import { object, optional, string } from '../schema/index.ts';

export const RUNTIME_VERSIONS = ['v1'] as const;

/** The runtime endpoint's body (spec 4.1), read by decodeEnvelope. */
const envelopeSchema = object({
  event: string({ description: 'JSON' }),
  environment: string({
    description:
      'JSON; the platform rebuilds every field it owns from the store: only installation.id (which installation) and keys the platform does not own are read',
  }),
  'fetch-body': optional(string({ format: 'binary' })),
});

// The public routes' paths, as the app's router matches them (the lane's way in too).
const INSTALLATION_ROUTE = '/v1/integrations/:name/installations/:id';
const INTEGRATION_ROUTE = '/v1/integrations/:name/integration';
const INSTALLATION_PATH = /^\/v1\/integrations\/([^/]+)\/installations\/([^/]+)(\/.*)?$/;
const INTEGRATION_PATH = /^\/v1\/integrations\/([^/]+)\/integration(\/.*)?$/;

/** The route pattern the app's router would name for a public path (metrics' label), or undefined. */
function publicRoute(pathname: string): string | undefined {
  // A lone trailing slash is the route itself, as the router matches it.
  const sub = (rest: string | undefined) => rest !== undefined && rest !== '/';
  let m = INSTALLATION_PATH.exec(pathname);
  if (m) return sub(m[3]) ? `${INSTALLATION_ROUTE}/**` : INSTALLATION_ROUTE;
  m = INTEGRATION_PATH.exec(pathname);
  if (m) return sub(m[2]) ? `${INTEGRATION_ROUTE}/**` : INTEGRATION_ROUTE;
  return undefined;
}

export function runtimeRoutes(app: H3, services: ServicesWith<'runtime' | 'registry' | 'installations'>): void {
  const runtime = () => services.runtime;
  const limits = services.config.sandbox;

  passRoute(
    app,
    {
      method: 'POST',
      path: '/:version/integrations/:name',
      summary: 'Runtime endpoint: a multipart envelope (event, environment, fetch-body) dispatched to the integration',
      auth: 'self',
      paramValues: { version: RUNTIME_VERSIONS },
      passThrough: { media: 'multipart/form-data', schema: envelopeSchema },
      responseDescription: 'What the integration answered',
      responses: {
        '406': { description: 'No handler for the event type' },
        '413': { description: 'The envelope or its fetch-body is larger than sandbox.request_body' },
        '415': { description: 'Not a multipart envelope' },
      },
    },
    async (event) => {
      const { version, name } = event.context.params!;
      if (!(RUNTIME_VERSIONS as readonly string[]).includes(version))
        throw new SwitchyardError('bad_request', `unknown runtime API version "${version}"; versions: ${RUNTIME_VERSIONS.join(', ')}`, {
          hint: `POST /v1/integrations/${name}`,
        });
      const principal = await authenticate(event.req, services);
      // Named kinds only (fail closed): the admin, or an installation of this integration.
      if (principal.kind !== 'admin' && principal.kind !== 'installation')
        throw new SwitchyardError(
          'forbidden',
          `${principal.kind === 'link' ? 'an install link' : 'an integration token'} cannot post envelopes; use the admin token or an installation token`,
        );
      if (principal.kind === 'installation' && principal.integration !== name)
        throw new SwitchyardError('forbidden', `this token belongs to an installation of "${principal.integration}", not "${name}"`);
      const registry = services.registry;
      const integration = registry.get(name) ?? (await registry.whenLoaded(name));
      if (!integration) throw new SwitchyardError('not_found', `integration "${name}" is not loaded`);
      if (!integration.script) throw new SwitchyardError('not_found', `integration "${name}" has no script to run`);
      const envelope = await decodeEnvelope(event.req, limits.request_body + 64 * 1024);
      if (envelope.fetchBody && envelope.fetchBody.byteLength > limits.request_body)
        throw new SwitchyardError('payload_too_large', `fetch-body is larger than sandbox.request_body (${limits.request_body} bytes)`);
      scopeGranted(integration, envelope.event.type);
      // The caller chooses the installation (an installation token only its own); the platform
      // builds every field it owns from the store (caller-environment.ts).
      const chosen = chosenInstallationId(envelope.environment);
      let installation;
      if (principal.kind === 'installation') {
        if (chosen !== undefined && chosen !== principal.installationId)
          throw new SwitchyardError('forbidden', `this token belongs to installation ${principal.installationId}; it cannot act for installation ${chosen}`, {
            where: 'environment.installation.id',
            hint: "name the token's own installation, or leave environment.installation out",
          });
        installation = await services.installations.require(principal.installationId);
      } else if (chosen !== undefined) {
        installation = await services.installations.find(chosen);
        if (!installation || installation.integration !== name)
          throw new SwitchyardError('not_found', `integration "${name}" has no installation ${chosen}`, {
            where: 'environment.installation.id',
            hint: `see \`switchyard installations list --integration ${name}\``,
          });
      }
      // A paused or uninstalled installation runs no code, whoever asks (as its public endpoint and renders).
      if (installation) runnable(installation);
      envelope.environment = { ...callerFields(envelope.environment), ...runtime().environmentFor(integration, installation) };
      const { id, result } = await runtime().invoke({ integration, installation, envelope });
      return toResponse(result, id);
    },
  );

  // The public endpoints are the hot path: HTTP/1.1 requests reach them through the public lane
  // (http/public-lane.ts) in front of the app; the routes below answer the others (HTTP/2, targets
  // srvx normalises) with the same handler, and declare the endpoints in the OpenAPI document.
  const answerPublic = async (req: PublicRequest, pathname: string, body: (limit: number) => Promise<Uint8Array> | Uint8Array): Promise<PublicAnswer> => {
    // One Host only (RFC 9112 3.2): with two (joined "a, b" either way in), the URL would name the
    // first while the console-host check saw both.
    const host = headerOf(req, 'host');
    if (host?.includes(',')) throw new SwitchyardError('bad_request', 'the request has more than one Host header');
    refuseOnConsoleHost(host, pathname, services);
    let m = INSTALLATION_PATH.exec(pathname);
    if (m) return runtime().fetchPublic(m[1], m[2], req, await body(limits.request_body));
    m = INTEGRATION_PATH.exec(pathname);
    if (m) return runtime().fetchIntegration(m[1], req, await body(limits.request_body));
    throw new SwitchyardError('no_route', `no route for ${req.method} ${pathname}`, { hint: 'see GET /openapi.json' });
  };
  services.publicLane = { route: publicRoute, answer: answerPublic };
  const publicEndpoint = async (event: H3Event) => {
    const pathname = event.url.pathname;
    return responseOf(await answerPublic(publicRequestOf(event.req), pathname, (limit) => readBodyLimited(event.req, limit)));
  };
  const anyBody = { media: '*/*', schema: string({ format: 'binary' }), required: false };
  const installationParams = { name: 'the integration', id: 'the installation' };
  const publicResponses = {
    '404': { description: 'No such installation of this integration' },
    '410': { description: 'Uninstalled' },
    '413': { description: 'The body is larger than sandbox.request_body' },
    '503': {
      description: 'Paused, a sandbox limit, or `starting`: the integration did not load within 10 s of the request while the server starts (Retry-After)',
    },
  };
  for (const [path, summary] of [
    [INSTALLATION_ROUTE, "Public endpoint of an installation (no token): the request is handed to the integration's fetch"],
    [`${INSTALLATION_ROUTE}/**`, 'Public endpoint of an installation, any sub-path'],
  ] as const)
    passRoute(
      app,
      {
        method: 'ANY',
        methods: PUBLIC_METHODS,
        path,
        summary,
        auth: 'none',
        params: installationParams,
        passThrough: anyBody,
        responseDescription: 'What the integration answered',
        responses: publicResponses,
      },
      publicEndpoint,
    );
  for (const path of [INTEGRATION_ROUTE, `${INTEGRATION_ROUTE}/**`])
    passRoute(
      app,
      {
        method: 'ANY',
        path,
        summary: "The integration's own public endpoint (no installation), handed to its fetch",
        auth: 'none',
        params: { name: 'the integration' },
        passThrough: anyBody,
        responseDescription: "The integration's answer",
      },
      publicEndpoint,
    );
}
