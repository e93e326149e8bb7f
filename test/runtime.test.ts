import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { buildEnvironment, encodeEnvelope } from '../src/runtime/index.ts';
import { ROOT, sql, startTestServer, tmpDir, waitFor, type TestServer } from './helpers/index.ts';
import { connectStore, openStore } from '../src/store/index.ts';
import type { TestContext } from 'node:test';
import { allMigrations } from '../src/server/migrations.ts';
import { capabilityOf } from '../src/module/capabilities.ts';

const FIXTURES = join(ROOT, 'test/fixtures/integrations');
process.env.KITCHEN_SINK_API_KEY = 'sk_test_kitchen';

async function server(t: TestContext): Promise<TestServer> {
  return startTestServer(t, { integrations_dir: FIXTURES });
}

async function installSink(s: TestServer, configuration: Record<string, unknown> = { channel: 'general' }) {
  const r = await s.api('POST', '/api/v1/installations', { integration: 'kitchen-sink', configuration });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  return r.body as { installation: { id: string; status: string; urls: { publicEndpoint: string } }; token: string };
}

function envelopeRequest(s: TestServer, name: string, envelope: Parameters<typeof encodeEnvelope>[0], token = s.token, version = 'v1') {
  return fetch(`${s.url}/${version}/integrations/${name}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}` },
    body: encodeEnvelope(envelope),
  });
}

test('runtime endpoint: a fetch event reaches the handler as a byte-exact Request', async (t) => {
  const s = await server(t);
  const body = new Uint8Array([0, 1, 2, 250, 255, 10, 13]);
  const res = await envelopeRequest(s, 'kitchen-sink', {
    event: {
      type: 'fetch',
      request: {
        method: 'PUT',
        url: 'https://example.test/v1/integrations/kitchen-sink/installations/x/echo?q=1',
        headers: [
          ['x-custom', 'A b'],
          ['content-type', 'application/octet-stream'],
        ],
      },
    },
    environment: {},
    fetchBody: body,
  });
  assert.equal(res.status, 200);
  const echo = (await res.json()) as any;
  assert.equal(echo.method, 'PUT');
  assert.equal(echo.url, 'https://example.test/v1/integrations/kitchen-sink/installations/x/echo?q=1');
  assert.deepEqual(echo.body, Array.from(body));
  assert.ok(echo.headers.some(([k, v]: string[]) => k === 'x-custom' && v === 'A b'));
});

test('runtime endpoint: unknown version, missing token and unknown integration are clear 4xx', async (t) => {
  const s = await server(t);
  const env = { event: { type: 'space_content_updated' }, environment: {} };
  const v2 = await envelopeRequest(s, 'kitchen-sink', env, s.token, 'v2');
  assert.equal(v2.status, 400);
  assert.match(((await v2.json()) as any).error.message, /unknown runtime API version "v2"; versions: v1/);
  const anon = await fetch(`${s.url}/v1/integrations/kitchen-sink`, { method: 'POST', body: encodeEnvelope(env) });
  assert.equal(anon.status, 401);
  const unknown = await envelopeRequest(s, 'nope', env);
  assert.equal(unknown.status, 404);
  assert.equal(((await unknown.json()) as any).error.code, 'not_found');
});

test('runtime endpoint: events go to the events map (200), unhandled types answer 406', async (t) => {
  const s = await server(t);
  const handled = await envelopeRequest(s, 'kitchen-sink', { event: { type: 'space_content_updated', spaceId: 's1', revisionId: 'r1' }, environment: {} });
  assert.equal(handled.status, 200);
  // A type that needs no scope (one whose scope the manifest lacks is a 403: runtime-envelope.test.ts).
  const unhandled = await envelopeRequest(s, 'kitchen-sink', { event: { type: 'site_installation_setup' }, environment: {} });
  assert.equal(unhandled.status, 406);
  const row = (await sql.get<{ logs: string }>(s.services.store, "SELECT logs FROM invocations WHERE event_type = 'space_content_updated'"))!;
  assert.match(row.logs, /content updated s1 r1/);
});

