/**
 * The shipped example integrations, run for real: loaded from integrations/ by the registry,
 * installed, and called through their public endpoints and the component render API (real
 * sandbox, real HTTP).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { cpSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { installationsModule } from '../src/installations/index.ts';
import { oauthModule } from '../src/oauth/index.ts';
import { registryModule } from '../src/registry/index.ts';
import { runtimeModule } from '../src/runtime/index.ts';
import { sandboxModule } from '../src/sandbox/index.ts';
import { ROOT, startTestServer, tmpDir } from './helpers/index.ts';

/** These tests are about the examples, not the limits: room for a first isolate on a busy machine. */
const roomy = { cpu_time: 5_000, startup_time: 15_000, wall_time: 60_000 };

test('hello-components: public endpoint (spec 4.2), the /channels option list and the counter block', async (t) => {
  const dir = tmpDir(t);
  cpSync(join(ROOT, 'integrations/hello-components'), join(dir, 'hello-components'), { recursive: true });
  const s = await startTestServer(
    t,
    { integrations_dir: dir, sandbox: roomy },
    { modules: [sandboxModule, registryModule, installationsModule, runtimeModule] },
  );

  const installed = await s.api('POST', '/api/v1/installations', { integration: 'hello-components', configuration: { greeting: 'Howdy' } });
  assert.equal(installed.status, 201, JSON.stringify(installed.body));
  const { id, urls } = installed.body.installation;
  assert.equal(installed.body.installation.status, 'active');

  const post = await fetch(urls.publicEndpoint, { method: 'POST', body: 'anything' });
  assert.equal(post.status, 200);
  assert.match(post.headers.get('content-type') ?? '', /^application\/json/);
  assert.deepEqual(await post.json(), { received: true });

  for (const method of ['GET', 'PUT', 'DELETE']) {
    const r = await fetch(urls.publicEndpoint, { method });
    assert.equal(r.status, 405, method);
    assert.equal(await r.text(), 'Method not allowed');
  }

  const channels = await fetch(`${urls.publicEndpoint}/channels`);
  assert.equal(channels.status, 200);
  assert.deepEqual(
    ((await channels.json()) as Array<{ value: string }>).map((c) => c.value),
    ['general', 'releases', 'random'],
  );

  const first = await s.api('POST', `/api/v1/installations/${id}/render`, { componentId: 'counter', props: { start: 2 } });
  assert.equal(first.status, 200, JSON.stringify(first.body));
  assert.deepEqual(first.body.state, { count: 2 });
  assert.equal(first.body.element.type, 'block');
  const [text, press] = first.body.element.children;
  assert.deepEqual(text, { type: 'text', children: ['Howdy', '! Pressed ', 2, ' ', 'times', '.'] });
  assert.deepEqual(press, { type: 'button', label: 'Press me', style: 'primary', onPress: { action: 'increment' } });

  const pressed = await s.api('POST', `/api/v1/installations/${id}/render`, {
    componentId: 'counter',
    props: { start: 2 },
    state: first.body.state,
    action: { action: 'increment' },
  });
  assert.deepEqual(pressed.body.state, { count: 3 });
  const reset = await s.api('POST', `/api/v1/installations/${id}/render`, {
    componentId: 'counter',
    props: {},
    state: { count: 3 },
    action: { action: 'reset' },
  });
  assert.deepEqual(reset.body.state, { count: 0 });
  const unknown = await s.api('POST', `/api/v1/installations/${id}/render`, {
    componentId: 'counter',
    props: {},
    state: { count: 5 },
    action: { action: 'nothing' },
  });
  assert.deepEqual(unknown.body.state, { count: 5 }, 'an empty object changes nothing');
});

test('oauth-example: Connect runs the OAuth 2 flow against a real provider and /me calls its API with the token', async (t) => {
  const { OAuth2Server } = await import('oauth2-mock-server');
  const provider = new OAuth2Server();
  await provider.issuer.keys.generate('RS256');
  await provider.start(0, '127.0.0.1');
  t.after(() => provider.stop());
  const providerUrl = provider.issuer.url!;

  const dir = tmpDir(t);
  cpSync(join(ROOT, 'integrations/oauth-example'), join(dir, 'oauth-example'), { recursive: true });
  writeFileSync(
    join(dir, 'oauth-example/.env'),
    `OAUTH_EXAMPLE_CLIENT_ID=example-client\nOAUTH_EXAMPLE_CLIENT_SECRET=example-secret\nOAUTH_EXAMPLE_PROVIDER_URL=${providerUrl}\n`,
  );
  const s = await startTestServer(
    t,
    { integrations_dir: dir, sandbox: roomy },
    { modules: [sandboxModule, registryModule, installationsModule, oauthModule, runtimeModule] },
  );

  const installed = await s.api('POST', '/api/v1/installations', { integration: 'oauth-example' });
  assert.equal(installed.status, 201, JSON.stringify(installed.body));
  const { id, urls } = installed.body.installation;
  assert.equal(installed.body.installation.status, 'pending', 'the Connect button (required) is not pressed yet');
  assert.deepEqual(installed.body.installation.connect, [{ property: 'oauth_credentials', label: 'Connect', url: `${urls.publicEndpoint}/oauth` }]);

  const notYet = await fetch(`${urls.publicEndpoint}/me`);
  assert.equal(notYet.status, 409);

  // Connect: our /oauth redirects to the provider, which redirects back with a code.
  const start = await fetch(`${urls.publicEndpoint}/oauth`, { redirect: 'manual' });
  assert.equal(start.status, 302);
  const authorize = new URL(start.headers.get('location')!);
  assert.equal(`${authorize.origin}${authorize.pathname}`, `${providerUrl}/authorize`);
  assert.equal(authorize.searchParams.get('client_id'), 'example-client');
  assert.equal(authorize.searchParams.get('redirect_uri'), `${urls.publicEndpoint}/oauth`);
  const back = await fetch(authorize, { redirect: 'manual' });
  const callback = new URL(back.headers.get('location')!);
  assert.ok(callback.searchParams.get('code'));
  const done = await fetch(callback);
  assert.equal(done.status, 200, await done.clone().text());
  assert.match(await done.text(), /Connected/);

  const after = await s.api('GET', `/api/v1/installations/${id}?reveal=true`);
  assert.equal(after.body.installation.status, 'active', 'active once connected: oauth_credentials is its required button');
  const token = after.body.installation.configuration.oauth_credentials.access_token;
  assert.equal(typeof token, 'string');

  const me = await fetch(`${urls.publicEndpoint}/me`);
  assert.equal(me.status, 200);
  assert.ok(((await me.json()) as { sub?: string }).sub, 'the provider answered its userinfo to the stored token');
});
