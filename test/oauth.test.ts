/**
 * OAuth toward external providers, end to end: a real switchyard server running the shipped
 * integrations/oauth-example in the real sandbox, against a real OAuth 2 authorization server
 * (oauth2-mock-server) on 127.0.0.1. The browser is played step by step (redirect: 'manual').
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { cpSync } from 'node:fs';
import { join } from 'node:path';
import { Events } from 'oauth2-mock-server';
import { createStateStore, STATE_TTL_MS } from '../src/oauth/index.ts';
import { ROOT, runCli, startTestServer, tmpDir, sql } from './helpers/index.ts';
import { RELAXED_SANDBOX, startProvider, visit } from './oauth-support.ts';

const CLIENT_ID = 'switchyard-example-client';
const CLIENT_SECRET = 'cs_very-secret-value-4f9a2b7c';

test('OAuth flow of integrations/oauth-example against oauth2-mock-server', async (t) => {
  const provider = await startProvider(t);
  const dir = tmpDir(t);
  cpSync(join(ROOT, 'integrations/oauth-example'), join(dir, 'oauth-example'), { recursive: true, filter: (src) => !src.endsWith('.env') });
  process.env.OAUTH_EXAMPLE_CLIENT_ID = CLIENT_ID;
  process.env.OAUTH_EXAMPLE_CLIENT_SECRET = CLIENT_SECRET;
  process.env.OAUTH_EXAMPLE_PROVIDER_URL = provider.url;
  const s = await startTestServer(t, { integrations_dir: dir, sandbox: RELAXED_SANDBOX });
  const store = s.services.store;

  async function install() {
    const r = await s.api('POST', '/api/v1/installations', { integration: 'oauth-example' });
    assert.equal(r.status, 201, JSON.stringify(r.body));
    return r.body.installation as {
      id: string;
      status: string;
      urls: { publicEndpoint: string };
      connect: Array<{ property: string; label: string; url: string }>;
    };
  }
  const configuration = async (id: string, reveal = true) =>
    (await s.api('GET', `/api/v1/installations/${id}${reveal ? '?reveal=true' : ''}`)).body.installation.configuration;

  /** Connect link -> provider -> callback; returns the callback URL the provider sent the browser to. */
  async function authorize(connectUrl: string): Promise<{ start: URL; callback: URL }> {
    const first = await visit(connectUrl);
    assert.equal(first.status, 302, first.text);
    const second = await visit(first.location!.href);
    assert.equal(second.status, 302, second.text);
    return { start: first.location!, callback: second.location! };
  }

  const publicEndpoint = (id: string) => `${s.url}/v1/integrations/oauth-example/installations/${id}`;

  await t.test('the connect link redirects to the provider, the code is exchanged and the credentials stored', async (t) => {
    const inst = await install();
    assert.equal(inst.status, 'pending');
    assert.deepEqual(inst.connect, [{ property: 'oauth_credentials', label: 'Connect', url: `${publicEndpoint(inst.id)}/oauth` }]);

    const first = await visit(inst.connect[0].url);
    assert.equal(first.status, 302);
    assert.equal(first.headers.get('cache-control'), 'no-store');
    const authorizeUrl = first.location!;
    assert.equal(`${authorizeUrl.origin}${authorizeUrl.pathname}`, `${provider.url}/authorize`);
    const q = authorizeUrl.searchParams;
    assert.equal(q.get('client_id'), CLIENT_ID);
    assert.equal(q.get('response_type'), 'code');
    assert.equal(q.get('redirect_uri'), `${publicEndpoint(inst.id)}/oauth`);
    assert.equal(q.get('scope'), 'openid profile');
    assert.equal(q.get('prompt'), null);
    assert.match(q.get('state')!, /^[\w-]+\.[\w-]+$/);
    assert.ok(!authorizeUrl.href.includes(CLIENT_SECRET));
    // PKCE: only the S256 challenge travels through the browser; the verifier stays on the server.
    assert.equal(q.get('code_challenge_method'), 'S256');
    assert.match(q.get('code_challenge')!, /^[\w-]{43}$/);

    // The provider "logs the user in" and sends the browser back with a code.
    const second = await visit(authorizeUrl.href);
    assert.equal(second.status, 302);
    const callback = second.location!;
    assert.equal(`${callback.origin}${callback.pathname}`, `${publicEndpoint(inst.id)}/oauth`);
    const code = callback.searchParams.get('code')!;
    assert.ok(code);

    const done = await visit(callback.href);
    assert.equal(done.status, 200, done.text);
    assert.match(done.headers.get('content-type')!, /^text\/html/);
    assert.equal(done.headers.get('referrer-policy'), 'no-referrer');
    assert.match(done.text, /<h1>Connected<\/h1>/);
    assert.match(done.text, /window\.opener\.postMessage\(m,window\.location\.origin\)/);
    assert.match(done.text, /window\.close\(\)/);
    assert.match(done.text, new RegExp(`data-installation="${inst.id}"`));

    // The exchange the provider saw: a form POST with Accept: application/json, every parameter.
    const call = provider.tokenCalls.at(-1)!;
    assert.match(String(call.headers['content-type']), /^application\/x-www-form-urlencoded/);
    assert.equal(call.headers.accept, 'application/json');
    const { code_verifier: verifier, ...rest } = call.body;
    assert.deepEqual(rest, {
      client_id: CLIENT_ID,
      client_secret: CLIENT_SECRET,
      code,
      redirect_uri: `${publicEndpoint(inst.id)}/oauth`,
      grant_type: 'authorization_code',
    });
    // The provider checked it too (oauth2-mock-server refuses a verifier that does not match).
    assert.equal(createHash('sha256').update(verifier).digest('base64url'), q.get('code_challenge'));
    assert.deepEqual(await sql.all(store, 'SELECT verifier FROM oauth_states WHERE verifier IS NOT NULL'), [], 'the verifier is forgotten once used');
    const issued = call.answer.body;
    const creds = (await configuration(inst.id)).oauth_credentials;
    assert.equal(creds.access_token, issued.access_token);
    assert.equal(creds.refresh_token, issued.refresh_token);
    assert.equal(creds.scope, issued.scope, "the example's extractCredentials also keeps the granted scope");
    assert.ok(Math.abs(creds.expires_at - (Date.now() + issued.expires_in * 1000)) < 60_000, `expires_at ${creds.expires_at}`);
    assert.equal((await configuration(inst.id, false)).oauth_credentials.access_token, '[redacted]');
    // The long-lived installation token cannot reveal them (only the admin, and the installation's
    // own code through its short-lived invocation token).
    const longLived = (await s.api('POST', `/api/v1/installations/${inst.id}/token`)).body.token;
    const asInstallation = await s.api('GET', `/api/v1/installations/${inst.id}?reveal=true`, undefined, longLived);
    assert.equal(asInstallation.status, 200);
    assert.equal(asInstallation.body.installation.configuration.oauth_credentials.access_token, '[redacted]');

    // The stored token works against the provider's API (/me calls its userinfo endpoint).
    const me = await fetch(`${publicEndpoint(inst.id)}/me`);
    assert.equal(me.status, 200);
    assert.equal(((await me.json()) as { sub: string }).sub, 'johndoe');
  });

  await t.test('the same callback a second time is refused as reused and stores nothing', async (t) => {
    const inst = await install();
    const { callback } = await authorize(inst.connect[0].url);
    assert.equal((await visit(callback.href)).status, 200);
    const stored = (await configuration(inst.id)).oauth_credentials.access_token;
    const calls = provider.tokenCalls.length;
    const again = await visit(callback.href);
    assert.equal(again.status, 400);
    assert.match(again.headers.get('content-type')!, /^text\/html/);
    assert.match(again.text, /Could not connect/);
    assert.match(again.text, /already used; start the connection again/);
    assert.match(again.text, /data-status="error"/);
    assert.equal(provider.tokenCalls.length, calls, 'the code was not exchanged again');
    assert.equal((await configuration(inst.id)).oauth_credentials.access_token, stored);
  });

  await t.test("a tampered, a forged and another installation's state are refused with a page", async (t) => {
    const inst = await install();
    const other = await install();
    const { callback } = await authorize(inst.connect[0].url);
    const state = callback.searchParams.get('state')!;
    const [payload, mac] = state.split('.');
    const decoded = JSON.parse(Buffer.from(payload, 'base64url').toString());

    // Payload edited (a later expiry), signature kept.
    const longer = Buffer.from(JSON.stringify({ ...decoded, e: decoded.e + 3_600_000 })).toString('base64url');
    const tampered = new URL(callback);
    tampered.searchParams.set('state', `${longer}.${mac}`);
    const r1 = await visit(tampered.href);
    assert.equal(r1.status, 400);
    assert.match(r1.text, /was not issued by this server/);

    const forged = new URL(callback);
    forged.searchParams.set('state', 'not-a-state');
    const r2 = await visit(forged.href);
    assert.equal(r2.status, 400);
    assert.match(r2.text, /malformed/);

    const missing = new URL(callback);
    missing.searchParams.delete('state');
    const r3 = await visit(missing.href);
    assert.equal(r3.status, 400);
    assert.match(r3.text, /sent back no state/);

    // A genuine state of one installation carried to another's callback.
    const elsewhere = new URL(`${publicEndpoint(other.id)}/oauth`);
    elsewhere.search = callback.search;
    const r4 = await visit(elsewhere.href);
    assert.equal(r4.status, 400);
    assert.match(r4.text, /belongs to another installation/);

    for (const id of [inst.id, other.id]) assert.equal((await configuration(id)).oauth_credentials, undefined);
    // The untouched state still works once (nothing above burned it).
    assert.equal((await visit(callback.href)).status, 200);
  });

  await t.test('an expired state is refused (server clock advanced past 10 minutes)', async (t) => {
    const inst = await install();
    const { callback } = await authorize(inst.connect[0].url);
    const real = s.services.oauthStates;
    s.services.oauthStates = await createStateStore(s.services.store.database, () => Date.now() + STATE_TTL_MS + 1000);
    try {
      const r = await visit(callback.href);
      assert.equal(r.status, 400);
      assert.match(r.text, /has expired \(states live 10 minutes\)/);
    } finally {
      s.services.oauthStates = real;
    }
    assert.equal((await configuration(inst.id)).oauth_credentials, undefined);
  });

  await t.test('the provider refusing authorization (error on the callback) is shown escaped, nothing stored', async (t) => {
    const inst = await install();
    provider.once(t, Events.BeforeAuthorizeRedirect, (redirect: { url: URL }) => {
      redirect.url.searchParams.delete('code');
      redirect.url.searchParams.set('error', 'access_denied');
      redirect.url.searchParams.set('error_description', 'The user said <script>alert(1)</script> no');
    });
    const { callback } = await authorize(inst.connect[0].url);
    const r = await visit(callback.href);
    assert.equal(r.status, 400);
    assert.match(r.text, /did not grant access: access_denied/);
    assert.match(r.text, /The user said &lt;script&gt;alert\(1\)&lt;\/script&gt; no/);
    assert.ok(!r.text.includes('<script>alert(1)'));
    assert.equal((await configuration(inst.id)).oauth_credentials, undefined);
    // Its state was burned: a forged success with the same state is refused.
    const replay = new URL(callback);
    replay.searchParams.delete('error');
    replay.searchParams.set('code', 'stolen');
    assert.match((await visit(replay.href)).text, /already used/);
  });

  await t.test('an OAuth error from the token endpoint is shown with the response, never the client secret', async (t) => {
    const inst = await install();
    provider.once(t, Events.BeforeResponse, (res: { statusCode: number; body: any }) => {
      res.statusCode = 400;
      res.body = { error: 'invalid_client', error_description: 'bad client credentials', echoed_secret: CLIENT_SECRET, note: `got ${CLIENT_SECRET}` };
    });
    const { callback } = await authorize(inst.connect[0].url);
    const r = await visit(callback.href);
    assert.equal(r.status, 502);
    assert.match(r.text, /token exchange failed: invalid_client \(bad client credentials\)/);
    assert.match(r.text, /the provider answered 400/);
    assert.ok(!r.text.includes(CLIENT_SECRET), r.text);
    assert.equal((await configuration(inst.id)).oauth_credentials, undefined);
  });

  await t.test('a 200 answer with ok: false (Slack style) raises an error that includes the response', async (t) => {
    const inst = await install();
    let leaked = '';
    provider.once(t, Events.BeforeResponse, (res: { statusCode: number; body: any }) => {
      leaked = res.body.access_token;
      res.body = { ok: false, error: 'invalid_code', access_token: leaked, warning: 'superfluous_charset' };
    });
    const { callback } = await authorize(inst.connect[0].url);
    const r = await visit(callback.href);
    assert.equal(r.status, 502);
    assert.match(r.text, /token exchange failed: invalid_code/);
    assert.match(r.text, /superfluous_charset/, 'the response is included');
    assert.ok(!r.text.includes(leaked), 'a token in the response is not shown');
    assert.equal((await configuration(inst.id)).oauth_credentials, undefined);
  });

  await t.test('/me renews a token about to expire with grant_type=refresh_token and stores it', async (t) => {
    const inst = await install();
    const { callback } = await authorize(inst.connect[0].url);
    assert.equal((await visit(callback.href)).status, 200);
    const before = (await configuration(inst.id)).oauth_credentials;
    // Not about to expire: no refresh.
    const calls = provider.tokenCalls.length;
    assert.equal((await fetch(`${publicEndpoint(inst.id)}/me`)).status, 200);
    assert.equal(provider.tokenCalls.length, calls);
    // Expiring in 10 s (within the 60 s margin): renewed before the call.
    const patched = await s.api('PATCH', `/api/v1/installations/${inst.id}`, {
      configuration: { oauth_credentials: { ...before, expires_at: Date.now() + 10_000 } },
    });
    assert.equal(patched.status, 200, JSON.stringify(patched.body));
    const me = await fetch(`${publicEndpoint(inst.id)}/me`);
    assert.equal(me.status, 200);
    const call = provider.tokenCalls.at(-1)!;
    assert.equal(provider.tokenCalls.length, calls + 1);
    assert.deepEqual(call.body, { grant_type: 'refresh_token', refresh_token: before.refresh_token, client_id: CLIENT_ID, client_secret: CLIENT_SECRET });
    const after = (await configuration(inst.id)).oauth_credentials;
    assert.equal(after.access_token, call.answer.body.access_token);
    assert.equal(after.refresh_token, call.answer.body.refresh_token);
    assert.notEqual(after.refresh_token, before.refresh_token);
    assert.ok(after.expires_at > Date.now() + 3_000_000);

    // A refused refresh is a clear 502 and keeps what was stored.
    await s.api('PATCH', `/api/v1/installations/${inst.id}`, { configuration: { oauth_credentials: { ...after, expires_at: Date.now() - 1000 } } });
    provider.once(t, Events.BeforeResponse, (res: { statusCode: number; body: any }) => {
      res.statusCode = 400;
      res.body = { error: 'invalid_grant', error_description: 'refresh token revoked' };
    });
    const refused = await fetch(`${publicEndpoint(inst.id)}/me`);
    assert.equal(refused.status, 502);
    assert.match(
      ((await refused.json()) as { error: string }).error,
      /token could not be renewed: the token refresh failed: invalid_grant \(refresh token revoked\)/,
    );
    assert.equal((await configuration(inst.id)).oauth_credentials.access_token, after.access_token);
  });

  await t.test('requests that find the token about to expire together renew it once (one claim at a time)', async (t) => {
    const inst = await install();
    const { callback } = await authorize(inst.connect[0].url);
    assert.equal((await visit(callback.href)).status, 200);
    const before = (await configuration(inst.id)).oauth_credentials;
    await s.api('PATCH', `/api/v1/installations/${inst.id}`, { configuration: { oauth_credentials: { ...before, expires_at: Date.now() + 10_000 } } });
    const refreshes = () => provider.tokenCalls.filter((c) => c.body.grant_type === 'refresh_token').length;
    const calls = refreshes();
    // Up to 4 isolates run these side by side; the provider rotates refresh tokens, so a second
    // renewal with the same refresh token would be spending it twice.
    const answers = await Promise.all(Array.from({ length: 6 }, () => fetch(`${publicEndpoint(inst.id)}/me`)));
    assert.deepEqual(
      answers.map((a) => a.status),
      [200, 200, 200, 200, 200, 200],
    );
    assert.equal(refreshes(), calls + 1, 'one refresh_token grant for all of them');
    const after = (await configuration(inst.id)).oauth_credentials;
    assert.notEqual(after.refresh_token, before.refresh_token);
    assert.ok(after.expires_at > Date.now() + 3_000_000);
  });

  await t.test('`switchyard installations show` prints the connect URL of the button', async (t) => {
    const inst = await install();
    const r = await runCli(['installations', 'show', inst.id], { env: { SWITCHYARD_URL: s.url, SWITCHYARD_ADMIN_TOKEN: s.token } });
    assert.equal(r.code, 0, r.stderr);
    assert.ok(r.stdout.includes(`Connect: open ${publicEndpoint(inst.id)}/oauth`), r.stdout);
  });

  await t.test('the client secret and the tokens are in no invocation log and no server log', async (t) => {
    const rows = await sql.all<Record<string, string | null>>(store, 'SELECT logs, error_message, error_stack FROM invocations');
    assert.ok(rows.length > 10);
    const invocationText = rows.map((r) => `${r.logs} ${r.error_message ?? ''} ${r.error_stack ?? ''}`).join('\n');
    assert.match(invocationText, /OAuth: installation inst_\w+ connected/, 'the flow does log');
    assert.match(invocationText, /OAuth: .*invalid_client/, 'failures are logged');
    const serverText = JSON.stringify(s.logs);
    const tokens = provider.tokenCalls
      .flatMap((c) => [c.answer.body?.access_token, c.answer.body?.refresh_token])
      .filter((x): x is string => typeof x === 'string');
    assert.ok(tokens.length > 5);
    for (const secret of [CLIENT_SECRET, ...tokens]) {
      assert.ok(!invocationText.includes(secret), `invocation logs hold ${secret.slice(0, 12)}...`);
      assert.ok(!serverText.includes(secret), `server logs hold ${secret.slice(0, 12)}...`);
    }
  });
});
