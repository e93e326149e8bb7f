/**
 * The runtime endpoint holds what reaches integration code to the platform's rules (spec 4.1, 5.2):
 * an event runs only when the integration's manifest requests its scope, whoever posts it, and the
 * environment is the platform's, rebuilt from the store; the caller only chooses the installation.
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { buildEnvironment, encodeEnvelope } from '../src/runtime/index.ts';
import { callerFields, PLATFORM_ENVIRONMENT_KEYS } from '../src/runtime/caller-environment.ts';
import { sql, startTestServer, tmpDir, waitFor, type TestServer } from './helpers/index.ts';

process.env.VIEWER_API_KEY = 'sk_test_viewer';

/** `viewer` asks only openapi:read yet handles space_view; `peer` is another integration to install. */
function integrations(t: TestContext): string {
  const dir = tmpDir(t);
  const write = (name: string, manifest: string[], code: string) => {
    mkdirSync(join(dir, name));
    writeFileSync(
      join(dir, name, 'platform-manifest.yaml'),
      [
        `name: ${name}`,
        `title: ${name}`,
        'description: A runtime endpoint test.',
        'organization: switchyard-tests',
        'visibility: private',
        ...manifest,
        'script: ./index.ts',
        '',
      ].join('\n'),
    );
    writeFileSync(join(dir, name, 'index.ts'), code);
  };
  write(
    'viewer',
    [
      'scopes:',
      '  - openapi:read',
      'secrets:',
      '  API_KEY: ${{ env.VIEWER_API_KEY }}',
      'configurations:',
      '  account:',
      '    properties:',
      '      channel:',
      '        type: string',
      '        title: Channel',
      '        description: Where to post',
    ],
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
  write(
    'peer',
    ['scopes: []'],
    `import { createIntegration } from '@switchyard/runtime';\nexport default createIntegration({ fetch: async () => new Response('peer') });\n`,
  );
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
  for (const [who, bearer] of [
    ['installation token', token],
    ['admin token', s.token],
  ] as const) {
    const res = await post(s, 'viewer', view, { installation: { id: installation.id } }, bearer);
    const body = (await res.json()) as any;
    assert.equal(res.status, 403, `${who}: ${JSON.stringify(body)}`);
    assert.equal(body.error.code, 'forbidden', who);
    assert.match(body.error.message, /space:metadata:read/, `${who}: the missing scope is named`);
    assert.match(body.error.message, /space_view/, who);
    assert.match(body.error.hint, /scopes/, who);
  }
  const ran = (await sql.get<{ n: number }>(s.services.store, "SELECT count(*) AS n FROM invocations WHERE event_type = 'space_view'"))!;
  assert.equal(ran.n, 0, 'the handler never ran');
  // Ingest decides the same from the same table: the event is owed to no handler of viewer.
  const ingested = await s.api('POST', '/api/v1/events', { ...view, eventId: 'evt_view_2' });
  assert.equal(ingested.status, 202, JSON.stringify(ingested.body));
  assert.equal((s.services.eventHandlers!.targets({ ...view } as never) as unknown[]).length, 0);
  // What needs no scope still runs: a lifecycle event and a fetch.
  assert.equal((await post(s, 'viewer', { type: 'installation_setup', installationId: installation.id }, {}, token)).status, 200);
  assert.equal((await post(s, 'viewer', fetchEvent('https://x.test/env'), {}, token)).status, 200);
});