test('components: initialState from props, action replaces state, empty result keeps it, unknown id is 404', async (t) => {
  const s = await server(t);
  const { installation } = await installSink(s);
  const render = (body: unknown) => s.api('POST', `/api/v1/installations/${installation.id}/render`, body);
  const first = await render({ componentId: 'counter', props: { start: 5 } });
  assert.equal(first.status, 200);
  assert.equal(first.body.type, 'element');
  assert.deepEqual(first.body.state, { count: 5 });
  assert.equal(first.body.element.type, 'block');
  assert.equal(first.body.element.children[0].type, 'button');
  assert.deepEqual(first.body.element.children[0].onPress, { action: 'increment' });
  const clicked = await render({ componentId: 'counter', props: { start: 5 }, state: first.body.state, action: { action: 'increment' } });
  assert.deepEqual(clicked.body.state, { count: 6 });
  assert.equal(clicked.body.element.children[0].label, 'Count 6');
  const replaced = await render({ componentId: 'counter', props: {}, state: { count: 9, extra: 1 }, action: { action: 'reset' } });
  assert.deepEqual(replaced.body.state, { count: 0, reset: true }, 'a returned state replaces the old one wholesale');
  const ignored = await render({ componentId: 'counter', props: {}, state: { count: 2 }, action: { action: 'unknown' } });
  assert.deepEqual(ignored.body.state, { count: 2 });
  const missing = await render({ componentId: 'nope', props: {} });
  assert.equal(missing.status, 404);
});

test('public endpoint: any method and sub-path reaches fetch; spec 4.2 answers; errors are shown or hidden', async (t) => {
  const s = await server(t);
  const { installation } = await installSink(s);
  const ep = installation.urls.publicEndpoint;
  assert.equal(ep, `${s.url}/v1/integrations/kitchen-sink/installations/${installation.id}`);
  const post = await fetch(ep, { method: 'POST', body: 'anything' });
  assert.equal(post.status, 200);
  assert.deepEqual(await post.json(), { received: true });
  const get = await fetch(ep);
  assert.equal(get.status, 405);
  assert.equal(await get.text(), 'Method not allowed');
  const echo = await fetch(`${ep}/echo?x=1`, { method: 'PATCH', body: 'héllo', headers: { 'x-sig': 't=1,v1=ab' } });
  const e = (await echo.json()) as any;
  assert.equal(e.method, 'PATCH');
  assert.equal(new TextDecoder().decode(new Uint8Array(e.body)), 'héllo');
  assert.ok(e.headers.some(([k, v]: string[]) => k === 'x-sig' && v === 't=1,v1=ab'));
  const shown = await fetch(`${ep}/shown`);
  assert.equal(shown.status, 403);
  assert.match(await shown.text(), /you may not do that/);
  const boom = await fetch(`${ep}/boom`);
  assert.equal(boom.status, 500);
  const boomText = await boom.text();
  assert.deepEqual(JSON.parse(boomText), { error: 'Internal server error' });
  assert.doesNotMatch(boomText, /internal detail/);
  const requestId = boom.headers.get('x-request-id')!;
  // Read through the invocations API, which commits records still waiting for their group commit.
  const row = (await capabilityOf(s.services, 'invocations').get(requestId))!;
  assert.match(row.error!.message, /internal detail that must not leak/);
});

