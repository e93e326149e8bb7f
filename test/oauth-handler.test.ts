/**
 * createOAuthHandler() options and contracts, through a fixture integration (one configuration per
 * path) in the real sandbox, against oauth2-mock-server on 127.0.0.1: scopes and prompt, a static
 * redirectURL, authorizeURL query kept, an extractCredentials that ignores `ok`, a wrong return
 * shape, a custom OAuthError, the refreshCredentials named export and config validation.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { Events } from 'oauth2-mock-server';
import { ROOT, startTestServer, sql } from './helpers/index.ts';
import { RELAXED_SANDBOX, startProvider, visit } from './oauth-support.ts';

const CLIENT_SECRET = 'fixture-secret-77c1d0';

test('createOAuthHandler options and failure contracts', async (t) => {
  const provider = await startProvider(t);
  process.env.OAUTH_FIXTURE_CLIENT_ID = 'fixture-client';
  process.env.OAUTH_FIXTURE_CLIENT_SECRET = CLIENT_SECRET;
  process.env.OAUTH_FIXTURE_PROVIDER_URL = provider.url;
  const s = await startTestServer(t, { integrations_dir: join(ROOT, 'test/fixtures/oauth'), sandbox: RELAXED_SANDBOX });
  const installed = await s.api('POST', '/api/v1/installations', { integration: 'oauth-fixture' });
  assert.equal(installed.status, 201, JSON.stringify(installed.body));
  const id: string = installed.body.installation.id;
  const endpoint: string = installed.body.installation.urls.publicEndpoint;
  const credentials = async () => (await s.api('GET', `/api/v1/installations/${id}?reveal=true`)).body.installation.configuration.oauth_credentials;

  /** Start at `path`, let the provider answer, come back to `back` (default: the same path) with its query. */
  async function connect(path: string, back = path) {
    const start = await visit(`${endpoint}${path}`);
    assert.equal(start.status, 302, start.text);
    const fromProvider = await visit(start.location!.href);
    assert.equal(fromProvider.status, 302, fromProvider.text);
    const callback = new URL(`${endpoint}${back}`);
    callback.search = fromProvider.location!.search;
    return { authorize: start.location!, redirectedTo: fromProvider.location!, done: await visit(callback.href) };
  }

  await t.test('scopes are space-joined, prompt is sent, the authorizeURL query is kept', async (t) => {
    const { authorize, done } = await connect('/oauth');
    assert.equal(authorize.searchParams.get('scope'), 'read write:all');
    assert.equal(authorize.searchParams.get('prompt'), 'consent');
    assert.equal(authorize.searchParams.get('audience'), 'fixture');
    assert.equal(authorize.searchParams.get('redirect_uri'), `${endpoint}/oauth`);
    assert.equal(done.status, 200, done.text);
    assert.equal((await credentials()).access_token, provider.tokenCalls.at(-1)!.answer.body.access_token);
  });

  await t.test('a static redirectURL is used for the authorization and for the exchange', async (t) => {
    const { authorize, redirectedTo, done } = await connect('/static');
    assert.equal(authorize.searchParams.get('redirect_uri'), 'https://app.example.test/oauth/callback');
    assert.equal(`${redirectedTo.origin}${redirectedTo.pathname}`, 'https://app.example.test/oauth/callback');
    assert.equal(done.status, 200, done.text);
    assert.equal(provider.tokenCalls.at(-1)!.body.redirect_uri, 'https://app.example.test/oauth/callback');
  });

  await t.test('pkce: false sends neither a code_challenge nor a code_verifier', async (t) => {
    const { authorize, done } = await connect('/no-pkce');
    assert.equal(authorize.searchParams.get('code_challenge'), null);
    assert.equal(authorize.searchParams.get('code_challenge_method'), null);
    assert.equal(done.status, 200, done.text);
    assert.equal(provider.tokenCalls.at(-1)!.body.code_verifier, undefined);
  });

  await t.test('ok: false is refused even when extractCredentials ignores it', async (t) => {
    const before = await credentials();
    provider.once(t, Events.BeforeResponse, (res: { body: any }) => {
      res.body = { ok: false, error: 'account_inactive' };
    });
    const { done } = await connect('/lenient');
    assert.equal(done.status, 502);
    assert.match(done.text, /token exchange failed: account_inactive/);
    assert.deepEqual(await credentials(), before, 'nothing stored');
  });

  await t.test('extractCredentials must return { configuration }; its own OAuthError is shown', async (t) => {
    const before = await credentials();
    const bad = await connect('/badshape');
    assert.equal(bad.done.status, 502);
    assert.match(bad.done.text, /extractCredentials\(\) must return \{ configuration: \{ oauth_credentials/);
    provider.once(t, Events.BeforeResponse, (res: { body: any }) => {
      res.body = { ...res.body, team: 'Acme <b>' };
    });
    const custom = await connect('/custom-error');
    assert.equal(custom.done.status, 502);
    assert.match(custom.done.text, /the team &quot;Acme &lt;b&gt;&quot; is not allowed/);
    assert.deepEqual(await credentials(), before);
  });

  await t.test('refreshCredentials (named export): not yet due, forced, then a refused refresh as an OAuthError', async (t) => {
    const before = await credentials();
    const calls = provider.tokenCalls.length;
    const notDue = await fetch(`${endpoint}/refresh`);
    assert.deepEqual(await notDue.json(), { expires_at: before.expires_at, same: true });
    assert.equal(provider.tokenCalls.length, calls, 'a token valid for an hour is not renewed');
    const due = await fetch(`${endpoint}/refresh?within=7200`);
    assert.equal(due.status, 200);
    assert.equal(provider.tokenCalls.length, calls + 1, 'renewed when it expires within the margin');
    assert.equal(provider.tokenCalls.at(-1)!.body.grant_type, 'refresh_token');
    assert.equal(provider.tokenCalls.at(-1)!.body.refresh_token, before.refresh_token);
    const renewed = await credentials();
    assert.notEqual(renewed.refresh_token, before.refresh_token);

    provider.once(t, Events.BeforeResponse, (res: { statusCode: number; body: any }) => {
      res.statusCode = 401;
      res.body = { error: 'invalid_client', echoed: CLIENT_SECRET };
    });
    const refused = await fetch(`${endpoint}/refresh?force`);
    assert.equal(refused.status, 502);
    const body = (await refused.json()) as { name: string; isOAuthError: boolean; message: string };
    assert.equal(body.name, 'OAuthError');
    assert.equal(body.isOAuthError, true);
    assert.match(body.message, /the token refresh failed: invalid_client; the provider answered 401/);
    assert.ok(!body.message.includes(CLIENT_SECRET));
    assert.deepEqual(await credentials(), renewed, 'a failed refresh keeps what was stored');
  });

  await t.test('a missing client secret is a clear TypeError when the handler is made', async (t) => {
    const r = await fetch(`${endpoint}/bad-config`);
    assert.equal(r.status, 500);
    assert.match(await r.text(), /createOAuthHandler\(\): `clientSecret` is required \(a non-empty string\); it usually comes from environment.secrets/);
  });

  await t.test('no secret reached the logs', async () => {
    const rows = await sql.all<Record<string, string | null>>(s.services.store, 'SELECT logs, error_message, error_stack FROM invocations');
    const text = rows.map((r) => `${r.logs} ${r.error_message ?? ''} ${r.error_stack ?? ''}`).join('\n') + JSON.stringify(s.logs);
    assert.match(text, /OAuth: .*account_inactive/);
    const tokens = provider.tokenCalls
      .flatMap((c) => [c.answer.body?.access_token, c.answer.body?.refresh_token])
      .filter((x): x is string => typeof x === 'string');
    for (const secret of [CLIENT_SECRET, ...tokens]) assert.ok(!text.includes(secret), `logs hold ${secret.slice(0, 12)}...`);
  });
});