test('environment: what the platform owns is rebuilt from the store; forged configuration, status, urls and secrets never reach the code', async (t) => {
  const s = await server(t);
  const { installation, token } = await install(s, 'viewer', { channel: 'general' });
  const stored = (await (await fetch(`${installation.urls.publicEndpoint}`)).json()) as any;
  const forged = {
    apiEndpoint: 'https://evil.test/api',
    apiTokens: { installation: 'sy_inv_forged' },
    integration: { name: 'viewer', scopes: ['space:metadata:read'], urls: { publicEndpoint: 'https://evil.test/' } },
    installation: {
      id: installation.id,
      status: 'active-forged',
      configuration: { evil: 1 },
      urls: { publicEndpoint: 'https://evil.test/hook' },
      target: 'space',
    },
    spaceInstallation: { space: 'space-evil', configuration: { evil: 1 } },
    secrets: { API_KEY: 'forged' },
    signingSecrets: { integration: 'forged' },
    configuration: { evil: 1 },
    status: 'forged',
    note: 'a field of the caller',
  };
  for (const [who, bearer] of [
    ['admin token', s.token],
    ['installation token', token],
  ] as const) {
    const res = await post(s, 'viewer', fetchEvent('https://x.test/env'), forged, bearer);
    assert.equal(res.status, 200, who);
    const env = (await res.json()) as any;
    assert.equal(env.apiEndpoint, `${s.url}/api/v1`, who);
    assert.match(env.apiTokens.installation, /^sy_inv_/, who);
    assert.notEqual(env.apiTokens.installation, 'sy_inv_forged', who);
    assert.deepEqual(env.integration, stored.integration, who);
    assert.deepEqual(env.installation, stored.installation, `${who}: the stored installation, nothing of the forged one`);
    assert.equal(env.installation.status, 'active', who);
    assert.deepEqual(env.installation.configuration, { channel: 'general' }, who);
    assert.equal(env.installation.urls.publicEndpoint, installation.urls.publicEndpoint, who);
    assert.deepEqual(env.secrets, { API_KEY: 'sk_test_viewer' }, who);
    for (const key of ['spaceInstallation', 'siteInstallation', 'signingSecrets', 'configuration', 'status'])
      assert.equal(env[key], undefined, `${who}: ${key} is the platform's and this installation has none`);
    assert.equal(env.note, 'a field of the caller', `${who}: a field the platform does not own passes through`);
  }
});

test('environment: choosing another installation by id needs a token that may act for it', async (t) => {
  const s = await server(t);
  const mine = await install(s, 'viewer', { channel: 'mine' });
  const other = await install(s, 'viewer', { channel: 'other' });
  const peer = await install(s, 'peer');
  const envOf = async (res: Response) => {
    assert.equal(res.status, 200);
    return (await res.json()) as any;
  };
  const ev = fetchEvent('https://x.test/env');

  // The admin may act for any installation of the integration it posts to.
  const asAdmin = await envOf(await post(s, 'viewer', ev, { installation: { id: other.installation.id } }, s.token));
  assert.equal(asAdmin.installation.id, other.installation.id);
  assert.deepEqual(asAdmin.installation.configuration, { channel: 'other' });
  // ... and without naming one, the code runs with no installation.
  assert.equal((await envOf(await post(s, 'viewer', ev, {}, s.token))).installation, undefined);

  // An installation token acts for its own installation only.
  assert.equal((await envOf(await post(s, 'viewer', ev, {}, mine.token))).installation.id, mine.installation.id);
  assert.equal((await envOf(await post(s, 'viewer', ev, { installation: { id: mine.installation.id } }, mine.token))).installation.id, mine.installation.id);
  const stolen = await post(s, 'viewer', ev, { installation: { id: other.installation.id } }, mine.token);
  const stolenBody = (await stolen.json()) as any;
  assert.equal(stolen.status, 403, JSON.stringify(stolenBody));
  assert.equal(stolenBody.error.code, 'forbidden');
  assert.match(stolenBody.error.message, new RegExp(other.installation.id));

  // An installation the integration does not have, or no installation at all, is not run as "none".
  for (const [id, status, code] of [
    [peer.installation.id, 404, 'not_found'],
    ['inst_nope', 404, 'not_found'],
    [42, 400, 'bad_request'],
  ] as const) {
    const res = await post(s, 'viewer', ev, { installation: { id } }, s.token);
    const body = (await res.json()) as any;
    assert.equal(res.status, status, `${id}: ${JSON.stringify(body)}`);
    assert.equal(body.error.code, code, String(id));
    assert.equal(body.error.where, 'environment.installation.id', String(id));
  }
  for (const bad of ['inst_x', ['inst_x'], { id: '' }]) {
    const res = await post(s, 'viewer', ev, { installation: bad }, s.token);
    assert.equal(res.status, 400, JSON.stringify(bad));
    assert.match(((await res.json()) as any).error.where, /^environment\.installation/);
  }
  const ran = (await sql.get<{ n: number }>(s.services.store, "SELECT count(*) AS n FROM invocations WHERE event_type = 'fetch'"))!;
  assert.equal(ran.n, 4, 'only the allowed calls ran');
});