test('environment: spec 2.4 fields, lowercase status, secrets from the manifest, short-lived token', async (t) => {
  const s = await server(t);
  const { installation, token } = await installSink(s);
  const env = (await (await fetch(`${installation.urls.publicEndpoint}/env`)).json()) as any;
  assert.equal(env.apiEndpoint, `${s.url}/api/v1`);
  assert.match(env.apiTokens.installation, /^sy_inv_/);
  assert.notEqual(env.apiTokens.installation, token, 'the long-lived token never enters the isolate');
  assert.equal(env.integration.name, 'kitchen-sink');
  assert.equal(env.integration.urls.publicEndpoint, installation.urls.publicEndpoint, "spec 2.4: the installation's public endpoint");
  assert.equal(env.installation.id, installation.id);
  assert.equal(env.installation.status, 'active');
  assert.equal(env.installation.target, 'organization');
  assert.deepEqual(env.installation.configuration, { channel: 'general', threshold: 3, mode: 'fast' }, 'with the manifest defaults');
  assert.equal(env.installation.urls.publicEndpoint, installation.urls.publicEndpoint);
  assert.deepEqual(env.secrets, { API_KEY: 'sk_test_kitchen' });
  // An edit reaches the next request (installations are cached between requests).
  assert.equal((await s.api('PATCH', `/api/v1/installations/${installation.id}`, { configuration: { channel: 'ops' } })).status, 200);
  const edited = (await (await fetch(`${installation.urls.publicEndpoint}/env`)).json()) as any;
  assert.deepEqual(edited.installation.configuration, { channel: 'ops', threshold: 3, mode: 'fast' });
  // Each invocation gets its own copy of the environment: what one changes in it the next does not see.
  assert.equal((await fetch(`${installation.urls.publicEndpoint}/scribble`)).status, 200);
  const after = (await (await fetch(`${installation.urls.publicEndpoint}/env`)).json()) as any;
  assert.deepEqual(after.installation.configuration, { channel: 'ops', threshold: 3, mode: 'fast' });
  assert.deepEqual(after.secrets, { API_KEY: 'sk_test_kitchen' });
  // A pause is a write too: the next request sees it (503), and resuming restores the environment.
  assert.equal((await s.api('POST', `/api/v1/installations/${installation.id}/pause`)).status, 200);
  assert.equal((await fetch(`${installation.urls.publicEndpoint}/env`)).status, 503);
  assert.equal((await s.api('POST', `/api/v1/installations/${installation.id}/resume`)).status, 200);
  const resumed = (await (await fetch(`${installation.urls.publicEndpoint}/env`)).json()) as any;
  assert.equal(resumed.installation.status, 'active');
});

