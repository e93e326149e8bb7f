/**
 * The OpenAPI 3.1 description of the management API, served at GET /openapi.json (no token needed:
 * it describes, it does not reveal): the common document, and the parts the modules hand in (their
 * paths and the schemas those refer to) assembled into it. The helpers are exported for those parts.
 * A test checks that every route the app registers is documented with its method.
 */
import { VERSION } from '../version.ts';

/** What a module documents: its paths, and component schemas they refer to by `ref(name)`. */
export interface OpenApiPart {
  paths?: Record<string, unknown>;
  schemas?: Record<string, unknown>;
}

export const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
export const json = (schema: unknown, description = 'OK') => ({ description, content: { 'application/json': { schema } } });
/** The answers every management route may give. */
export const errors = {
  '400': json(ref('Error'), 'Bad input: the message says what and where'),
  '401': json(ref('Error'), 'Missing or wrong token'),
  '403': json(ref('Error'), 'The token may not do this'),
  '404': json(ref('Error'), 'Not found'),
};
export const idParam = { name: 'id', in: 'path', required: true, schema: { type: 'string' } };
export const body = (schema: unknown) => ({ required: true, content: { 'application/json': { schema } } });
export const pathParam = (name: string) => ({ name, in: 'path', required: true, schema: { type: 'string' } });
/** An installation's public endpoint: any method, handed to the integration's `fetch`. */
const publicEndpoint = (summary: string, extra: unknown[] = []) => {
  const op = {
    security: [],
    summary,
    parameters: [pathParam('name'), pathParam('id'), ...extra],
    responses: {
      '200': { description: 'What the integration answered' },
      '404': json(ref('Error'), 'No such installation of this integration'),
      '410': json(ref('Error'), 'Uninstalled'),
      '413': json(ref('Error')),
      '503': json(
        ref('Error'),
        'Paused, a sandbox limit, or `starting`: the integration did not load within 10 s of the request while the server starts (Retry-After)',
      ),
    },
  };
  return Object.fromEntries(['get', 'put', 'post', 'delete', 'options', 'head', 'patch'].map((m) => [m, op]));
};

/**
 * GitBook's REST API shape, served for integrations that use GitBook's API client (see
 * docs/gitbook.md): installation endpoints from this server's installations; content endpoints
 * (spaces, orgs, urls) forwarded to gitbook.api_url, else 501.
 */
function gitbookShapePaths(): Record<string, unknown> {
  const op = (summary: string) => ({
    summary: `GitBook API shape: ${summary}`,
    responses: {
      '200': json({ type: 'object', properties: { data: {} } }),
      '501': json(ref('Error'), 'No upstream platform API configured (gitbook.api_url)'),
      ...errors,
    },
  });
  const read = (summary: string) => ({ get: op(summary) });
  const readWrite = (summary: string) => ({ get: op(summary), patch: op(`update ${summary}`) });
  const forwarded = (what: string) => Object.fromEntries(['get', 'post', 'put', 'patch', 'delete'].map((m) => [m, op(`${what}, forwarded upstream`)]));
  const integrationEndpoint = Object.fromEntries(
    ['get', 'post', 'put', 'patch', 'delete'].map((m) => [
      m,
      {
        security: [],
        summary: "The integration's own public endpoint (no installation), handed to its fetch",
        responses: { '200': { description: "The integration's answer" } },
      },
    ]),
  );
  return {
    '/api/v1/integrations/{name}/installations': read('installations of an integration'),
    '/api/v1/integrations/{name}/installations/{id}': readWrite('one installation'),
    '/api/v1/integrations/{name}/installations/{id}/tokens': {
      post: {
        summary: "GitBook API shape: a short-lived token acting as this installation (the integration's own token or the admin's; createInstallationClient)",
        responses: {
          '200': json({ type: 'object', properties: { token: { type: 'string' }, expiresAt: { type: 'string', format: 'date-time' } } }),
          '409': json(ref('Error'), 'The installation is paused'),
          ...errors,
        },
      },
    },
    '/api/v1/integrations/{name}/spaces': read('space installations'),
    '/api/v1/integrations/{name}/installations/{id}/spaces/{which}': readWrite('one space installation'),
    '/api/v1/integrations/{name}/sites': read('site installations'),
    '/api/v1/integrations/{name}/installations/{id}/sites/{which}': readWrite('one site installation'),
    '/api/v1/spaces/{path}': forwarded('spaces'),
    '/api/v1/orgs/{path}': forwarded('organizations'),
    '/api/v1/urls/{path}': forwarded('URL resolution'),
    '/v1/integrations/{name}/integration': integrationEndpoint,
    '/v1/integrations/{name}/integration/{path}': integrationEndpoint,
  };
}