test('environment: every top-level key the platform builds, in either dialect and for every target, is one a caller cannot set', () => {
  const manifest = { name: 'x', title: 'X', description: 'd', organization: 'o', visibility: 'private', scopes: [] };
  const seen = new Set<string>();
  for (const dialect of ['platform', 'gitbook'] as const)
    for (const target of [undefined, 'organization', 'space', 'site'] as const) {
      const installation = target && {
        id: 'inst_1',
        integration: 'x',
        target,
        space: 'sp',
        site: 'si',
        status: 'active',
        configuration: {},
        externalIds: [],
        createdAt: '',
        updatedAt: '',
      };
      const env = buildEnvironment({
        publicUrl: 'http://127.0.0.1:1',
        integration: { name: 'x', dir: '.', manifest, dialect, secrets: {}, warnings: [], loadedAt: 0 } as never,
        installation: installation as never,
        tokens: { installation: 'a', integration: 'b' },
        signingSecrets: { integration: 'c', installation: 'd' },
      });
      for (const key of Object.keys(env)) seen.add(key);
    }
  for (const key of seen) assert.ok(PLATFORM_ENVIRONMENT_KEYS.includes(key), `${key} is built by the platform but a caller could set it`);
  assert.deepEqual(callerFields(JSON.parse('{"__proto__":{"polluted":1},"note":1,"secrets":{}}')), JSON.parse('{"__proto__":{"polluted":1},"note":1}'));
  assert.equal(({} as any).polluted, undefined);
});

test('a paused installation runs no code at the runtime endpoint (503 paused), an uninstalled one neither (410 gone), for every token, as at its public endpoint', async (t) => {
  const s = await server(t);
  const { installation, token } = await install(s, 'viewer', { channel: 'general' });
  const ran = async () => (await sql.get<{ n: number }>(s.services.store, 'SELECT count(*) AS n FROM invocations'))!.n;
  // The install's own installation_setup first (it runs in the background, never blocking the install).
  await waitFor(async () => (await ran()) === 1, 10_000);
  const events = [fetchEvent('https://x.test/env'), { type: 'installation_setup', installationId: installation.id }];
  const refused = async (bearer: string, status: number, code: string, who: string) => {
    for (const event of events) {
      const before = await ran();
      const res = await post(s, 'viewer', event, { installation: { id: installation.id } }, bearer);
      const body = (await res.json()) as any;
      assert.equal(res.status, status, `${who}, ${event.type}: ${JSON.stringify(body)}`);
      assert.equal(body.error.code, code, who);
      assert.match(body.error.message, new RegExp(installation.id), who);
      assert.equal(await ran(), before, `${who}, ${event.type}: no code ran`);
    }
  };

  assert.equal((await s.api('POST', `/api/v1/installations/${installation.id}/pause`)).status, 200);
  for (const [who, bearer] of [
    ['installation token', token],
    ['admin token', s.token],
  ] as const)
    await refused(bearer, 503, 'paused', who);
  // The installation token with no id in the envelope stands for its own installation: refused too.
  const own = await post(s, 'viewer', fetchEvent('https://x.test/env'), {}, token);
  assert.equal(own.status, 503, await own.text());
  const pub = await fetch(installation.urls.publicEndpoint);
  assert.equal(pub.status, 503, 'the same answer as the public endpoint');
  assert.equal(((await pub.json()) as any).error.code, 'paused');

  assert.equal((await s.api('POST', `/api/v1/installations/${installation.id}/resume`)).status, 200);
  assert.equal((await post(s, 'viewer', fetchEvent('https://x.test/env'), {}, token)).status, 200, 'resumed: runs again');

  assert.equal((await s.api('DELETE', `/api/v1/installations/${installation.id}`)).status, 200);
  await refused(s.token, 410, 'gone', 'admin token');
  const revoked = await post(s, 'viewer', fetchEvent('https://x.test/env'), {}, token);
  assert.equal(revoked.status, 401, 'its token stopped working');
  assert.equal((await fetch(installation.urls.publicEndpoint)).status, 410, 'the same answer as the public endpoint');
});
