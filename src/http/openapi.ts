/**
 * The OpenAPI 3.1 description of the management API, served at GET /openapi.json (no token needed:
 * it describes, it does not reveal). Kept beside the routes it describes; a test checks that every
 * documented path answers something other than 404 for its method.
 */
import { VERSION } from '../version.ts';

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
const json = (schema: unknown, description = 'OK') => ({ description, content: { 'application/json': { schema } } });
const errors = {
  '400': json(ref('Error'), 'Bad input: the message says what and where'),
  '401': json(ref('Error'), 'Missing or wrong token'),
  '403': json(ref('Error'), 'The token may not do this'),
  '404': json(ref('Error'), 'Not found'),
};
const idParam = { name: 'id', in: 'path', required: true, schema: { type: 'string' } };
const q = (name: string, description: string, schema: unknown = { type: 'string' }) => ({ name, in: 'query', required: false, description, schema });
const body = (schema: unknown) => ({ required: true, content: { 'application/json': { schema } } });

export function openApiDocument(serverUrl: string) {
  return {
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
                problems: { type: 'array', items: { type: 'object', properties: { where: { type: 'string' }, message: { type: 'string' }, hint: { type: 'string' } } } },
              },
            },
          },
        },
        Installation: {
          type: 'object',
          properties: {
            id: { type: 'string' },
            integration: { type: 'string' },
            target: { enum: ['organization', 'space', 'site'] },
            space: { type: 'string' },
            site: { type: 'string' },
            status: { enum: ['pending', 'active', 'paused', 'uninstalled'] },
            configuration: { type: 'object' },
            externalIds: { type: 'array', items: { type: 'string' } },
            createdAt: { type: 'string', format: 'date-time' },
            updatedAt: { type: 'string', format: 'date-time' },
            urls: { type: 'object', properties: { publicEndpoint: { type: 'string' } } },
            connect: { type: 'array', items: { type: 'object', properties: { property: { type: 'string' }, label: { type: 'string' }, url: { type: 'string' } } } },
            missing: { type: 'array', items: { type: 'string' }, description: 'required properties not set yet (pending installations)' },
          },
        },
        ComponentAnswer: {
          type: 'object',
          properties: { type: { const: 'element' }, state: { type: 'object' }, props: { type: 'object' }, element: { type: 'object', description: 'ContentKit markup' } },
        },
      },
    },
    paths: {
      '/healthz': { get: { security: [], summary: 'Health: version, uptime, store', responses: { '200': json({ type: 'object' }), '503': json({ type: 'object' }, 'Shutting down or store unavailable') } } },
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
                  properties: { event: { type: 'string', description: 'JSON' }, environment: { type: 'string', description: 'JSON' }, 'fetch-body': { type: 'string', format: 'binary' } },
                },
              },
            },
          },
          responses: { '200': { description: 'What the integration answered' }, '406': { description: 'No handler for the event type' }, ...errors, '413': json(ref('Error')), '415': json(ref('Error')) },
        },
      },
      '/api/v1/integrations': { get: { summary: 'Loaded integrations with their status and errors', responses: { '200': json({ type: 'object' }), ...errors } } },
      '/api/v1/integrations/{name}': {
        get: { summary: 'One integration: manifest summary, scopes, blocks, configurations, errors', parameters: [{ name: 'name', in: 'path', required: true, schema: { type: 'string' } }], responses: { '200': json({ type: 'object' }), ...errors } },
      },
      '/api/v1/installations': {
        get: {
          summary: 'List installations (an installation token sees only its own)',
          parameters: [q('integration', 'only this integration'), q('status', 'pending, active, paused or uninstalled'), q('all', 'include uninstalled', { type: 'boolean' })],
          responses: { '200': json({ type: 'object', properties: { installations: { type: 'array', items: ref('Installation') } } }), ...errors },
        },
        post: {
          summary: 'Install an integration; emits installation_setup (and space_installation_setup on a space)',
          requestBody: body({
            type: 'object',
            required: ['integration'],
            properties: {
              integration: { type: 'string' },
              target: { enum: ['organization', 'space', 'site'] },
              space: { type: 'string' },
              site: { type: 'string' },
              configuration: { type: 'object' },
              externalIds: { type: 'array', items: { type: 'string' } },
              webhook_secret: { type: 'string', description: 'webhook integration only: use this signing secret' },
            },
          }),
          responses: {
            '201': json({ type: 'object', properties: { installation: ref('Installation'), token: { type: 'string', description: 'shown once' }, webhookSecret: { type: 'string', description: 'webhook integration, shown once' } } }, 'Installed'),
            ...errors,
          },
        },
      },
      '/api/v1/installations/{id}': {
        get: { summary: 'One installation (credentials redacted unless ?reveal=true, admin only)', parameters: [idParam, q('reveal', 'show stored credentials', { type: 'boolean' })], responses: { '200': json({ type: 'object', properties: { installation: ref('Installation') } }), ...errors } },
        patch: {
          summary: 'Edit configuration: keys set, null removes; validated against the manifest; emits installation_setup',
          parameters: [idParam],
          requestBody: body({ type: 'object', required: ['configuration'], properties: { configuration: { type: 'object' } } }),
          responses: { '200': json({ type: 'object', properties: { installation: ref('Installation') } }), ...errors },
        },
        delete: { summary: 'Uninstall (final)', parameters: [idParam], responses: { '200': json({ type: 'object' }), ...errors } },
      },
      '/api/v1/installations/{id}/pause': { post: { summary: 'Pause', parameters: [idParam], responses: { '200': json({ type: 'object' }), ...errors, '409': json(ref('Error')) } } },
      '/api/v1/installations/{id}/resume': { post: { summary: 'Resume', parameters: [idParam], responses: { '200': json({ type: 'object' }), ...errors, '409': json(ref('Error')) } } },
      '/api/v1/installations/{id}/token': { post: { summary: 'Mint a new installation token (the old one stops working)', parameters: [idParam], responses: { '200': json({ type: 'object' }), ...errors } } },
      '/api/v1/installations/{id}/render': {
        post: {
          summary: 'ui_render: initialState / action / render of one component',
          parameters: [idParam],
          requestBody: body({ type: 'object', required: ['componentId'], properties: { componentId: { type: 'string' }, props: { type: 'object' }, state: { type: 'object' }, action: { type: 'object' }, context: { type: 'object' } } }),
          responses: { '200': json(ref('ComponentAnswer')), ...errors },
        },
      },
    } as Record<string, unknown>,
  };
}
