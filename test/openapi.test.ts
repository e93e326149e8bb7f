/** GET /openapi.json documents every route the server registers (the console's own pages aside). */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { Validator } from '@seriousme/openapi-schema-validator';
import { modules } from '../src/server/modules.ts';
import { composeApp } from '../src/server/server.ts';
import { RUNTIME_VERSIONS } from '../src/runtime/index.ts';
import type { RouteMeta } from '../src/http/route.ts';
import { ROOT, startTestServer } from './helpers/index.ts';

/** The web console's routes serve its browser app, not the management API. */
const UNDOCUMENTED = /^\/console(\/|$)/;

/**
 * The core API, declared with route(): each of these routes must carry its declaration, so its
 * operation is generated from the schemas that validate it (a route registered by hand here fails).
 */
const DECLARED = /^\/api\/v1\/(events|handler-runs|deliveries|logs|webhooks|installations)(\/|$)/;

/** An h3 route pattern as an OpenAPI path: `:id` -> `{id}`, `**` -> `{path}`, `:version` -> each runtime version. */
function openApiPaths(route: string): string[] {
  const path = route.replace(/\/\*\*$/, '/{path}').replace(/:([A-Za-z]+)/g, '{$1}');
  return path.startsWith('/{version}/') ? RUNTIME_VERSIONS.map((v) => path.replace('{version}', v)) : [path];
}

type Operation = {
  parameters?: Array<{ name: string; in: string; schema?: unknown }>;
  requestBody?: { content?: Record<string, { schema?: unknown }> };
  responses?: Record<string, { content?: Record<string, { schema?: unknown }> }>;
};

test('every route the app registers is in /openapi.json with its method; a declared route with its request and answer schemas', async (t) => {
  const s = await startTestServer(t, { integrations_dir: join(ROOT, 'integrations') });
  const doc = (await (await fetch(`${s.url}/openapi.json`)).json()) as { paths: Record<string, Record<string, Operation>> };
  // The same modules the server runs, registering their routes on a fresh app.
  const routes = (composeApp(s.services, modules) as unknown as { '~routes': Array<{ method: string; route: string; meta?: { route?: RouteMeta } }> })[
    '~routes'
  ];
  assert.ok(routes.length > 30, 'the route table was read');
  const missing: string[] = [];
  const undeclared: string[] = [];
  const incomplete: string[] = [];
  for (const { method, route, meta } of routes) {
    if (UNDOCUMENTED.test(route)) continue;
    // app.all() registers no method: it must be documented for the usual ones.
    const methods = method ? [method.toLowerCase()] : ['get', 'post', 'put', 'patch', 'delete'];
    for (const path of openApiPaths(route)) for (const m of methods) if (!doc.paths[path]?.[m]) missing.push(`${m.toUpperCase()} ${path}`);
    const spec = meta?.route?.spec;
    if (DECLARED.test(route) && !spec) undeclared.push(`${method} ${route}`);
    if (!spec) continue;
    const op = doc.paths[openApiPaths(route)[0]]?.[method.toLowerCase()];
    if (!op) continue;
    const name = `${method} ${route}`;
    if (spec.body && !op.requestBody?.content?.['application/json']?.schema) incomplete.push(`${name}: no request body schema`);
    for (const key of Object.keys(spec.query?.shape ?? {}))
      if (!op.parameters?.some((p) => p.in === 'query' && p.name === key && p.schema)) incomplete.push(`${name}: query parameter ${key} undocumented`);
    for (const m of route.matchAll(/:([A-Za-z]+)/g))
      if (!op.parameters?.some((p) => p.in === 'path' && p.name === m[1])) incomplete.push(`${name}: path parameter ${m[1]} undocumented`);
    if (spec.response && !op.responses?.[String(spec.status ?? 200)]?.content?.['application/json']?.schema) incomplete.push(`${name}: no answer schema`);
  }
  assert.deepEqual(missing, [], 'routes missing from /openapi.json');
  assert.deepEqual(undeclared, [], 'core API routes registered by hand instead of with route()');
  assert.deepEqual(incomplete, [], 'declared routes whose operation lacks a schema');
});

test('/openapi.json is a valid OpenAPI 3.1 document, and every $ref in it resolves', async (t) => {
  const s = await startTestServer(t, { integrations_dir: join(ROOT, 'integrations') });
  const doc = (await (await fetch(`${s.url}/openapi.json`)).json()) as Record<string, any>;
  const validator = new Validator();
  const r = await validator.validate(doc);
  assert.equal(validator.version, '3.1');
  assert.ok(r.valid, `not a valid OpenAPI 3.1 document: ${JSON.stringify(r.errors, null, 1)?.slice(0, 3000)}`);
  const dangling: string[] = [];
  const walk = (v: unknown): void => {
    if (Array.isArray(v)) return v.forEach(walk);
    if (!v || typeof v !== 'object') return;
    for (const [k, x] of Object.entries(v)) {
      if (k === '$ref' && typeof x === 'string') {
        let at: any = doc;
        for (const seg of x.replace(/^#\//, '').split('/')) at = at?.[seg];
        if (at === undefined) dangling.push(x);
      } else walk(x);
    }
  };
  walk(doc);
  assert.deepEqual([...new Set(dangling)], [], 'references to nothing');
  // The moved routes describe real shapes, drawn from the schemas that validate them.
  const deliveries = doc.paths['/api/v1/deliveries'].get;
  assert.deepEqual(deliveries.responses['200'].content['application/json'].schema.properties.deliveries, {
    type: 'array',
    items: { $ref: '#/components/schemas/Delivery' },
  });
  assert.ok(doc.components.schemas.Delivery.required.includes('status'));
  const install = doc.paths['/api/v1/installations'].post.requestBody.content['application/json'].schema;
  assert.deepEqual(install.required, ['integration']);
  assert.equal(install.properties.webhook_secret.minLength, 16);
  const limit = deliveries.parameters.find((p: any) => p.name === 'limit');
  assert.deepEqual(limit.schema, { type: 'integer', minimum: 1, maximum: 500 });
});
