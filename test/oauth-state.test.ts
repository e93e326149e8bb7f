/**
 * The OAuth state: signed by the server, bound to one installation, single-use, expiring after 10
 * minutes. The store with an injected clock, then its API through a real server.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { codeChallengeOf, createStateStore, STATE_TTL_MS } from '../src/oauth/index.ts';
import { openStore } from '../src/store/index.ts';
import { installationsModule } from '../src/installations/index.ts';
import { oauthModule } from '../src/oauth/index.ts';
import { registryModule } from '../src/registry/index.ts';
import { sql, startTestServer, tmpDir } from './helpers/index.ts';
import { join } from 'node:path';
import { mkdirSync, writeFileSync } from 'node:fs';
import type { TestContext } from 'node:test';
import { allMigrations } from '../src/server/migrations.ts';

async function store(t: TestContext) {
  const s = openStore(tmpDir(t), { migrations: allMigrations() });
  t.after(() => s.close());
  let clock = 1_800_000_000_000;
  const states = await createStateStore(s.database, () => clock);
  return { store: s, states, advance: (ms: number) => (clock += ms) };
}

const b64 = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');
const unb64 = (s: string) => JSON.parse(Buffer.from(s, 'base64url').toString());

test('a state is accepted once, for its installation, with its data', async (t) => {
  const { states } = await store(t);
  const { state, expiresAt } = await states.issue('inst_a', { redirectUri: 'https://x.test/oauth' });
  assert.equal(expiresAt, new Date(1_800_000_000_000 + STATE_TTL_MS).toISOString());
  assert.deepEqual(await states.consume(state, 'inst_b'), { ok: false, reason: 'wrong_installation' });
  assert.deepEqual(await states.consume(state, 'inst_a'), { ok: true, installationId: 'inst_a', data: { redirectUri: 'https://x.test/oauth' } });
  assert.deepEqual(await states.consume(state, 'inst_a'), { ok: false, reason: 'reused' });
  assert.notEqual((await states.issue('inst_a')).state, (await states.issue('inst_a')).state, 'every state carries a fresh nonce');
});

test('PKCE: a state issued with pkce carries the S256 challenge; consume hands its verifier back once', async (t) => {
  const { store: db, states } = await store(t);
  const issued = await states.issue('inst_a', {}, { pkce: true });
  assert.equal(issued.codeChallengeMethod, 'S256');
  assert.match(issued.codeChallenge!, /^[\w-]{43}$/);
  assert.ok(!issued.state.includes(issued.codeChallenge!), 'the state itself carries neither challenge nor verifier');
  const r = await states.consume(issued.state, 'inst_a');
  assert.ok(r.ok);
  assert.match(r.codeVerifier!, /^[\w-]{43}$/, 'RFC 7636: 43-128 unreserved characters');
  assert.equal(codeChallengeOf(r.codeVerifier!), issued.codeChallenge);
  assert.deepEqual(await states.consume(issued.state, 'inst_a'), { ok: false, reason: 'reused' }, 'no second verifier');
  assert.deepEqual(await sql.all(db, 'SELECT verifier FROM oauth_states WHERE verifier IS NOT NULL'), []);
  const plain = await states.issue('inst_a');
  assert.equal(plain.codeChallenge, undefined);
  assert.equal(((await states.consume(plain.state, 'inst_a')) as { codeVerifier?: string }).codeVerifier, undefined);
});

test('a state expires 10 minutes after it was issued (injected clock)', async (t) => {
  const { states, advance } = await store(t);
  const a = (await states.issue('inst_a')).state;
  const b = (await states.issue('inst_a')).state;
  advance(STATE_TTL_MS);
  assert.equal((await states.consume(a, 'inst_a')).ok, true, 'still good at exactly 10 minutes');
  advance(1);
  assert.deepEqual(await states.consume(b, 'inst_a'), { ok: false, reason: 'expired' });
});

test('forged, tampered and malformed states are refused', async (t) => {
  const { states, store: db } = await store(t);
  const { state } = await states.issue('inst_a');
  const [payload, mac] = state.split('.');
  const body = unb64(payload);
  // Another installation, a later expiry, a replayed nonce: all break the signature.
  for (const edit of [{ i: 'inst_b' }, { e: body.e + 3_600_000 }, { n: 'chosen-nonce' }])
    assert.deepEqual(await states.consume(`${b64({ ...body, ...edit })}.${mac}`, 'inst_a'), { ok: false, reason: 'forged' });
  // One character changed for certain (fixed characters would leave a MAC that already ends so as it was).
  assert.deepEqual(await states.consume(`${payload}.${mac.slice(0, -1)}${mac.endsWith('A') ? 'B' : 'A'}`, 'inst_a'), { ok: false, reason: 'forged' });
  // Signed with another server's key.
  const other = openStore(tmpDir(t), { migrations: allMigrations() });
  t.after(() => other.close());
  const elsewhere = (await (await createStateStore(other.database)).issue('inst_a')).state;
  assert.deepEqual(await states.consume(elsewhere, 'inst_a'), { ok: false, reason: 'forged' });
  for (const bad of ['', 'abc', `${payload}.`, `.${mac}`, `${payload}.${mac}.x`, `{"i":"inst_a"}`])
    assert.deepEqual(await states.consume(bad, 'inst_a'), { ok: false, reason: 'malformed' }, JSON.stringify(bad));
  // Nothing above burned the genuine state.
  assert.equal((await states.consume(state, 'inst_a')).ok, true);
  assert.equal(await sql.value(db, 'SELECT COUNT(*) AS n FROM oauth_states WHERE used_at IS NOT NULL'), 1);
});

test('states survive a restart (key and nonces are in the database) and old rows are purged', async (t) => {
  const dir = tmpDir(t);
  let clock = 1_800_000_000_000;
  let s = openStore(dir, { migrations: allMigrations() });
  const { state } = await (await createStateStore(s.database, () => clock)).issue('inst_a');
  s.close();
  s = openStore(dir, { migrations: allMigrations() });
  t.after(() => s.close());
  const states = await createStateStore(s.database, () => clock);
  assert.equal((await states.consume(state, 'inst_a')).ok, true);
  assert.deepEqual(await states.consume(state, 'inst_a'), { ok: false, reason: 'reused' });
  clock += 2 * STATE_TTL_MS + 1;
  await states.issue('inst_a');
  assert.equal(await sql.value(s, 'SELECT COUNT(*) AS n FROM oauth_states'), 1, 'rows expired over 10 minutes ago are gone');
});

test('API: states are issued to and consumed by an installation token only, with clear refusals', async (t) => {
  const dir = tmpDir(t);
  mkdirSync(join(dir, 'plain'));
  writeFileSync(
    join(dir, 'plain/platform-manifest.yaml'),
    'name: plain\ntitle: Plain\ndescription: No script\norganization: o\nvisibility: private\nscopes: []\n',
  );
  const s = await startTestServer(t, { integrations_dir: dir }, { modules: [registryModule, installationsModule, oauthModule] });
  const install = async () => (await s.api('POST', '/api/v1/installations', { integration: 'plain' })).body as { installation: { id: string }; token: string };
  const a = await install();
  const b = await install();

  const admin = await s.api('POST', '/api/v1/oauth/state', {});
  assert.equal(admin.status, 403);
  assert.match(admin.body.error.message, /installation token only/);

  const issued = await s.api('POST', '/api/v1/oauth/state', { data: { redirectUri: 'https://x.test/cb' } }, a.token);
  assert.equal(issued.status, 200, JSON.stringify(issued.body));
  assert.ok(Date.parse(issued.body.expiresAt) > Date.now() + STATE_TTL_MS - 60_000);
  assert.equal((await s.api('POST', '/api/v1/oauth/state', undefined, a.token)).status, 200, 'the body is optional');
  const big = await s.api('POST', '/api/v1/oauth/state', { data: { x: 'y'.repeat(3000) } }, a.token);
  assert.equal(big.status, 400);
  assert.match(big.body.error.message, /larger than 2048 bytes/);
  assert.equal((await s.api('POST', '/api/v1/oauth/state', { data: [1] }, a.token)).status, 400);

  const other = await s.api('POST', '/api/v1/oauth/state/consume', { state: issued.body.state }, b.token);
  assert.equal(other.status, 400);
  assert.equal(other.body.error.hint, 'wrong_installation');
  const ok = await s.api('POST', '/api/v1/oauth/state/consume', { state: issued.body.state }, a.token);
  assert.deepEqual(ok.body, { ok: true, installationId: a.installation.id, data: { redirectUri: 'https://x.test/cb' } });
  const again = await s.api('POST', '/api/v1/oauth/state/consume', { state: issued.body.state }, a.token);
  assert.equal(again.status, 400);
  assert.equal(again.body.error.message, 'the OAuth state was already used; start the connection again');
  assert.equal(again.body.error.hint, 'reused');
  const missing = await s.api('POST', '/api/v1/oauth/state/consume', {}, a.token);
  assert.equal(missing.status, 400);
  assert.equal(missing.body.error.where, 'state');
  assert.ok(s.logs.some((l) => l.msg === 'OAuth state refused' && l.reason === 'reused'));
});
