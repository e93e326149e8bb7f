/**
 * Visibility (spec 2.5): who may install what on a self-hosted server. The admin token installs
 * anything; an install link installs its own integration, a private one only for the server's
 * organization; unlisted ones install only through their own link; the catalogue lists the public
 * ones. Real server, real SQLite file, real HTTP, the real CLI.
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { copyFileSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT, runCli, startTestServer, tmpDir, type TestServer } from './helpers/index.ts';
import { installRefusal } from '../src/installations/index.ts';

/** Integrations of every visibility: ours (private to this server's organization), theirs, hidden, shop. */
function visibilityIntegrations(t: TestContext): string {
  const dir = join(tmpDir(t, 'switchyard-visibility-'), 'integrations');
  const folder = (name: string, manifest: string) => {
    mkdirSync(join(dir, name, 'assets'), { recursive: true });
    writeFileSync(join(dir, name, 'platform-manifest.yaml'), `name: ${name}\n${manifest}`);
  };
  folder('ours', 'title: Ours\ndescription: Private to this server\norganization: our-org\nvisibility: private\nscopes: []\n');
  folder('theirs', 'title: Theirs\ndescription: Private to another organization\norganization: acme\nvisibility: private\nscopes: []\n');
  folder(
    'hidden',
    [
      'title: Hidden',
      'description: Installed through its link',
      'organization: acme',
      'visibility: unlisted',
      'scopes: [space:content:read]',
      'configurations:',
      '  account:',
      '    properties:',
      '      step: { type: number, title: Step, description: How much one press adds }',
      '      label: { type: string, title: Label, description: What it says }',
      '',
    ].join('\n'),
  );
  folder(
    'shop',
    'title: Shop\ndescription: In the catalogue\norganization: acme\nvisibility: public\nscopes: [site:views:read]\ncategories: [marketing]\nicon: assets/icon.png\n',
  );
  copyFileSync(join(ROOT, 'integrations/hello-components/assets/icon.png'), join(dir, 'shop', 'assets', 'icon.png'));
  return dir;
}

/** A server installing for `our-org` (id `org_42`), or (null) naming no organization. */
async function server(t: TestContext, organization: string | string[] | null = ['our-org', 'org_42']): Promise<TestServer> {
  return startTestServer(t, { integrations_dir: visibilityIntegrations(t), ...(organization ? { organization } : {}) });
}

/** An install link of `name`, made by the admin through the API. */
async function linkOf(s: TestServer, name: string, expires?: string): Promise<string> {
  const r = await s.api('POST', `/api/v1/integrations/${name}/links`, expires ? { expires } : {});
  assert.equal(r.status, 201, JSON.stringify(r.body));
  assert.match(r.body.link, /^sy_link_/);
  return r.body.link;
}

const installations = (s: TestServer, name: string) => s.services.installations!.list({ integration: name });

test("a private integration installs through a link for the server's own organization, and is refused (403 integration_private) for another", async (t) => {
  const s = await server(t);
  const ours = await s.api('POST', '/api/v1/installations', { integration: 'ours' }, await linkOf(s, 'ours'));
  assert.equal(ours.status, 201, JSON.stringify(ours.body));
  assert.equal(ours.body.installation.integration, 'ours');

  // No link is made for it: it could never install.
  const mint = await s.api('POST', '/api/v1/integrations/theirs/links', {});
  assert.equal(mint.status, 403);
  assert.equal(mint.body.error.code, 'integration_private');
  assert.match(mint.body.error.message, /integration "theirs" is private to organization "acme"; this server installs for "our-org" \/ "org_42"/);
  assert.match(mint.body.error.hint, /organization: acme/);
  assert.match(mint.body.error.hint, /the admin token installs it/);

  // A link made while it was installable (the server's organization changed since): refused at use.
  const { token } = await s.services.installations!.links.mint('theirs', 60_000);
  const refused = await s.api('POST', '/api/v1/installations', { integration: 'theirs' }, token);
  assert.equal(refused.status, 403);
  assert.equal(refused.body.error.code, 'integration_private');
  assert.deepEqual(await installations(s, 'theirs'), [], 'nothing stored');
});

