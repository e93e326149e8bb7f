/**
 * GitBook compatibility: integrations written in GitBook's shape (gitbook-manifest.yaml,
 * '@gitbook/runtime', GitBook's API client and installation model) load unchanged and run end to
 * end against a real server. The fixtures in test/fixtures/gitbook are our own code in that shape.
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { cpSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { join } from 'node:path';
import { encodeEnvelope } from '../src/runtime/index.ts';
import { samplePayload } from '../src/events/index.ts';
import { ROOT, runCli, startTestServer, tmpDir, type TestServer, sql } from './helpers/index.ts';
import { RELAXED_SANDBOX, startProvider, visit } from './oauth-support.ts';
import { capabilityOf } from '../src/module/capabilities.ts';

const FIXTURES = join(ROOT, 'test/fixtures/gitbook');

/** A copy of the GitBook fixtures, with a stand-in of the npm `@gitbook/runtime` installed in each. */
function gitbookFolder(t: TestContext): string {
  const dir = tmpDir(t);
  cpSync(FIXTURES, dir, { recursive: true });
  for (const name of readdirSync(FIXTURES)) {
    // The real package is a Worker entry point: bundled, it answers every request with a
    // ReferenceError. This stand-in fails louder; the bundler must never pick it up.
    const pkg = join(dir, name, 'node_modules/@gitbook/runtime');
    mkdirSync(pkg, { recursive: true });
    writeFileSync(
      join(pkg, 'package.json'),
      JSON.stringify({ name: '@gitbook/runtime', type: 'module', exports: { '.': './index.js', './jsx-runtime': './index.js' } }),
    );
    writeFileSync(join(pkg, 'index.js'), "throw new Error('the npm @gitbook/runtime package was bundled');\n");
  }
  return dir;
}

/** A working folder whose config.yaml gives `check` room to start an isolate on a busy machine. */
function roomyCwd(t: TestContext): string {
  const cwd = tmpDir(t);
  writeFileSync(join(cwd, 'config.yaml'), 'sandbox:\n  cpu_time: 5s\n  startup_time: 15s\n');
  return cwd;
}

function envelope(s: TestServer, name: string, body: Parameters<typeof encodeEnvelope>[0]) {
  return fetch(`${s.url}/v1/integrations/${name}`, { method: 'POST', headers: { authorization: `Bearer ${s.token}` }, body: encodeEnvelope(body) });
}

test('check: a gitbook-manifest.yaml folder importing @gitbook/runtime passes unchanged, saying what will not run here', async (t) => {
  const dir = gitbookFolder(t);
  const r = await runCli(['check', join(dir, 'gb-analytics'), '--json'], { cwd: roomyCwd(t) });
  const j = JSON.parse(r.stdout);
  assert.equal(r.code, 0, JSON.stringify(j.errors));
  assert.equal(j.ok, true);
  assert.equal(j.name, 'GB-Analytics');
  assert.deepEqual(
    j.sandbox.exports.unsupported.map((u: any) => u.handler),
    ['fetch_published_script'],
  );
  const warnings = j.warnings.map((w: any) => `${w.where.split('/').pop()} ${w.message}`).join('\n');
  assert.match(warnings, /gitbook-manifest\.yaml:\d+:\d+ scopes\[1\]: "site:script:inject" is an internal scope here/);
  assert.match(warnings, /gitbook-manifest\.yaml:\d+:\d+ icon: "\.\/assets\/icon\.png" is a JPEG image with a \.png name/);
  assert.match(warnings, /fetch_published_script: not supported here, its invocations are answered 501: injecting scripts/);
});

test("check: the spec's platform-manifest.yaml keeps its stricter rule on internal scopes; a GitBook-form name (capitals) is a name there too", async (t) => {
  const dir = gitbookFolder(t);
  const folder = join(dir, 'gb-analytics');
  const { readFileSync, renameSync } = await import('node:fs');
  renameSync(join(folder, 'gitbook-manifest.yaml'), join(folder, 'platform-manifest.yaml'));
  const r = await runCli(['check', folder, '--json'], { cwd: roomyCwd(t) });
  const j = JSON.parse(r.stdout);
  assert.equal(r.code, 1);
  const errors = j.errors.map((e: any) => e.message).join('\n');
  assert.match(errors, /"site:script:inject" is an internal scope: integrations cannot inject scripts/);
  // Spec 2.5: the name is a string; GitBook's own validator takes capitals too.
  assert.doesNotMatch(JSON.stringify([...j.errors, ...j.warnings]), /GB-Analytics/);
  assert.ok(readFileSync(join(folder, 'platform-manifest.yaml'), 'utf8').includes('GB-Analytics'));
});

