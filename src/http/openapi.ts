/**
 * The OpenAPI 3.1 description of the management API, served at GET /openapi.json (no token needed:
 * it describes, it does not reveal): the common document (info, security, the one error shape), and
 * the operations of the declared routes (routeOperations in route.ts, from the project's list of
 * routes) with the named schemas they use. Each route is documented where it is declared, in its
 * own module; test/openapi.test.ts checks that every route the app answers is declared and documented.
 */
import { VERSION } from '../version.ts';

/** Operations by path, and the component schemas they refer to by `$ref`. */
export interface OpenApiPart {
  paths?: Record<string, unknown>;
  schemas?: Record<string, unknown>;
}

export function openApiDocument(serverUrl: string, routes: OpenApiPart) {
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
        ...routes.schemas,
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
    paths: routes.paths ?? {},
  };
}
