/**
 * GET /openapi.json documents every route the server answers: each is declared with route() or
 * passRoute() (src/http/route.ts), on the project's own list, which the document is written from.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { Validator } from '@seriousme/openapi-schema-validator';
import { modules } from '../src/server/modules.ts';
import { composeApp } from '../src/server/server.ts';
import { declaredRoutes, documentedMethods, openApiPathsOf } from '../src/http/route.ts';
import type { Module } from '../src/module/contract.ts';
import { ROOT, startTestServer } from './helpers/index.ts';

/** The web console's pages and its browser app's calls: they serve the console, not the management API. */
const CONSOLE = /^\/console(\/|$)/;

type Operation = {
  parameters?: Array<{ name: string; in: string; schema?: unknown }>;
  requestBody?: { content?: Record<string, { schema?: unknown }> };
  responses?: Record<string, { content?: Record<string, { schema?: unknown }> }>;
};

/**
 * The routes h3 would answer that are not on the project's list (the console's aside). h3 keeps its
 * table private and has no other way to list it: read here only, as the check of the list.
 */
function unlisted(app: ReturnType<typeof composeApp>): string[] {
  const table = (app as unknown as { '~routes': Array<{ method: string; route: string }> })['~routes'];
  assert.ok(table.length > 30, 'the route table was read');
  const listed = new Set(declaredRoutes(app).map((r) => `${r.method === 'ANY' ? '' : r.method} ${r.path}`));
  return table.filter((r) => !CONSOLE.test(r.route) && !listed.has(`${r.method} ${r.route}`)).map((r) => `${r.method || 'ANY'} ${r.route}`);
}

test('every route the app answers is declared, and in /openapi.json with its method, its request and answer schemas', async (t) => {
  const s = await startTestServer(t, { integrations_dir: join(ROOT, 'integrations') });
  const doc = (await (await fetch(`${s.url}/openapi.json`)).json()) as { paths: Record<string, Record<string, Operation>> };
  // The same modules the server runs, registering their routes on a fresh app.
  const app = composeApp(s.services, modules);
  assert.deepEqual(unlisted(app), [], 'routes registered outside route() and passRoute()');
  const missing: string[] = [];
  const incomplete: string[] = [];
  for (const { spec } of declaredRoutes(app)) {
    const name = `${spec.method} ${spec.path}`;
    for (const path of openApiPathsOf(spec))
      for (const m of documentedMethods(spec)) {
        const op = doc.paths[path]?.[m.toLowerCase()];
        if (!op) {
          missing.push(`${m} ${path}`);
          continue;
        }
        if (spec.body && !op.requestBody?.content?.['application/json']?.schema) incomplete.push(`${name}: no request body schema`);
        const bodiless = spec.method === 'ANY' && (m === 'GET' || m === 'HEAD');
        if (spec.passThrough && !bodiless && !op.requestBody?.content?.[spec.passThrough.media]?.schema)
          incomplete.push(`${name}: no schema of the body it hands on (${m})`);
        if (bodiless && op.requestBody) incomplete.push(`${name}: a body documented for ${m}`);
        for (const key of Object.keys(spec.query?.shape ?? {}))
          if (!op.parameters?.some((p) => p.in === 'query' && p.name === key && p.schema)) incomplete.push(`${name}: query parameter ${key} undocumented`);
        for (const p of spec.path.matchAll(/:([A-Za-z]+)/g))
          if (!spec.paramValues?.[p[1] as never] && !op.parameters?.some((x) => x.in === 'path' && x.name === p[1]))
            incomplete.push(`${name}: path parameter ${p[1]} undocumented`);
        if (spec.path.endsWith('/**') && !op.parameters?.some((x) => x.in === 'path' && x.name === 'path')) incomplete.push(`${name}: {path} undocumented`);
        if (spec.response && !op.responses?.[String(spec.status ?? 200)]?.content?.['application/json']?.schema) incomplete.push(`${name}: no answer schema`);
      }
  }
  assert.deepEqual(missing, [], 'routes missing from /openapi.json');
  assert.deepEqual(incomplete, [], 'declared routes whose operation lacks a schema');
  // Every documented path is a declared route's: nothing is documented by hand beside them.
  const declared = new Set(declaredRoutes(app).flatMap(({ spec }) => openApiPathsOf(spec)));
  assert.deepEqual(
    Object.keys(doc.paths).filter((p) => !declared.has(p)),
    [],
    'documented paths no route declares',
  );
});

test('a route registered outside route() fails the check', async (t) => {
  const s = await startTestServer(t);
  const stray: Module = { name: 'stray', routes: (app) => void app.get('/api/v1/stray', () => ({})) };
  assert.deepEqual(unlisted(composeApp(s.services, [...modules, stray])), ['GET /api/v1/stray']);
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