test('check: a configurations.space section counts, for the space installations it configures', async (t) => {
  const dir = gitbookFolder(t);
  const spaces = await runCli(['check', join(dir, 'gb-spaces')], { cwd: roomyCwd(t) });
  assert.equal(spaces.code, 0, spaces.stderr);
  assert.match(spaces.stdout, /manifest {2}\S*ok\S* {2}1 scope\(s\), 0 block\(s\), 1 configuration property \(space: 1\)$/m);
  const analytics = await runCli(['check', join(dir, 'gb-analytics')], { cwd: roomyCwd(t) });
  assert.match(analytics.stdout, /2 configuration properties \(site: 2\)$/m);
  // An account section configures organization installations, and space ones when there is no space section.
  const team = await runCli(['check', join(dir, 'gb-team')], { cwd: roomyCwd(t) });
  assert.match(team.stdout, /1 configuration property \(organization and space: 1\)$/m);
});

test('createIntegration: an unknown key is a load error naming it and the nearest known key', async (t) => {
  const dir = gitbookFolder(t);
  const file = join(dir, 'gb-analytics/src/index.ts');
  const { readFileSync } = await import('node:fs');
  writeFileSync(file, readFileSync(file, 'utf8').replace('events: {', 'event: {'));
  const r = await runCli(['check', join(dir, 'gb-analytics'), '--json'], { cwd: roomyCwd(t) });
  const j = JSON.parse(r.stdout);
  assert.equal(r.code, 1);
  assert.match(j.errors[0].message, /createIntegration\(\): unknown key "event" \(did you mean "events"\?\)/);
});