test("with no organization set, no private integration installs through a link; the rule reads the manifest's organization and the server's list", async (t) => {
  const s = await server(t, null);
  const r = await s.api('POST', '/api/v1/integrations/ours/links', {});
  assert.equal(r.status, 403);
  assert.equal(r.body.error.code, 'integration_private');
  assert.match(r.body.error.message, /this server names no organization \(`organization:` in config.yaml is unset\)/);
  const link = { kind: 'link', integration: 'x', linkId: 'lnk_1' } as const;
  assert.equal(installRefusal('x', { organization: 'org_42', visibility: 'private' }, link, ['acme', 'org_42']), undefined, 'by id or subdomain');
  assert.equal(installRefusal('x', { organization: 'Acme', visibility: 'private' }, link, ['acme'])?.code, 'integration_private', 'names compare exactly');
  assert.equal(installRefusal('x', { organization: 'acme', visibility: 'secret' }, link, ['acme'])?.code, 'forbidden', 'an unknown visibility: the admin only');
});

test("an unlisted integration installs only with its own valid link: refused without one, with another's, expired, altered or revoked", async (t) => {
  const s = await server(t);
  const body = { integration: 'hidden', configuration: { step: 2 } };

  // Without a link: no token, or a token that installs nothing.
  assert.equal(
    (await fetch(`${s.url}/api/v1/installations`, { method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json' } })).status,
    401,
  );
  const admin = await s.api('POST', '/api/v1/installations', { integration: 'ours' });
  const byInstallation = await s.api('POST', '/api/v1/installations', body, admin.body.token);
  assert.equal(byInstallation.status, 403);
  assert.equal(byInstallation.body.error.code, 'forbidden');
  assert.match(byInstallation.body.error.message, /an installation token cannot install/);
  const another = await s.api('POST', '/api/v1/installations', body, await linkOf(s, 'shop'));
  assert.equal(another.status, 403);
  assert.equal(another.body.error.code, 'install_link_required');
  assert.match(another.body.error.message, /"hidden" is unlisted: it installs only through its own install link, and this link is for "shop"/);

  // With its link: installed, and the holder gets the installation's token.
  const link = await linkOf(s, 'hidden', '1h');
  const ok = await s.api('POST', '/api/v1/installations', body, link);
  assert.equal(ok.status, 201, JSON.stringify(ok.body));
  assert.equal(ok.body.installation.configuration.step, 2);
  assert.equal((await s.api('GET', `/api/v1/installations/${ok.body.installation.id}`, undefined, ok.body.token)).status, 200);
  assert.ok(
    s.logs.some((l) => l.msg === 'installed' && /^install link lnk_/.test(String(l.by))),
    'the log names the link by its id',
  );
  assert.ok(!JSON.stringify(s.logs).includes(link), 'the link itself is never logged');

  // Expired: authentic, but past its expiry.
  const expired = (await s.services.installations!.links.mint('hidden', 60_000, Date.now() - 120_000)).token;
  const late = await s.api('POST', '/api/v1/installations', body, expired);
  assert.equal(late.status, 401);
  assert.equal(late.body.error.code, 'install_link_expired');
  assert.match(late.body.error.message, /this install link of "hidden" expired at /);

  // Altered: another integration's name in it, or its signature cut short.
  const [payload, sig] = link.slice('sy_link_'.length).split('.');
  const forged = `sy_link_${Buffer.from(Buffer.from(payload, 'base64url').toString().replace('hidden', 'theirs')).toString('base64url')}.${sig}`;
  for (const bad of [forged, link.slice(0, -3), `${link}x`, 'sy_link_', 'sy_link_a.b.c']) {
    const r = await s.api('POST', '/api/v1/installations', { integration: 'theirs' }, bad);
    assert.equal(r.status, 401, bad);
    assert.equal(r.body.error.code, 'install_link_invalid', bad);
  }

  // Revoked: every link made before the revocation stops at once; one made after works.
  const revoke = await s.api('DELETE', '/api/v1/integrations/hidden/links');
  assert.equal(revoke.status, 200);
  const gone = await s.api('POST', '/api/v1/installations', body, link);
  assert.equal(gone.status, 401);
  assert.equal(gone.body.error.code, 'install_link_revoked');
  assert.equal((await s.api('POST', '/api/v1/installations', body, await linkOf(s, 'hidden'))).status, 201);
  assert.equal((await installations(s, 'hidden')).length, 2, 'only the two valid links installed');

  // The installation made with the revoked link stays, listed and configurable as before.
  const kept = await s.api('PATCH', `/api/v1/installations/${ok.body.installation.id}`, { configuration: { label: 'still here' } }, ok.body.token);
  assert.equal(kept.status, 200);
  assert.equal(kept.body.installation.status, 'active');
});

test('an install link installs and reads its catalogue entry, nothing else', async (t) => {
  const s = await server(t);
  const link = await linkOf(s, 'hidden');
  for (const [method, path] of [
    ['GET', '/api/v1/installations'],
    ['GET', '/api/v1/events'],
    ['GET', '/api/v1/integrations'],
    ['GET', '/api/v1/integrations/hidden'],
    ['POST', '/api/v1/integrations/hidden/links'],
    ['DELETE', '/api/v1/integrations/hidden/links'],
    ['GET', '/api/v1/integrations/hidden/installations'],
  ] as const) {
    const r = await s.api(method, path, method === 'POST' ? {} : undefined, link);
    assert.equal(r.status, 403, `${method} ${path}`);
    assert.match(r.body.error.message, /an install link only installs its integration \("hidden"\)/, `${method} ${path}`);
  }
  const envelope = new FormData();
  envelope.set('event', JSON.stringify({ type: 'fetch' }));
  envelope.set('environment', '{}');
  const runtime = await fetch(`${s.url}/v1/integrations/hidden`, { method: 'POST', body: envelope, headers: { authorization: `Bearer ${link}` } });
  assert.equal(runtime.status, 403, 'no envelope posted with a link');
  const entry = await s.api('GET', '/api/v1/catalogue/hidden', undefined, link);
  assert.equal(entry.status, 200);
  assert.equal(entry.body.visibility, 'unlisted');
  assert.deepEqual(Object.keys(entry.body.configurations.account.properties), ['step', 'label']);
  assert.equal((await s.api('GET', '/api/v1/catalogue/ours', undefined, link)).status, 404, "another unlisted or private integration's entry is not found");
});

test('the catalogue lists the public integrations only, for any token, with their icon, scopes and targets', async (t) => {
  const s = await server(t);
  const inst = await s.api('POST', '/api/v1/installations', { integration: 'ours' });
  for (const token of [s.token, inst.body.token]) {
    const r = await s.api('GET', '/api/v1/catalogue', undefined, token);
    assert.equal(r.status, 200);
    assert.deepEqual(
      r.body.integrations.map((i: { name: string }) => i.name),
      ['shop', 'webhook'],
    );
  }
  const { body } = await s.api('GET', '/api/v1/catalogue');
  const [shop, webhook] = body.integrations;
  assert.deepEqual(shop, {
    name: 'shop',
    title: 'Shop',
    description: 'In the catalogue',
    icon: `${s.url}/api/v1/catalogue/shop/icon`,
    scopes: ['site:views:read'],
    targets: ['organization', 'space', 'site'],
    categories: ['marketing'],
  });
  assert.deepEqual(webhook.targets, ['organization'], 'the webhook integration installs into the organization only');
  assert.equal(webhook.icon, null);
  const icon = await fetch(shop.icon, { headers: { authorization: `Bearer ${inst.body.token}` } });
  assert.equal(icon.status, 200);
  assert.equal(icon.headers.get('content-type'), 'image/png');
  // Unlisted and private ones: not found by an installation token; shown to the admin.
  for (const name of ['hidden', 'ours', 'theirs']) {
    assert.equal((await s.api('GET', `/api/v1/catalogue/${name}`, undefined, inst.body.token)).status, 404, name);
    assert.equal((await s.api('GET', `/api/v1/catalogue/${name}/icon`, undefined, inst.body.token)).status, 404, name);
    assert.equal((await s.api('GET', `/api/v1/catalogue/${name}`)).status, 200, name);
  }
  assert.equal((await fetch(`${s.url}/api/v1/catalogue`)).status, 401, 'a token is needed');
});

test('the admin token installs any visibility without a link: private to another organization, unlisted, public', async (t) => {
  const s = await server(t);
  for (const integration of ['theirs', 'hidden', 'shop', 'ours']) {
    const r = await s.api('POST', '/api/v1/installations', { integration });
    assert.equal(r.status, 201, `${integration}: ${JSON.stringify(r.body)}`);
  }
  // And the console, whose session is opened with it.
  const login = await fetch(`${s.consoleUrl}/console/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-switchyard-console': 'login' },
    body: JSON.stringify({ token: s.token }),
  });
  const { csrf } = (await login.json()) as { csrf: string };
  const cookie = (login.headers.get('set-cookie') ?? '').split(';')[0];
  const r = await fetch(`${s.consoleUrl}/api/v1/installations`, {
    method: 'POST',
    headers: { cookie, 'x-switchyard-csrf': csrf, 'content-type': 'application/json', origin: s.consoleUrl, 'sec-fetch-site': 'same-origin' },
    body: JSON.stringify({ integration: 'theirs' }),
  });
  assert.equal(r.status, 201);
  assert.equal((await installations(s, 'theirs')).length, 2);
});

test('the CLI prints an install link, installs with it (exit 0) and says why it cannot (exit 2)', async (t) => {
  const s = await server(t);
  const admin = { SWITCHYARD_URL: s.url, SWITCHYARD_ADMIN_TOKEN: s.token };
  const printed = await runCli(['integrations', 'link', 'hidden', '--expires', '2h'], { env: admin });
  assert.equal(printed.code, 0, printed.stderr);
  const link = /^\s+(sy_link_\S+)$/m.exec(printed.stdout)?.[1];
  assert.ok(link, printed.stdout);
  assert.match(printed.stdout, /install link of hidden \(unlisted\), works until \S+/);
  assert.match(printed.stdout, /switchyard install hidden --link <link>/);

  // The holder has no admin token: the link is the credential. --set values are typed from the entry.
  const holder = { SWITCHYARD_URL: s.url, SWITCHYARD_ADMIN_TOKEN: '' };
  const installed = await runCli(['install', 'hidden', '--link', link, '--set', 'step=3', '--set', 'label=42', '--json'], { env: holder });
  assert.equal(installed.code, 0, installed.stderr);
  const inst = JSON.parse(installed.stdout).installation;
  assert.deepEqual(inst.configuration, { step: 3, label: '42' });

  const wrong = await runCli(['install', 'shop', '--link', link], { env: holder });
  assert.equal(wrong.code, 1, 'a link of another integration: forbidden');
  assert.match(wrong.stderr, /this install link installs "hidden", not "shop"/);

  const revoked = await runCli(['integrations', 'link', 'hidden', '--revoke'], { env: admin });
  assert.equal(revoked.code, 0, revoked.stderr);
  assert.match(revoked.stdout, /every install link of hidden made before \S+ is revoked/);
  const late = await runCli(['install', 'hidden', '--link', link], { env: holder });
  assert.equal(late.code, 2);
  assert.match(late.stderr, /this install link of "hidden" was revoked/);
  assert.match(late.stderr, /hint: ask whoever gave it for a new one/);

  const priv = await runCli(['integrations', 'link', 'theirs'], { env: admin });
  assert.equal(priv.code, 2);
  assert.match(priv.stderr, /integration "theirs" is private to organization "acme"/);
  const forged = await runCli(['install', 'hidden', '--link', `${link.slice(0, -2)}xy`], { env: holder });
  assert.equal(forged.code, 2);
  assert.match(forged.stderr, /this install link is not valid/);

  const json = JSON.parse((await runCli(['integrations', 'link', 'shop', '--json'], { env: admin })).stdout);
  assert.equal(json.integration, 'shop');
  assert.equal(json.visibility, 'public');
  assert.equal(json.installUrl, `${s.url}/api/v1/installations`);
  assert.ok(Date.parse(json.expiresAt) - Date.now() > 6.9 * 86_400_000, 'a week unless asked');
  const tooLong = await runCli(['integrations', 'link', 'shop', '--expires', '1y'], { env: admin });
  assert.equal(tooLong.code, 2);
  assert.match(tooLong.stderr, /expires/);
});
