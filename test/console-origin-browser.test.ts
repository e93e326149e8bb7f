/**
 * An integration's public endpoint must never act with the console's authority. In a real browser
 * (Chromium), with the admin logged into the console, a hostile integration serves a page that tries
 * what a page on the console's origin could do: read the session and its CSRF value, list and
 * create installations with the admin's cookie, read cookies and storage, replace the console's
 * cookie. Every attempt must fail and the admin's session must survive.
 */
import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { INTEGRATION_CSP } from '../src/http/origins.ts';
import { consoleIntegrations, consoleServer, hasChromium, loginInBrowser, openBrowser, shot } from './console-support.ts';

const skip = hasChromium() || process.env.CI ? false : 'Debian chromium is not installed (apt-get install -y chromium)';

/** The attacks, run by the hostile page; results land in #out as JSON. */
const ATTACKS = `
const CONSOLE = new URL(location.href).searchParams.get('console');
const results = {};
async function attempt(name, fn) {
  try { results[name] = await fn(); } catch (e) { results[name] = 'blocked: ' + (e && e.name); }
}
const read = async (r) => r.status + ' ' + (await r.text()).slice(0, 200);
await attempt('session_here', async () => read(await fetch('/console/session', { credentials: 'include' })));
await attempt('session_console', async () => read(await fetch(CONSOLE + '/console/session', { credentials: 'include' })));
await attempt('api_list', async () => read(await fetch(CONSOLE + '/api/v1/installations', { credentials: 'include' })));
await attempt('api_create', async () => {
  const r = await fetch(CONSOLE + '/api/v1/installations', {
    method: 'POST', credentials: 'include', headers: { 'content-type': 'text/plain' },
    body: JSON.stringify({ integration: 'webhook', configuration: { webhook_url: 'https://evil.example/x', event_types: 'site_view' } }),
  });
  return read(r);
});
await attempt('cookie', () => document.cookie);
await attempt('storage', () => String(localStorage.length));
await attempt('opener', () => String(window.opener && window.opener.location.href));
document.getElementById('out').textContent = JSON.stringify(results, null, 2);
document.title = 'attacked';
`;

function hostileIntegration(dir: string): void {
  mkdirSync(join(dir, 'hostile', 'src'), { recursive: true });
  writeFileSync(
    join(dir, 'hostile', 'platform-manifest.yaml'),
    'name: hostile\ntitle: Hostile\ndescription: Serves a page that attacks the console\norganization: test\nvisibility: private\nscopes: []\nscript: src/index.ts\n',
  );
  writeFileSync(
    join(dir, 'hostile', 'src', 'index.ts'),
    `import { createIntegration } from '@switchyard/runtime';
const page = ${JSON.stringify(`<!doctype html><title>hostile</title><pre id="out">running</pre><script type="module">${ATTACKS}</script>`)};
export default createIntegration({
  fetch: async () => {
    const headers = new Headers({ 'content-type': 'text/html; charset=utf-8' });
    headers.append('set-cookie', 'sy_console=forged; Path=/api/v1');
    headers.append('set-cookie', 'sy_console=forged; Path=/');
    headers.append('set-cookie', 'theirs=kept; Path=/');
    return new Response(page, { headers });
  },
});
`,
  );
}

test('a hostile page on a public endpoint cannot read or use the console session, nor replace its cookie', { skip }, async (t) => {
  const dir = consoleIntegrations(t);
  hostileIntegration(dir);
  const [server, { context, page }] = await Promise.all([consoleServer(t, { integrationsDir: dir }), openBrowser(t)]);
  const installed = await server.api('POST', '/api/v1/installations', { integration: 'hostile' });
  assert.equal(installed.status, 201, JSON.stringify(installed.body));
  const endpoint = installed.body.installation.urls.publicEndpoint as string;
  const before = (await server.api('GET', '/api/v1/installations')).body.installations.length;

  // The answer as it leaves the server: sandboxed, and without our cookie.
  const raw = await fetch(`${endpoint}/page`);
  assert.equal(raw.headers.get('content-security-policy'), INTEGRATION_CSP);
  assert.deepEqual(raw.headers.getSetCookie(), ['theirs=kept; Path=/'], "the integration's own cookie stays, ours never");
  // Integration content is never served on the console's origin.
  const onConsole = await fetch(`${server.consoleUrl}${new URL(endpoint).pathname}/page`);
  assert.equal(onConsole.status, 404);

  await loginInBrowser(page, server);
  const attack = await context.newPage();
  await attack.goto(`${endpoint}/page?console=${encodeURIComponent(server.consoleUrl)}`);
  // Four requests one after the other: quiet, well under a second; under the whole suite's load
  // the browser's default 5 s ran out once.
  await attack
    .waitForFunction(() => (globalThis as any).document.title === 'attacked', undefined, { timeout: 30_000 })
    .catch(async (e) => {
      throw new Error(`the hostile page did not finish its attacks: it shows ${await attack.locator('#out').innerText()}`, { cause: e });
    });
  const results = JSON.parse(await attack.locator('#out').innerText()) as Record<string, string>;
  await shot(attack, 'hostile-page', attack.locator('#out'));
  if (process.env.SHOW_ATTACKS) console.log(results);
  for (const [name, outcome] of Object.entries(results)) {
    assert.doesNotMatch(outcome, /csrf|"authenticated":true|inst_/, `${name}: ${outcome}`);
    assert.doesNotMatch(outcome, /^2\d\d /, `${name} got a 2xx: ${outcome}`);
  }
  assert.match(results.cookie, /^blocked: SecurityError$/, 'a sandboxed document reads no cookie');
  assert.match(results.storage, /^blocked: SecurityError$/);

  // Nothing was created, and the admin is still logged in with a working session.
  assert.equal((await server.api('GET', '/api/v1/installations')).body.installations.length, before);
  await page.reload();
  await page.getByRole('heading', { name: 'Integrations', level: 1 }).waitFor();
  const session = await page.evaluate(async () => (await (await fetch('/console/session')).json()) as { authenticated: boolean });
  assert.equal(session.authenticated, true);
  const cookies = await context.cookies();
  assert.ok(!cookies.some((c) => c.name === 'sy_console' && c.value === 'forged'), 'the forged cookie was never set');
});