test('serve: the GitBook-shaped integration runs (MODE, .raw.js as text, ExposableError codes) and its script-injection handler answers 501', async (t) => {
  const dir = gitbookFolder(t);
  const s = await startTestServer(t, { integrations_dir: dir });
  const inst = await s.api('POST', '/api/v1/installations', {
    integration: 'GB-Analytics',
    site: 'site_a',
    configuration: { collector_url: 'https://collector.example/a', label: '' },
  });
  assert.equal(inst.status, 201, JSON.stringify(inst.body));
  const endpoint = inst.body.installation.urls.publicEndpoint;
  const res = await fetch(`${endpoint}/info`);
  assert.equal(res.status, 200);
  const info = (await res.json()) as any;
  assert.equal(info.mode, 'production');
  assert.ok(info.scriptBytes > 20);
  assert.equal(info.site, 'site_a');
  assert.equal(info.configuration.collector_url, 'https://collector.example/a');
  const fail = await fetch(`${endpoint}/fail`);
  assert.equal(fail.status, 409);
  assert.deepEqual(await fail.json(), { error: 'asked to fail' });

  const script = await envelope(s, 'GB-Analytics', {
    event: { type: 'fetch_published_script' },
    environment: { installation: { id: inst.body.installation.id } },
  });
  assert.equal(script.status, 501);
  assert.match(
    ((await script.json()) as any).error,
    /"fetch_published_script" events are not supported here \(the integration's fetch_published_script handler does not run\): injecting scripts/,
  );
});

test('integration public endpoint: reaches fetch with no installation; an OAuth redirect built from it finds its installation from the signed state', async (t) => {
  const provider = await startProvider(t);
  process.env.GB_CONNECT_CLIENT_ID = 'gb-client';
  process.env.GB_CONNECT_CLIENT_SECRET = 'gb-secret-5f2a9c';
  process.env.GB_CONNECT_PROVIDER_URL = provider.url;
  const s = await startTestServer(t, { integrations_dir: gitbookFolder(t), sandbox: RELAXED_SANDBOX });
  const integrationEndpoint = `${s.url}/v1/integrations/gb-connect/integration`;

  for (const method of ['GET', 'POST']) {
    const r = await fetch(`${integrationEndpoint}/whoami`, { method });
    assert.equal(r.status, 200, `${method}: ${await r.clone().text()}`);
    assert.deepEqual(await r.json(), { installation: null, connected: false });
  }

  const installed = await s.api('POST', '/api/v1/installations', { integration: 'gb-connect' });
  assert.equal(installed.status, 201, JSON.stringify(installed.body));
  const id: string = installed.body.installation.id;
  const endpoint: string = installed.body.installation.urls.publicEndpoint;

  // The button's callback on the installation's endpoint starts the flow...
  const start = await visit(`${endpoint}/oauth`);
  assert.equal(start.status, 302, start.text);
  assert.equal(start.location!.searchParams.get('redirect_uri'), `${integrationEndpoint}/oauth`);
  // ...the provider sends the browser back to the integration-wide redirect URL...
  const fromProvider = await visit(start.location!.href);
  assert.equal(fromProvider.status, 302, fromProvider.text);
  assert.equal(`${fromProvider.location!.origin}${fromProvider.location!.pathname}`, `${integrationEndpoint}/oauth`);
  const done = await visit(fromProvider.location!.href);
  assert.equal(done.status, 200, done.text);
  // ...and the credentials land in the installation the state was issued to.
  const stored = (await s.api('GET', `/api/v1/installations/${id}?reveal=true`)).body.installation.configuration.oauth_credentials;
  assert.equal(stored.access_token, provider.tokenCalls.at(-1)!.answer.body.access_token);
  assert.equal(provider.tokenCalls.at(-1)!.body.redirect_uri, `${integrationEndpoint}/oauth`);
  const whoami = await (await fetch(`${endpoint}/whoami`)).json();
  assert.deepEqual(whoami, { installation: id, connected: true });

  // A used state names no installation any more: the same callback is refused, nothing changes.
  const replay = await visit(fromProvider.location!.href);
  assert.equal(replay.status, 400);
  assert.match(replay.text, /already used/);
  // A forged state is not trusted either.
  const forged = await visit(`${integrationEndpoint}/oauth?code=x&state=${encodeURIComponent(JSON.stringify({ installationId: id }))}`);
  assert.equal(forged.status, 400);
});

test('components: object and (props, renderContext, context) initialState, setCache as Cache-Control, dynamicState, a completing action', async (t) => {
  process.env.GB_CONNECT_CLIENT_ID = 'gb-client';
  process.env.GB_CONNECT_CLIENT_SECRET = 'gb-secret-5f2a9c';
  process.env.GB_CONNECT_PROVIDER_URL = 'https://provider.example';
  const s = await startTestServer(t, { integrations_dir: gitbookFolder(t), sandbox: RELAXED_SANDBOX });
  const id = (await s.api('POST', '/api/v1/installations', { integration: 'gb-connect' })).body.installation.id;
  const render = (body: unknown) => s.api('POST', `/api/v1/installations/${id}/render`, body);

  const first = await render({ componentId: 'counter' });
  assert.equal(first.status, 200, JSON.stringify(first.body));
  assert.equal(first.headers.get('cache-control'), 'max-age=120');
  assert.deepEqual(first.body.state, { count: 0, label: 'presses' });
  assert.deepEqual(first.body.element.children[1], { type: 'textinput', state: 'label', initialValue: { $state: 'label' } });

  const pressed = await render({ componentId: 'counter', state: first.body.state, action: { action: 'increment' } });
  assert.deepEqual(pressed.body.state, { count: 1, label: 'presses' });
  assert.equal(pressed.body.element.children[0].children[0], '1 presses');
  // The object initialState is a copy: a later first render starts from 0 again.
  assert.deepEqual((await render({ componentId: 'counter' })).body.state, { count: 0, label: 'presses' });

  const complete = await render({ componentId: 'counter', state: { count: 7, label: 'x' }, action: { action: 'done' } });
  assert.deepEqual(complete.body, { type: 'complete', returnValue: { count: 7 } });

  const greeting = await render({ componentId: 'greeting', props: { name: 'Ada' }, context: { type: 'space' } });
  assert.equal(greeting.body.state.greeting, 'hello Ada in space of gb-connect');
  // A render that names no context is a block's in a document, as GitBook renders blocks.
  const unnamed = await render({ componentId: 'greeting', props: { name: 'Ada' } });
  assert.equal(unnamed.body.state.greeting, 'hello Ada in document of gb-connect');
});

/** The invocations an event type caused, as [installation id, logs] pairs. */
async function invocationsOf(s: TestServer, type: string): Promise<Array<[string, string]>> {
  // A read of the log API first: it flushes the records still waiting for their group commit.
  assert.equal((await s.api('GET', '/api/v1/logs')).status, 200);
  const rows = await sql.all<{ installation_id: string; logs: string }>(
    s.services.store,
    'SELECT installation_id, logs FROM invocations WHERE event_type = ? ORDER BY created_at',
    [type],
  );
  return rows.map((row) => [row.installation_id, row.logs]);
}

test('space and site installations: a configuration of their own per space, and events routed by spaceId / siteId to the matching installation only', async (t) => {
  const s = await startTestServer(t, { integrations_dir: gitbookFolder(t), sandbox: RELAXED_SANDBOX });
  const a = await s.api('POST', '/api/v1/installations', { integration: 'gb-spaces', space: 'space_a', configuration: { channel: '#a' } });
  const b = await s.api('POST', '/api/v1/installations', { integration: 'gb-spaces', space: 'space_b', configuration: { channel: '#b' } });
  assert.equal(a.status, 201, JSON.stringify(a.body));
  assert.equal(b.status, 201, JSON.stringify(b.body));
  const wrong = await s.api('POST', '/api/v1/installations', { integration: 'gb-spaces', space: 'space_c', configuration: { webhook: 'x' } });
  assert.equal(wrong.status, 400);
  assert.match(JSON.stringify(wrong.body), /is not a property of this integration.*properties: channel/);

  const sent = await s.api('POST', '/api/v1/events', samplePayload('space_content_updated', { spaceId: 'space_b' }));
  assert.ok(sent.status < 300, JSON.stringify(sent.body));
  const ran = await waitForRows(() => invocationsOf(s, 'space_content_updated'));
  assert.deepEqual(
    ran.map(([id]) => id),
    [b.body.installation.id],
  );
  assert.match(ran[0][1], /\[gb-spaces\] space space_b changed: announce in #b/);

  const siteA = await s.api('POST', '/api/v1/installations', {
    integration: 'GB-Analytics',
    site: 'site_a',
    configuration: { collector_url: 'https://c.example/a' },
  });
  const siteB = await s.api('POST', '/api/v1/installations', {
    integration: 'GB-Analytics',
    site: 'site_b',
    configuration: { collector_url: 'https://c.example/b' },
  });
  assert.equal(siteB.status, 201, JSON.stringify(siteB.body));
  await s.api('POST', '/api/v1/events', samplePayload('site_view', { siteId: 'site_a' }));
  const views = await waitForRows(() => invocationsOf(s, 'site_view'));
  assert.deepEqual(
    views.map(([id]) => id),
    [siteA.body.installation.id],
  );
  assert.match(views[0][1], /view of site_a for https:\/\/c\.example\/a/);
});

async function waitForRows<T>(fn: () => Promise<T[]>): Promise<T[]> {
  for (let i = 0; i < 500; i++) {
    const rows = await fn();
    if (rows.length) return rows;
    await new Promise((r) => setTimeout(r, 10));
  }
  return fn();
}

test("context.api as GitBook's client: installation endpoints served here, content endpoints 501 until an upstream is configured, then forwarded", async (t) => {
  const seen: Array<{ url: string; auth: string | undefined }> = [];
  const upstream = createServer((req, res) => {
    seen.push({ url: req.url ?? '', auth: req.headers.authorization });
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ id: req.url?.split('/').pop(), title: 'Upstream space' }));
  });
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
  t.after(() => upstream.close());
  const dir = gitbookFolder(t);

  const s = await startTestServer(t, { integrations_dir: dir, sandbox: RELAXED_SANDBOX });
  const a = await s.api('POST', '/api/v1/installations', { integration: 'gb-spaces', space: 'space_a', configuration: { channel: '#a' } });
  const endpoint = a.body.installation.urls.publicEndpoint;
  const renamed = (await (await fetch(`${endpoint}/rename?to=%23news`)).json()) as any;
  assert.equal(renamed.updated.space, 'space_a');
  assert.deepEqual(renamed.updated.configuration, { channel: '#news' });
  assert.equal(renamed.read.id, a.body.installation.id);
  assert.deepEqual(renamed.listed, [a.body.installation.id]);
  assert.equal((await s.api('GET', `/api/v1/installations/${a.body.installation.id}`)).body.installation.configuration.channel, '#news');

  const noUpstream = await fetch(`${endpoint}/space`);
  assert.equal(noUpstream.status, 502);
  const refused = (await noUpstream.json()) as any;
  assert.equal(refused.code, 501);
  assert.match(refused.message, /GET \/spaces\/space_a reads GitBook content, which this server does not hold/);
  assert.match(refused.message, /gitbook\.api_url/);

  const unknown = (await (await fetch(`${endpoint}/unknown`)).json()) as any;
  assert.match(unknown.message, /api\.spaces\.listSpaceThings\(\) is not available here; available: getSpaceById/);

  const s2 = await startTestServer(t, {
    integrations_dir: dir,
    sandbox: RELAXED_SANDBOX,
    gitbook: { api_url: `http://127.0.0.1:${(upstream.address() as { port: number }).port}`, api_token: 'gb_api_token_1' },
  } as never);
  const a2 = await s2.api('POST', '/api/v1/installations', { integration: 'gb-spaces', space: 'space_z', configuration: { channel: '#z' } });
  const forwarded = await fetch(`${a2.body.installation.urls.publicEndpoint}/space`);
  assert.equal(forwarded.status, 200, await forwarded.clone().text());
  assert.deepEqual(await forwarded.json(), { space: { id: 'space_z', title: 'Upstream space' } });
  assert.deepEqual(seen, [{ url: '/v1/spaces/space_z', auth: 'Bearer gb_api_token_1' }]);
});

