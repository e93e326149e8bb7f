/**
 * Visibility in the console, in a real browser (Debian's Chromium): the Catalogue page lists the
 * public integrations only and fits a 420 px screen; an integration's page makes an install link
 * (shown once) that installs without the admin token, and revokes every link.
 */
import assert from 'node:assert/strict';
import { copyFileSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { ROOT } from './helpers/index.ts';
import { assertNothingCutOff, consoleIntegrations, consoleServer, hasChromium, loginInBrowser, openBrowser, shot } from './console-support.ts';

const skip = hasChromium() || process.env.CI ? false : 'Debian chromium is not installed (apt-get install -y chromium)';

test('the Catalogue page lists the public integrations only, fits 420 px; an integration page makes and revokes install links', { skip }, async (t) => {
  // Beside the console's examples (hello-components and console-kitchen: private; webhook: public),
  // a public integration with an icon and long words, and an unlisted one.
  const dir = consoleIntegrations(t);
  mkdirSync(join(dir, 'storefront-analytics-connector'));
  writeFileSync(
    join(dir, 'storefront-analytics-connector', 'platform-manifest.yaml'),
    [
      'name: storefront-analytics-connector',
      'title: Storefront analytics connector for every published site',
      'description: Sends page views and feedback of https://docs.example.com/a/rather/long/path/that/must/wrap to the shop analytics',
      'organization: acme',
      'visibility: public',
      'scopes: [site:views:read, site:metadata:read, space:content:read, space:metadata:read]',
      'categories: [analytics, marketing]',
      'icon: icon.png',
      '',
    ].join('\n'),
  );
  copyFileSync(join(ROOT, 'integrations/hello-components/assets/icon.png'), join(dir, 'storefront-analytics-connector', 'icon.png'));
  mkdirSync(join(dir, 'hidden'));
  writeFileSync(
    join(dir, 'hidden', 'platform-manifest.yaml'),
    'name: hidden\ntitle: Hidden\ndescription: Installed through its link\norganization: acme\nvisibility: unlisted\nscopes: []\n',
  );
  const [s, { page, pageErrors }] = await Promise.all([consoleServer(t, { integrationsDir: dir }), openBrowser(t)]);

  await loginInBrowser(page, s);
  await page.getByRole('link', { name: 'Catalogue' }).click();
  await page.getByRole('heading', { name: 'Catalogue', level: 1 }).waitFor();
  const cards = page.locator('[data-catalogue]');
  await cards.first().waitFor();
  assert.deepEqual(await cards.evaluateAll((els) => els.map((e) => e.getAttribute('data-catalogue'))), ['storefront-analytics-connector', 'webhook']);
  const store = page.locator('[data-catalogue="storefront-analytics-connector"]');
  assert.match(await store.innerText(), /site:views:read/);
  assert.match(await store.innerText(), /organization, space, site/);
  assert.equal(await store.locator('img.icon').evaluate((img) => (img as unknown as { naturalWidth: number }).naturalWidth > 0), true, 'the icon loads');
  await assertNothingCutOff(page, 'the catalogue at 1200 px');
  await shot(page, '60-catalogue', store);

  await page.setViewportSize({ width: 420, height: 860 });
  await page.reload();
  await store.waitFor();
  await assertNothingCutOff(page, 'the catalogue at 420 px');
  await shot(page, '61-catalogue-narrow', store.getByRole('link', { name: /^Install / }));

  // Install from the catalogue: the installations page, with the integration chosen.
  await store.getByRole('link', { name: /^Install / }).click();
  assert.equal(await page.locator('#install-integration').inputValue(), 'storefront-analytics-connector');

  // An unlisted integration's page: an install link, shown once, that installs without the admin token.
  await page.goto(`${s.consoleUrl}/console/#/integrations/hidden`);
  await page.getByRole('heading', { name: 'Who may install it' }).waitFor();
  await page.getByRole('button', { name: 'Make an install link' }).click();
  const shown = page.locator('.notice code.secret');
  const link = (await shown.innerText()).trim();
  assert.match(link, /^sy_link_/);
  await assertNothingCutOff(page, 'an install link at 420 px');
  await shot(page, '62-install-link-narrow', shown);
  const installed = await s.api('POST', '/api/v1/installations', { integration: 'hidden' }, link);
  assert.equal(installed.status, 201, JSON.stringify(installed.body));

  await page.getByRole('button', { name: 'Revoke all links…' }).click();
  await page.getByRole('button', { name: 'Confirm: revoke every link' }).click();
  await shown.waitFor({ state: 'detached' });
  const revoked = await s.api('POST', '/api/v1/installations', { integration: 'hidden' }, link);
  assert.equal(revoked.status, 401);
  assert.equal(revoked.body.error.code, 'install_link_revoked');

  // A private integration of another organization: the server's refusal, said on the page.
  await page.goto(`${s.consoleUrl}/console/#/integrations/storefront-analytics-connector`);
  await page.getByRole('heading', { name: 'Who may install it' }).waitFor();
  await page.goto(`${s.consoleUrl}/console/#/integrations/hello-components`);
  await page.getByRole('button', { name: 'Make an install link' }).click();
  await page.getByRole('alert').filter({ hasText: 'is private to organization "switchyard"' }).waitFor();
  await assertNothingCutOff(page, 'a refused link at 420 px');
  assert.deepEqual(pageErrors, []);
});