export function openApiDocument(serverUrl: string, parts: OpenApiPart[] = []) {
  const doc = {
    openapi: '3.1.0',
    info: {
      title: 'Switchyard management API',
      version: VERSION,
      description:
        'JSON over HTTP. Authenticate with `Authorization: Bearer <admin token>`; an installation token may read its own installation and update its configuration. Errors share one shape: `{"error": {"code", "message", "hint?", "where?", "problems?"}}`.',
    },
    servers: [{ url: serverUrl }],
    security: [{ bearer: [] }],
    components: {
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } },
      schemas: {
        Startup: {
          type: 'object',
          description: 'The start-up load of the answering process: integrations are loaded while the server already listens',
          properties: {
            ready: { type: 'boolean', description: 'every integration folder present at start was tried' },
            loaded: { type: 'integer', description: 'integrations serving' },
            failed: { type: 'integer', description: 'folders that failed and serve nothing' },
            done: { type: 'integer', description: 'folders tried so far' },
            total: { type: 'integer', description: 'folders present at start' },
            ms: { type: 'integer', description: 'how long the start-up load took (so far)' },
          },
        },
        Health: {
          type: 'object',
          properties: {
            ok: { type: 'boolean', description: 'alive: the store reads and writes, not shutting down' },
            ready: { type: 'boolean', description: 'ok, and every integration loaded in every serving process' },
            version: { type: 'string' },
            uptime_s: { type: 'integer' },
            store: { enum: ['ok', 'failing', 'unavailable'] },
            status: { enum: ['starting', 'serving', 'shutting_down'] },
            integrations: ref('Startup'),
            processes: { type: 'object', properties: { count: { type: 'integer' }, ready: { type: 'boolean' } } },
            nodes: {
              type: 'object',
              description: 'on a PostgreSQL store: this node, the live nodes on the store, and integrations whose versions differ between them',
              properties: {
                node: { type: 'string' },
                count: { type: 'integer' },
                differ: {
                  type: 'array',
                  items: {
                    type: 'object',
                    properties: {
                      integration: { type: 'string' },
                      here: { type: ['string', 'null'] },
                      others: { type: 'object', additionalProperties: { type: ['string', 'null'] } },
                    },
                  },
                },
              },
            },
          },
        },
        Error: {
          type: 'object',
          required: ['error'],
          properties: {
            error: {
              type: 'object',
              required: ['code', 'message'],
              properties: {
                code: { type: 'string' },
                message: { type: 'string' },
                hint: { type: 'string' },
                where: { type: 'string' },
                problems: {
                  type: 'array',
                  items: { type: 'object', properties: { where: { type: 'string' }, message: { type: 'string' }, hint: { type: 'string' } } },
                },
              },
            },
          },
        },
      },
    },
    paths: {
      ...gitbookShapePaths(),
      '/': {
        get: {
          security: [],
          summary: "Redirects to the web console's page (on the console's origin)",
          responses: { '302': { description: 'Location: <console origin>/console/' } },
        },
      },
      '/openapi.json': { get: { security: [], summary: 'This document', responses: { '200': json({ type: 'object' }) } } },
      '/healthz': {
        get: {
          security: [],
          summary: 'Liveness: answers as soon as the server listens (version, uptime, store, and how far the integrations have loaded)',
          responses: { '200': json(ref('Health')), '503': json(ref('Health'), 'Shutting down or store unavailable') },
        },
      },
      '/readyz': {
        get: {
          security: [],
          summary: 'Readiness: 200 once every integration is loaded (in every serving process) and the store works; 503 with Retry-After before',
          responses: { '200': json(ref('Health')), '503': json(ref('Health'), 'Starting (integrations still loading), shutting down, or store unavailable') },
        },
      },
      '/v1/integrations/{name}': {
        post: {
          summary: 'Runtime endpoint: a multipart envelope (event, environment, fetch-body) dispatched to the integration',
          parameters: [{ name: 'name', in: 'path', required: true, schema: { type: 'string' } }],
          requestBody: {
            required: true,
            content: {
              'multipart/form-data': {
                schema: {
                  type: 'object',
                  required: ['event', 'environment'],
                  properties: {
                    event: { type: 'string', description: 'JSON' },
                    environment: {
                      type: 'string',
                      description:
                        'JSON; the platform rebuilds every field it owns from the store: only installation.id (which installation) and keys the platform does not own are read',
                    },
                    'fetch-body': { type: 'string', format: 'binary' },
                  },
                },
              },
            },
          },
          responses: {
            '200': { description: 'What the integration answered' },
            '406': { description: 'No handler for the event type' },
            ...errors,
            '413': json(ref('Error')),
            '415': json(ref('Error')),
          },
        },
      },
      '/api/v1/integrations': {
        get: {
          summary:
            'Integrations with their status (loading while the server starts, loaded, error, needs_configuration) and errors; `startup` says how far the start-up load is',
          responses: {
            '200': json({ type: 'object', properties: { integrations: { type: 'array', items: { type: 'object' } }, startup: ref('Startup') } }),
            ...errors,
          },
        },
      },
      '/api/v1/integrations/{name}': {
        get: {
          summary: 'One integration: manifest summary, scopes, blocks, configurations, errors, parked',
          parameters: [{ name: 'name', in: 'path', required: true, schema: { type: 'string' } }],
          responses: { '200': json({ type: 'object' }), ...errors },
        },
      },
      '/api/v1/integrations/{name}/resume': {
        post: {
          summary: 'Run a parked integration again (the supervisor parks one whose code took down a serving process 3 times within a minute)',
          parameters: [pathParam('name')],
          responses: { '200': json({ type: 'object' }), '409': json(ref('Error'), 'Not parked'), ...errors },
        },
      },
      '/v1/integrations/{name}/installations/{id}': publicEndpoint(
        "Public endpoint of an installation (no token): the request is handed to the integration's fetch",
      ),
      '/v1/integrations/{name}/installations/{id}/{path}': publicEndpoint('Public endpoint of an installation, any sub-path', [
        { ...pathParam('path'), description: 'the rest of the path, slashes included' },
      ]),
    } as Record<string, unknown>,
  };
  // Parts merge by path and method: a later part's operation replaces an earlier one's (the
  // operations route() generates come last).
  const paths = doc.paths as Record<string, Record<string, unknown>>;
  for (const part of parts) {
    Object.assign(doc.components.schemas, part.schemas);
    for (const [path, item] of Object.entries(part.paths ?? {})) paths[path] = { ...paths[path], ...(item as Record<string, unknown>) };
  }
  return doc;
}