test('the importable runtime module exports every name the runtime library exports (one list, RUNTIME_EXPORTS)', async () => {
  const { readFileSync } = await import('node:fs');
  const { RUNTIME_EXPORTS } = await import('../src/sandbox/guest/runtime/names.ts');
  const index = readFileSync(join(ROOT, 'src/sandbox/guest/runtime/index.ts'), 'utf8');
  const exported = new Set<string>();
  for (const m of index.matchAll(/export \{([^}]*)\}/g))
    for (const part of m[1].split(',')) {
      const name = part
        .trim()
        .split(/\s+as\s+/)
        .pop()!
        .trim();
      if (name) exported.add(name);
    }
  for (const jsx of ['jsx', 'jsxs', 'jsxDEV', 'Fragment']) exported.delete(jsx);
  assert.deepEqual([...RUNTIME_EXPORTS].sort(), [...exported].sort());
});

test("integration-wide token: at the integration endpoint context.api lists and updates the integration's own installations, mints installation clients, and reaches nothing else", async (t) => {
  const s = await startTestServer(t, { integrations_dir: gitbookFolder(t), sandbox: RELAXED_SANDBOX });
  const install = async (externalIds: string[]) => {
    const r = await s.api('POST', '/api/v1/installations', { integration: 'gb-team', externalIds });
    assert.equal(r.status, 201, JSON.stringify(r.body));
    return r.body.installation as { id: string; urls: { publicEndpoint: string } };
  };
  const red = await install(['team:red']);
  const blue = await install(['team:blue']);
  const alsoRed = await install(['team:red', 'team:green']);
  const foreign = (await s.api('POST', '/api/v1/installations', { integration: 'gb-spaces', space: 'space_f', configuration: { channel: '#f' } })).body
    .installation;
  const endpoint = `${s.url}/v1/integrations/gb-team/integration`;
  const post = (path: string, body: unknown) =>
    fetch(`${endpoint}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

  // A provider's event for team red reaches both red installations, and only them.
  const routed = await post('/hooks/team', { team: 'team:red', event: 'deploy' });
  assert.equal(routed.status, 200, await routed.clone().text());
  const answer = (await routed.json()) as { installation: string | null; updated: string[] };
  assert.equal(answer.installation, null, 'the integration endpoint runs with no installation');
  assert.deepEqual(answer.updated.sort(), [red.id, alsoRed.id].sort());
  const configured = async (id: string) => (await s.api('GET', `/api/v1/installations/${id}`)).body.installation.configuration;
  assert.equal((await configured(red.id)).last_event, 'deploy');
  assert.equal((await configured(alsoRed.id)).last_event, 'deploy');
  assert.equal((await configured(blue.id)).last_event, undefined);
  assert.equal(((await post('/hooks/team', { team: 'team:none', event: 'x' }).then((r) => r.json())) as any).updated.length, 0);
  // GitBook's update replaces an organization installation's configuration: keys left out go.
  const replaced = await s.api('PATCH', `/api/v1/integrations/gb-team/installations/${alsoRed.id}`, { configuration: {} });
  assert.equal(replaced.status, 200, JSON.stringify(replaced.body));
  assert.equal((await configured(alsoRed.id)).last_event, undefined);

  // An installation client minted with the integration's token acts as that installation only.
  const as = (await (await fetch(`${endpoint}/as?id=${red.id}&other=${blue.id}`)).json()) as any;
  assert.deepEqual(as, { itself: red.id, other: 403 });

  // The integration's token stops at its own integration's installations.
  const probe = (await (await fetch(`${endpoint}/probe?foreign=gb-spaces&foreignId=${foreign.id}&id=${red.id}`)).json()) as any;
  assert.deepEqual(probe, { foreignList: 403, foreignOne: 403, events: 403, render: 403 });

  // GitBook's client built by the code itself works with the token it was given, not with another.
  const client = (await (await fetch(`${endpoint}/client`)).json()) as any;
  assert.equal(client.own.status, 200, JSON.stringify(client.own));
  assert.deepEqual(client.own.body.items.map((i: { id: string }) => i.id).sort(), [red.id, blue.id, alsoRed.id].sort());
  assert.equal(client.forged.status, 0);
  assert.match(client.forged.error, /is this server; integrations reach its API only through context\.api/);

  // Inside an installation, context.api is the installation and context.integration.api the integration.
  const both = (await (await fetch(`${blue.urls.publicEndpoint}/both`)).json()) as any;
  assert.deepEqual(both.installation, [blue.id]);
  assert.deepEqual(both.integration.sort(), [red.id, blue.id, alsoRed.id].sort());

  // The token itself, from outside: short-lived, never reaching the admin surface or another integration.
  const token = capabilityOf(s.services, 'installations').integrationToken('gb-team', 60_000);
  assert.equal((await s.api('GET', '/api/v1/integrations/gb-team/installations', undefined, token)).status, 200);
  assert.equal((await s.api('GET', '/api/v1/installations', undefined, token)).body.installations.length, 3);
  assert.equal((await s.api('GET', `/api/v1/installations/${foreign.id}`, undefined, token)).status, 403);
  assert.equal((await s.api('POST', '/api/v1/installations', { integration: 'gb-team' }, token)).status, 403);
  assert.equal((await s.api('DELETE', `/api/v1/installations/${red.id}`, undefined, token)).status, 403);
  assert.equal((await s.api('POST', '/api/v1/oauth/state', {}, token)).status, 403);
  const envelope = await fetch(`${s.url}/v1/integrations/gb-team`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}` },
    body: encodeEnvelope({ event: { type: 'fetch' }, environment: {} }),
  });
  assert.equal(envelope.status, 403);
  // Its signature under the invocation-token prefix is checked with that kind's key: refused.
  assert.equal((await s.api('GET', '/api/v1/installations', undefined, token.replace('sy_int_', 'sy_inv_'))).status, 401);
  const minted = await s.api('POST', `/api/v1/integrations/gb-team/installations/${blue.id}/tokens`, undefined, token);
  assert.equal(minted.status, 200);
  assert.equal((await s.api('GET', `/api/v1/installations/${blue.id}`, undefined, minted.body.token)).status, 200);
  assert.equal((await s.api('GET', `/api/v1/installations/${red.id}`, undefined, minted.body.token)).status, 403);
  assert.equal((await s.api('POST', `/api/v1/integrations/gb-spaces/installations/${foreign.id}/tokens`, undefined, token)).status, 403);
  // An installation's own token cannot mint tokens for its siblings.
  assert.equal((await s.api('POST', `/api/v1/integrations/gb-team/installations/${red.id}/tokens`, undefined, minted.body.token)).status, 403);
  // What the code printed keeps no token.
  const logs = await sql.all<{ logs: string }>(s.services.store, "SELECT logs FROM invocations WHERE integration = 'gb-team'");
  assert.ok(logs.some((l) => l.logs.includes('routed to 2 installation(s)')));
  assert.ok(!logs.some((l) => /sy_int_[A-Za-z0-9]/.test(l.logs)));
});

