/** GET /openapi.json documents every route the server registers (the console's own pages aside). */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { modules } from '../src/server/modules.ts';
import { composeApp } from '../src/server/server.ts';
import { RUNTIME_VERSIONS } from '../src/runtime/index.ts';
import { ROOT, startTestServer } from './helpers/index.ts';

/** The web console's routes serve its browser app, not the management API. */
const UNDOCUMENTED = /^\/console(\/|$)/;

/** An h3 route pattern as an OpenAPI path: `:id` -> `{id}`, `**` -> `{path}`, `:version` -> each runtime version. */
function openApiPaths(route: string): string[] {
  const path = route.replace(/\/\*\*$/, '/{path}').replace(/:([A-Za-z]+)/g, '{$1}');
  return path.startsWith('/{version}/') ? RUNTIME_VERSIONS.map((v) => path.replace('{version}', v)) : [path];
}

test('every route the app registers is in /openapi.json with its method', async (t) => {
  const s = await startTestServer(t, { integrations_dir: join(ROOT, 'integrations') });
  const doc = (await (await fetch(`${s.url}/openapi.json`)).json()) as { paths: Record<string, Record<string, unknown>> };
  // The same modules the server runs, registering their routes on a fresh app.
  const routes = (composeApp(s.services, modules) as unknown as { '~routes': Array<{ method: string; route: string }> })['~routes'];
  assert.ok(routes.length > 30, 'the route table was read');
  const missing: string[] = [];
  for (const { method, route } of routes) {
    if (UNDOCUMENTED.test(route)) continue;
    // app.all() registers no method: it must be documented for the usual ones.
    const methods = method ? [method.toLowerCase()] : ['get', 'post', 'put', 'patch', 'delete'];
    for (const path of openApiPaths(route)) for (const m of methods) if (!doc.paths[path]?.[m]) missing.push(`${m.toUpperCase()} ${path}`);
  }
  assert.deepEqual(missing, [], 'routes missing from /openapi.json');
});
