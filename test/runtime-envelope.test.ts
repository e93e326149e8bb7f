/**
 * The runtime endpoint holds what reaches integration code to the platform's rules (spec 4.1, 5.2):
 * an event runs only when the integration's manifest requests its scope, whoever posts it, and the
 * environment is the platform's, rebuilt from the store; the caller only chooses the installation.
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { encodeEnvelope } from '../src/runtime/index.ts';
import { startTestServer, tmpDir, type TestServer } from './helpers/index.ts';

process.env.VIEWER_API_KEY = 'sk_test_viewer';

/** `viewer` asks only openapi:read yet handles space_view; `peer` is another integration to install. */
function integrations(t: TestContext): string {
  const dir = tmpDir(t);
  const write = (name: string, manifest: string[], code: string) => {
    mkdirSync(join(dir, name));
    writeFileSync(
      join(dir, name, 'platform-manifest.yaml'),
      [`name: ${name}`, `title: ${name}`, 'description: A runtime endpoint test.', 'organization: switchyard-tests', 'visibility: private', ...manifest, 'script: ./index.ts', ''].join('\n'),
    );
    writeFileSync(join(dir, name, 'index.ts'), code);
  };
  write(
    'viewer',
    ['scopes:', '  - openapi:read', 'secrets:', '  API_KEY: ${{ env.VIEWER_API_KEY }}', 'configurations:', '  account:', '    properties:', '      channel:', '        type: string', '        title: Channel', '        description: Where to post'],
    `import { createIntegration } from '@switchyard/runtime';
export default createIntegration({
  events: {
    space_view: async (event: any) => { console.log('space_view ran for ' + event.spaceId); },
    installation_setup: async () => {},
  },
  fetch: async (_request: Request, context: any) => Response.json(context.environment),
});
`,
  );
  write('peer', ['scopes: []'], `import { createIntegration } from '@switchyard/runtime';\nexport default createIntegration({ fetch: async () => new Response('peer') });\n`);
  return dir;
}

async function server(t: TestContext): Promise<TestServer> {
  return startTestServer(t, { integrations_dir: integrations(t) });
}

async function install(s: TestServer, integration: string, configuration: Record<string, unknown> = {}) {
  const r = await s.api('POST', '/api/v1/installations', { integration, configuration });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  return r.body as { installation: { id: string; urls: { publicEndpoint: string } }; token: string };
}

function post(s: TestServer, name: string, event: Record<string, unknown>, environment: Record<string, unknown>, token: string) {
  return fetch(`${s.url}/v1/integrations/${name}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}` },
    body: encodeEnvelope({ event: event as never, environment }),
  });
}

const fetchEvent = (url: string) => ({ type: 'fetch', request: { method: 'GET', url, headers: [] } });

test('scopes: an event whose scope the manifest does not request is refused 403 at the runtime endpoint, for every token', async (t) => {
  const s = await server(t);
  const { installation, token } = await install(s, 'viewer', { channel: 'general' });
  const view = { type: 'space_view', eventId: 'evt_view_1', spaceId: 'space-1', installationId: installation.id };
  for (const [who, bearer] of [['installation token', token], ['admin token', s.token]] as const) {
    const res = await post(s, 'viewer', view, { installation: { id: installation.id } }, bearer);
    const body = (await res.json()) as any;
    assert.equal(res.status, 403, `${who}: ${JSON.stringify(body)}`);
    assert.equal(body.error.code, 'forbidden', who);
    assert.match(body.error.message, /space:metadata:read/, `${who}: the missing scope is named`);
    assert.match(body.error.message, /space_view/, who);
    assert.match(body.error.hint, /scopes/, who);
  }
  const ran = s.services.store.db.prepare("SELECT count(*) AS n FROM invocations WHERE event_type = 'space_view'").get() as { n: number };
  assert.equal(ran.n, 0, 'the handler never ran');
  // Ingest decides the same from the same table: the event is owed to no handler of viewer.
  const ingested = await s.api('POST', '/api/v1/events', { ...view, eventId: 'evt_view_2' });
  assert.equal(ingested.status, 202, JSON.stringify(ingested.body));
  assert.equal((s.services.eventHandlers!.targets({ ...view } as never) as unknown[]).length, 0);
  // What needs no scope still runs: a lifecycle event and a fetch.
  assert.equal((await post(s, 'viewer', { type: 'installation_setup', installationId: installation.id }, {}, token)).status, 200);
  assert.equal((await post(s, 'viewer', fetchEvent('https://x.test/env'), {}, token)).status, 200);
});