test('integration-wide token: signed for one integration until it expires, under a key of its own', async () => {
  const { mintIntegrationToken, readIntegrationToken } = await import('../src/installations/tokens.ts');
  const { randomBytes } = await import('node:crypto');
  const key = randomBytes(32);
  const now = Date.parse('2026-11-25T10:00:00Z');
  const token = mintIntegrationToken(key, 'gb-team', 60_000, now);
  assert.match(token, /^sy_int_/);
  assert.equal(readIntegrationToken(key, token, now + 59_000), 'gb-team');
  assert.equal(readIntegrationToken(key, token, now + 61_000), undefined, 'expired');
  assert.equal(readIntegrationToken(randomBytes(32), token, now), undefined, 'another key');
  const [payload, mac] = token.slice('sy_int_'.length).split('.');
  const renamed = `sy_int_${Buffer.from(Buffer.from(payload, 'base64url').toString().replace('gb-team', 'gb-spaces')).toString('base64url')}.${mac}`;
  assert.equal(readIntegrationToken(key, renamed, now), undefined, 'another integration under the same signature');
});

test('OAuth as the catalogue writes it: authorizeURL and accessTokenURL as functions of the installation, an integration-wide redirect, externalIds from extractCredentials, getOAuthToken renewing, against a real OAuth server', async (t) => {
  const provider = await startProvider(t);
  process.env.GB_PROVIDER_CLIENT_ID = 'gb-provider-client';
  process.env.GB_PROVIDER_CLIENT_SECRET = 'gb-provider-secret-8e1d';
  const s = await startTestServer(t, { integrations_dir: gitbookFolder(t), sandbox: RELAXED_SANDBOX });
  const installed = await s.api('POST', '/api/v1/installations', { integration: 'gb-provider', configuration: { provider_url: provider.url } });
  assert.equal(installed.status, 201, JSON.stringify(installed.body));
  const id: string = installed.body.installation.id;
  const endpoint: string = installed.body.installation.urls.publicEndpoint;
  const integrationEndpoint = `${s.url}/v1/integrations/gb-provider/integration`;

  // The authorize URL the function built from this installation, with its own query kept.
  const start = await visit(`${endpoint}/oauth`);
  assert.equal(start.status, 302, start.text);
  const authorize = start.location!;
  assert.equal(`${authorize.origin}${authorize.pathname}`, `${provider.url}/authorize`);
  assert.equal(authorize.searchParams.get('audience'), 'gb-provider');
  assert.equal(authorize.searchParams.get('client_id'), 'gb-provider-client');
  assert.equal(authorize.searchParams.get('response_type'), 'code');
  assert.equal(authorize.searchParams.get('scope'), 'openid profile');
  assert.equal(authorize.searchParams.get('redirect_uri'), `${integrationEndpoint}/oauth`);

  // The provider logs in and sends the browser to the integration-wide redirect URL...
  const fromProvider = await visit(authorize.href);
  assert.equal(fromProvider.status, 302, fromProvider.text);
  assert.equal(provider.authorizeCalls.at(-1)!.get('audience'), 'gb-provider');
  const done = await visit(fromProvider.location!.href);
  assert.equal(done.status, 200, done.text);
  assert.match(done.text, /Connected/);

  // ...where the code was exchanged at the token URL the function built, and the credentials,
  // the externalIds and the earlier configuration are all on the installation.
  const exchange = provider.tokenCalls.at(-1)!;
  assert.equal(exchange.body.grant_type, 'authorization_code');
  assert.equal(exchange.body.redirect_uri, `${integrationEndpoint}/oauth`);
  assert.ok(exchange.body.code_verifier, 'PKCE verifier sent');
  const stored = (await s.api('GET', `/api/v1/installations/${id}?reveal=true`)).body.installation;
  assert.equal(stored.configuration.oauth_credentials.access_token, exchange.answer.body.access_token);
  assert.equal(stored.configuration.provider_url, provider.url, 'merged, not replaced');
  assert.deepEqual(stored.externalIds, ['account:johndoe']);
  assert.equal(stored.configuration.account_region, 'eu-1', 'a key the code keeps without declaring it');
  // A person setting an undeclared key still gets it refused.
  const typo = await s.api('PATCH', `/api/v1/installations/${id}`, { configuration: { provider_ur: 'x' } });
  assert.equal(typo.status, 400);
  assert.deepEqual(
    typo.body.error.problems.map((p: { message: string }) => p.message),
    ['"provider_ur" is not a property of this integration'],
  );
  // ...while what the code kept stays through a person's edit of another key.
  assert.equal((await s.api('PATCH', `/api/v1/installations/${id}`, { configuration: { provider_url: provider.url } })).status, 200);
  assert.equal(stored.status, 'active');

  // getOAuthToken with the function token URL: no renewal while fresh, one refresh_token grant when about to expire.
  const calls = provider.tokenCalls.length;
  const fresh = (await (await fetch(`${endpoint}/token`)).json()) as any;
  assert.deepEqual(fresh, { token: exchange.answer.body.access_token, expiresAt: stored.configuration.oauth_credentials.expires_at });
  assert.equal(provider.tokenCalls.length, calls, 'no renewal while the token is fresh');
  const creds = { ...stored.configuration.oauth_credentials, refresh_token: 'catalogue-refresh-1', expires_at: Date.now() + 2_000 };
  assert.equal((await s.api('PATCH', `/api/v1/installations/${id}`, { configuration: { oauth_credentials: creds } })).status, 200);
  const renewed = (await (await fetch(`${endpoint}/token`)).json()) as any;
  assert.equal(provider.tokenCalls.length, calls + 1, 'one renewal');
  const refresh = provider.tokenCalls.at(-1)!;
  assert.equal(refresh.body.grant_type, 'refresh_token');
  assert.equal(refresh.body.refresh_token, 'catalogue-refresh-1');
  assert.equal(renewed.token, refresh.answer.body.access_token);
  assert.ok(renewed.expiresAt > creds.expires_at + 60_000, 'the renewed credentials are in force');
  const after = (await s.api('GET', `/api/v1/installations/${id}?reveal=true`)).body.installation.configuration.oauth_credentials;
  assert.equal(after.access_token, refresh.answer.body.access_token);

  // A function URL that does not give an http(s) URL stops the start with a page saying so.
  assert.equal((await s.api('PATCH', `/api/v1/installations/${id}`, { configuration: { provider_url: 'ftp://nowhere' } })).status, 200);
  const bad = await visit(`${endpoint}/oauth`);
  assert.equal(bad.status, 500);
  assert.match(bad.text, /`authorizeURL` must be an absolute http\(s\) URL, got &quot;ftp:\/\/nowhere\/authorize\?audience=gb-provider&quot;/);
  // The client secret reached no log.
  const logs = (await sql.all<{ logs: string }>(s.services.store, "SELECT logs FROM invocations WHERE integration = 'gb-provider'"))
    .map((l) => l.logs)
    .join('\n');
  assert.ok(!logs.includes('gb-provider-secret-8e1d'));
});