test("spec 2.4: integration.urls.publicEndpoint is the installation's endpoint (platform-manifest.yaml); GitBook's integration-wide URL for a gitbook-manifest.yaml", async (t) => {
  const s = await server(t);
  const { installation } = await installSink(s);
  const env = (await (await fetch(`${installation.urls.publicEndpoint}/env`)).json()) as any;
  assert.equal(env.integration.urls.publicEndpoint, installation.urls.publicEndpoint);
  assert.equal(env.integration.urls.publicContentEndpoint, installation.urls.publicEndpoint);
  // It is an address the installation answers on (spec 4.2's handler).
  const posted = await fetch(env.integration.urls.publicEndpoint, { method: 'POST', body: '{}' });
  assert.deepEqual(await posted.json(), { received: true });
  // With no installation (the admin's envelope naming none) there is none to point at: the
  // integration's own endpoint.
  const bare = await envelopeRequest(s, 'kitchen-sink', {
    event: { type: 'fetch', request: { method: 'GET', url: `${s.url}/v1/integrations/kitchen-sink/installations/x/env`, headers: [] } },
    environment: {},
  });
  const bareEnv = (await bare.json()) as any;
  assert.equal(bareEnv.installation, undefined);
  assert.equal(bareEnv.integration.urls.publicEndpoint, `${s.url}/v1/integrations/kitchen-sink/integration`);
  // GitBook's dialect keeps GitBook's meaning, installation or not.
  const manifest = { name: 'x', title: 'X', description: 'd', organization: 'o', visibility: 'private', scopes: [] };
  for (const target of ['organization', 'space', 'site'] as const) {
    const inst = {
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
    const of = (dialect: 'platform' | 'gitbook') =>
      buildEnvironment({
        publicUrl: 'http://127.0.0.1:1',
        integration: { name: 'x', dir: '.', manifest, dialect, secrets: {}, warnings: [], loadedAt: 0 } as never,
        installation: inst as never,
        tokens: {},
      }) as any;
    assert.equal(of('gitbook').integration.urls.publicEndpoint, 'http://127.0.0.1:1/v1/integrations/x/integration', target);
    assert.equal(of('platform').integration.urls.publicEndpoint, 'http://127.0.0.1:1/v1/integrations/x/installations/inst_1', target);
  }
});

test('state machine: pending until required configuration is set; every edit validated and emits installation_setup', async (t) => {
  const s = await server(t);
  const created = await installSink(s, {});
  const id = created.installation.id;
  assert.equal(created.installation.status, 'pending');
  const setupRuns = () =>
    sql.all(s.services.store, "SELECT logs FROM invocations WHERE installation_id = ? AND event_type = 'installation_setup' ORDER BY created_at", [id]);
  await waitFor(async () => (await setupRuns()).length === 1);
  assert.match((await setupRuns())[0]!.logs, /status=pending/);

  const bad = await s.api('PATCH', `/api/v1/installations/${id}`, { configuration: { threshold: 'high', mode: 'medium', chanel: 'x' } });
  assert.equal(bad.status, 400);
  const wheres = bad.body.error.problems.map((p: any) => p.where);
  assert.ok(
    wheres.some((w: string) => w.includes('threshold')),
    JSON.stringify(bad.body),
  );
  assert.ok(
    wheres.some((w: string) => w.includes('mode')),
    JSON.stringify(bad.body),
  );
  assert.ok(
    wheres.some((w: string) => w.includes('chanel')),
    JSON.stringify(bad.body),
  );
  const still = await s.api('GET', `/api/v1/installations/${id}`);
  assert.deepEqual(still.body.installation.configuration, { threshold: 3, mode: 'fast' }, 'nothing stored on failure (the defaults were stored at install)');

  const good = await s.api('PATCH', `/api/v1/installations/${id}`, { configuration: { channel: 'ops' } });
  assert.equal(good.status, 200);
  assert.equal(good.body.installation.status, 'active');
  await waitFor(async () => (await setupRuns()).length === 2);
  assert.match((await setupRuns())[1]!.logs, /status=active/);

  const removed = await s.api('PATCH', `/api/v1/installations/${id}`, { configuration: { channel: null } });
  assert.equal(removed.body.installation.status, 'pending');
});

test('space installs emit space_installation_setup; site installs validate site configuration', async (t) => {
  const s = await server(t);
  const space = await s.api('POST', '/api/v1/installations', { integration: 'kitchen-sink', space: 'space-1', configuration: { channel: 'c' } });
  assert.equal(space.status, 201);
  assert.equal(space.body.installation.target, 'space');
  await waitFor(() => sql.get<any>(s.services.store, "SELECT logs FROM invocations WHERE event_type = 'space_installation_setup'")).then((row: any) =>
    assert.match(row.logs, /space setup space-1/),
  );
  const site = await s.api('POST', '/api/v1/installations', { integration: 'kitchen-sink', site: 'site-1', configuration: { tracking: 'yes' } });
  assert.equal(site.status, 400);
  assert.ok(site.body.error.problems.some((p: any) => p.where.includes('tracking')));
  const siteOk = await s.api('POST', '/api/v1/installations', { integration: 'kitchen-sink', site: 'site-1', configuration: { tracking: true } });
  assert.equal(siteOk.body.installation.status, 'active');
  const env = (await (await fetch(`${siteOk.body.installation.urls.publicEndpoint}/env`)).json()) as any;
  assert.equal(env.siteInstallation.site, 'site-1');
});

test("spec 2.4: a site installation carries the space it is in, and space_selection is an object (GitBook's shapes for a gitbook-manifest.yaml)", async (t) => {
  const s = await server(t);
  const envOf = async (body: Record<string, unknown>) => {
    const r = await s.api('POST', '/api/v1/installations', { integration: 'kitchen-sink', ...body });
    assert.equal(r.status, 201, JSON.stringify(r.body));
    return { installation: r.body.installation, env: (await (await fetch(`${r.body.installation.urls.publicEndpoint}/env`)).json()) as any };
  };
  const org = await envOf({ configuration: { channel: 'c' } });
  assert.deepEqual(org.env.installation.space_selection, { selection: 'all', spaces: [] });
  const space = await envOf({ space: 'space-1', configuration: { channel: 'c' } });
  assert.deepEqual(space.env.installation.space_selection, { selection: 'selected', spaces: ['space-1'] });
  // A site named with a space: a site installation in that space.
  const site = await envOf({ site: 'site-1', space: 'space-7', configuration: { tracking: true } });
  assert.equal(site.installation.target, 'site');
  assert.equal(site.env.siteInstallation.site, 'site-1');
  assert.equal(site.env.siteInstallation.space, 'space-7');
  assert.deepEqual(site.env.installation.space_selection, { selection: 'selected', spaces: ['space-7'] });
  // One that names no space still has the key: null.
  const bare = await envOf({ site: 'site-2', configuration: { tracking: true } });
  assert.ok(Object.hasOwn(bare.env.siteInstallation, 'space'));
  assert.equal(bare.env.siteInstallation.space, null);
  assert.deepEqual(bare.env.installation.space_selection, { selection: 'selected', spaces: [] });
  // GitBook's dialect keeps GitBook's: the string, and no space on a site installation.
  const manifest = { name: 'x', title: 'X', description: 'd', organization: 'o', visibility: 'private', scopes: [] };
  const gitbookEnv = (target: 'organization' | 'site') =>
    buildEnvironment({
      publicUrl: 'http://127.0.0.1:1',
      integration: { name: 'x', dir: '.', manifest, dialect: 'gitbook', secrets: {}, warnings: [], loadedAt: 0 } as never,
      installation: {
        id: 'inst_1',
        integration: 'x',
        target,
        site: 'si',
        space: 'sp',
        status: 'active',
        configuration: {},
        externalIds: [],
        createdAt: '',
        updatedAt: '',
      } as never,
      tokens: {},
    }) as any;
  assert.equal(gitbookEnv('organization').installation.space_selection, 'all');
  assert.equal(gitbookEnv('site').installation.space_selection, 'selected');
  assert.equal(gitbookEnv('site').installation.site_selection, 'selected');
  assert.ok(!Object.hasOwn(gitbookEnv('site').siteInstallation, 'space'));
});

test('pause, resume and uninstall: paused answers 503, uninstalled 410 and its token stops working', async (t) => {
  const s = await server(t);
  const { installation, token } = await installSink(s);
  const ep = installation.urls.publicEndpoint;
  assert.equal((await s.api('POST', `/api/v1/installations/${installation.id}/pause`)).body.installation.status, 'paused');
  const paused = await fetch(ep, { method: 'POST' });
  assert.equal(paused.status, 503);
  assert.match(((await paused.json()) as any).error.message, /paused/);
  assert.equal((await s.api('POST', `/api/v1/installations/${installation.id}/resume`)).body.installation.status, 'active');
  assert.equal((await fetch(ep, { method: 'POST' })).status, 200);
  assert.equal((await s.api('GET', `/api/v1/installations/${installation.id}`, undefined, token)).status, 200);
  assert.equal((await s.api('DELETE', `/api/v1/installations/${installation.id}`)).body.installation.status, 'uninstalled');
  assert.equal((await fetch(ep, { method: 'POST' })).status, 410);
  assert.equal((await s.api('GET', `/api/v1/installations/${installation.id}`, undefined, token)).status, 401);
  assert.equal((await s.api('POST', `/api/v1/installations/${installation.id}/resume`)).status, 409);
});

test('tokens: stored hashed; an installation reads and configures itself, never another', async (t) => {
  const s = await server(t);
  const a = await installSink(s);
  const b = await installSink(s);
  const rows = await sql.all(s.services.store, 'SELECT token_hash FROM installations');
  assert.ok(rows.every((r) => /^[0-9a-f]{64}$/.test(r.token_hash)));
  const dump = JSON.stringify(await sql.all(s.services.store, 'SELECT * FROM installations'));
  assert.ok(!dump.includes(a.token) && !dump.includes(b.token), 'no plaintext token in the database');
  assert.equal((await s.api('GET', `/api/v1/installations/${a.installation.id}`, undefined, a.token)).status, 200);
  const cross = await s.api('GET', `/api/v1/installations/${b.installation.id}`, undefined, a.token);
  assert.equal(cross.status, 403);
  assert.equal((await s.api('PATCH', `/api/v1/installations/${b.installation.id}`, { configuration: { channel: 'x' } }, a.token)).status, 403);
  assert.equal((await s.api('POST', '/api/v1/installations', { integration: 'kitchen-sink' }, a.token)).status, 403);
  assert.equal((await s.api('DELETE', `/api/v1/installations/${a.installation.id}`, undefined, a.token)).status, 403);
  const list = await s.api('GET', '/api/v1/installations', undefined, a.token);
  assert.deepEqual(
    list.body.installations.map((i: any) => i.id),
    [a.installation.id],
  );
});

test('the in-sandbox API client updates its own configuration and cannot reach another installation', async (t) => {
  const s = await server(t);
  const a = await installSink(s);
  const b = await installSink(s);
  const res = await fetch(`${a.installation.urls.publicEndpoint}/set-channel`);
  assert.equal(res.status, 200, await res.clone().text());
  const stored = await s.api('GET', `/api/v1/installations/${a.installation.id}`);
  assert.equal(stored.body.installation.configuration.channel, 'from-code');
  const poke = (await (await fetch(`${a.installation.urls.publicEndpoint}/poke?id=${b.installation.id}`)).json()) as any;
  assert.equal(poke.reached, false);
  assert.match(poke.error, /403|not /);
});

test("an integration's answer goes out as it gave it: repeated headers kept, hop-by-hop dropped, our x-request-id, byte-exact body, no body on 204", async (t) => {
  const { H3 } = await import('h3');
  const { toNodeHandler } = await import('h3/node');
  const { createServer } = await import('node:http');
  const { toResponse } = await import('../src/runtime/index.ts');
  const body = new Uint8Array([0, 255, 10, 13, 0x7f]);
  const app = new H3();
  app.get('/answer', () =>
    toResponse(
      {
        status: 201,
        headers: [
          ['set-cookie', 'a=1'],
          ['set-cookie', 'b=2'],
          ['connection', 'close'],
          ['transfer-encoding', 'chunked'],
          ['x-request-id', 'forged'],
          ['content-type', 'application/octet-stream'],
        ],
        body,
        logs: [],
        durationMs: 1,
        cpuMs: 0,
      },
      'req_ours',
    ),
  );
  app.get('/empty', () => toResponse({ status: 204, headers: [], body: new Uint8Array([1, 2]), logs: [], durationMs: 1, cpuMs: 0 }, 'req_empty'));
  const server = createServer(toNodeHandler(app));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  t.after(() => server.close());
  const base = `http://127.0.0.1:${(server.address() as import('node:net').AddressInfo).port}`;
  const res = await fetch(`${base}/answer`);
  assert.equal(res.status, 201);
  assert.equal(res.statusText, 'Created');
  assert.deepEqual(res.headers.getSetCookie(), ['a=1', 'b=2']);
  assert.equal(res.headers.get('x-request-id'), 'req_ours');
  assert.equal(res.headers.get('connection'), 'keep-alive', 'the server decides about the connection, not the integration');
  assert.equal(res.headers.get('content-length'), '5');
  assert.deepEqual(new Uint8Array(await res.arrayBuffer()), body);
  const empty = await fetch(`${base}/empty`);
  assert.equal(empty.status, 204);
  assert.equal(empty.headers.get('x-request-id'), 'req_empty');
  assert.equal((await empty.arrayBuffer()).byteLength, 0);
});

test("a public-endpoint answer does not wait for its invocation's record, which can still be read back at once", async (t) => {
  const s = await server(t);
  const { installation } = await installSink(s);
  const invocations = capabilityOf(s.services, 'invocations');
  for (let i = 0; i < 5; i++) {
    const res = await fetch(`${installation.urls.publicEndpoint}/echo`, { method: 'POST', body: `n${i}` });
    assert.equal(res.status, 200);
    await res.arrayBuffer();
    // Read in the same turn the answer arrived in: a record still waiting for its group commit is committed first.
    const seen = await invocations.get(res.headers.get('x-request-id')!);
    assert.equal(seen?.status, 200, `invocation ${i} is readable right after its answer`);
  }
  await s.close();
  const store = await connectStore(s.config.data_dir, { url: s.config.store || undefined, migrations: allMigrations() });
  t.after(() => store.close());
  assert.equal(await sql.value(store, "SELECT COUNT(*) AS n FROM invocations WHERE event_type = 'fetch'"), 5, 'all recorded by shutdown');
});

test('a line printed after the answer (waitUntil) joins its invocation record', async (t) => {
  const s = await server(t);
  const { installation } = await installSink(s);
  const invocations = capabilityOf(s.services, 'invocations');
  for (let i = 0; i < 3; i++) {
    const res = await fetch(`${installation.urls.publicEndpoint}/later`);
    assert.equal(await res.text(), 'answered');
    const id = res.headers.get('x-request-id')!;
    await waitFor(async () => (await invocations.get(id))?.logs.some((l) => l.message === 'printed after the answer') === true, 5_000);
    assert.deepEqual(
      (await invocations.get(id))!.logs.map((l) => l.message),
      ['printed before the answer', 'printed after the answer'],
    );
  }
});

test('a late line that arrives before its invocation is recorded is kept for the record', async (t) => {
  const s = await server(t);
  const { installation } = await installSink(s);
  const runtime = capabilityOf(s.services, 'runtime');
  const invocations = capabilityOf(s.services, 'invocations');
  const requestId = 'req_early_line_test';
  runtime.appendLateLog(requestId, { time: Date.now(), level: 'info', message: 'came first' });
  const integration = capabilityOf(s.services, 'registry').get('kitchen-sink')!;
  await runtime.invoke({
    integration,
    installation: (await capabilityOf(s.services, 'installations').find(installation.id))!,
    envelope: { event: { type: 'fetch', request: { method: 'GET', url: `${installation.urls.publicEndpoint}/env`, headers: [] } }, environment: {} },
    requestId,
  });
  assert.deepEqual(
    (await invocations.get(requestId))!.logs.map((l) => l.message),
    ['came first'],
  );
});

test('invocation records: while another connection holds the write lock, the group commit waits a turn (the loop not blocked); observers hear once it commits', async (t) => {
  const { default: Database } = await import('better-sqlite3');
  const { createRuntime } = await import('../src/runtime/service.ts');
  const dir = tmpDir(t);
  const store = openStore(dir, { migrations: allMigrations() });
  t.after(() => store.close());
  const other = new Database(join(dir, 'switchyard.db'));
  t.after(() => other.close());
  const log = { debug() {}, info() {}, warn() {}, error() {}, child: () => log };
  const result = { status: 200, headers: [], body: new Uint8Array(0), logs: [], durationMs: 1, cpuMs: 1 };
  const runtime = createRuntime({
    database: store.database,
    log,
    publicUrl: () => 'http://localhost',
    registry: {} as never,
    installations: {} as never,
    tokenTtlMs: 1_000,
    logBudget: { perInvocation: 1 << 16, perMinute: 1 << 20, diskReserve: 0, dataDir: dir, freeBytes: () => Infinity },
    sandbox: {
      invoke() {
        // Two turns from now, after the record's first (refused) commit: the lock is let go.
        setImmediate(() => setImmediate(() => other.exec('COMMIT')));
        return Promise.resolve(result);
      },
    } as never,
  });
  const heard: string[] = [];
  runtime.observe((n) => heard.push(n.kind));
  other.exec('BEGIN IMMEDIATE');
  const started = performance.now();
  const integration = { name: 'hello', dir, manifest: {}, secrets: {}, warnings: [], loadedAt: 0, script: { name: 'hello', version: 'v1', code: '' } };
  const { id } = await runtime.invoke({ integration: integration as never, envelope: { event: { type: 'ping' }, environment: {} }, requestId: 'req_patient' });
  assert.ok(performance.now() - started < 1_000, 'no busy_timeout sleep');
  assert.deepEqual(heard, ['recorded']);
  assert.equal(await sql.value(store, 'SELECT count(*) AS n FROM invocations WHERE id = ?', [id]), 1);
});