test("a settings screen drawn by a component: the site installation stores what the component decides, named GitBook's way, and site_installation_setup follows", async (t) => {
  const s = await startTestServer(t, { integrations_dir: gitbookFolder(t), sandbox: RELAXED_SANDBOX, gitbook: { organization: 'org_catalogue' } } as never);
  const installed = await s.api('POST', '/api/v1/installations', { integration: 'gb-settings', site: 'site_docs' });
  assert.equal(installed.status, 201, JSON.stringify(installed.body));
  const id: string = installed.body.installation.id;
  const setupLogs = async (n: number) =>
    waitForRows(async () => {
      const rows = await invocationsOf(s, 'site_installation_setup');
      return rows.length >= n ? rows : [];
    });
  const first = await setupLogs(1);
  assert.match(first[0][1], /\[gb-settings\] site site_docs set up \(active\): theme unset/);

  // Set before the screen is saved: a site installation holds the account's keys and its own in
  // one configuration here, so GitBook's site-level update merges instead of erasing them.
  assert.equal((await s.api('PATCH', `/api/v1/installations/${id}`, { configuration: { legacy: 'kept' } })).status, 200);
  const render = (body: unknown) => s.api('POST', `/api/v1/installations/${id}/render`, body);
  const context = { type: 'configuration_site', siteId: 'site_docs', theme: 'light' };
  const shown = await render({ componentId: 'settings', props: { siteInstallation: { configuration: {} } }, context });
  assert.equal(shown.status, 200, JSON.stringify(shown.body));
  assert.equal(shown.body.element.children[0].children[0], 'Theme for site_docs: see https://docs.example.com/gb-settings');
  const saved = await render({ componentId: 'settings', props: {}, state: { theme: 'dark' }, context, action: { action: 'save' } });
  assert.deepEqual(saved.body, { type: 'complete' });

  const configuration = (await s.api('GET', `/api/v1/installations/${id}`)).body.installation.configuration;
  assert.equal(configuration.theme, 'dark');
  assert.equal(configuration.savedBy, 'org_catalogue/site_docs');
  assert.match(configuration.signature, /^[0-9a-f]{64}$/);
  assert.equal(configuration.legacy, 'kept');
  const setups = await setupLogs(3);
  assert.ok(
    setups.some(([, logs]) => /\[gb-settings\] site site_docs set up \(active\): theme dark/.test(logs)),
    JSON.stringify(setups),
  );

  // Keys no manifest declares are the component's; keys that reach prototypes are refused all the same.
  const proto = await s.api('PATCH', `/api/v1/installations/${id}`, { configuration: JSON.parse('{"__proto__": {"x": 1}}') });
  assert.equal(proto.status, 400, JSON.stringify(proto.body));
  // The signing secret is stable for the integration and stays out of logs.
  const again = await render({ componentId: 'settings', props: {}, state: { theme: 'dark' }, context, action: { action: 'save' } });
  assert.deepEqual(again.body, { type: 'complete' });
  assert.equal((await s.api('GET', `/api/v1/installations/${id}`)).body.installation.configuration.signature, configuration.signature);
});

test("check: secrets declared only under GitBook's envs are named, with the line that would supply them", async (t) => {
  const dir = gitbookFolder(t);
  const { appendFileSync } = await import('node:fs');
  appendFileSync(
    join(dir, 'gb-spaces/gitbook-manifest.yaml'),
    'envs:\n    production:\n        secrets:\n            API_KEY: ${{ "op://vault/gb-spaces/API_KEY" }}\n',
  );
  const r = await runCli(['check', join(dir, 'gb-spaces'), '--json'], { cwd: roomyCwd(t) });
  const j = JSON.parse(r.stdout);
  assert.equal(r.code, 0, JSON.stringify(j.errors));
  const envs = j.warnings.find((w: any) => w.message.startsWith('envs:'));
  assert.match(envs.message, /API_KEY is declared only there, so environment\.secrets will not have it/);
  assert.equal(envs.hint, 'add it under secrets, e.g. API_KEY: ${{ env.GB_SPACES_API_KEY }}');
});
