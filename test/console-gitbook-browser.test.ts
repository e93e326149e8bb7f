/**
 * GitBook-manifest integrations in the console, in a real browser (Debian's Chromium) against a
 * real server: the integrations list and their pages fit a 420 px screen (a long problem too); a
 * space installation's form is the manifest's `configurations.space`; blocks render with the
 * context GitBook gives a block in a document, and a render that fails shows its error and a link
 * to its log entry. Screenshots go to test-artifacts/console-7*.png, each after the checks of
 * assertInSight.
 */
import assert from 'node:assert/strict';
import { cpSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { ROOT, tmpDir } from './helpers/index.ts';
import { assertNothingCutOff, consoleServer, FIRST_RENDER_MS, hasChromium, loginInBrowser, openBrowser, shot } from './console-support.ts';

const skip = hasChromium() || process.env.CI ? false : 'Debian chromium is not installed (apt-get install -y chromium)';

/**
 * hello-components beside two GitBook-manifest integrations: the console's gb-blocks (blocks, and a
 * `configurations.space` section) and gb-connect, whose secrets are not set (a long problem).
 */
function gitbookIntegrations(t: TestContext): string {
  const dir = join(tmpDir(t, 'switchyard-console-gitbook-'), 'integrations');
  mkdirSync(dir);
  cpSync(join(ROOT, 'integrations/hello-components'), join(dir, 'hello-components'), { recursive: true });
  cpSync(join(ROOT, 'test/fixtures/console/gb-blocks'), join(dir, 'gb-blocks'), { recursive: true });
  cpSync(join(ROOT, 'test/fixtures/gitbook/gb-connect'), join(dir, 'gb-connect'), { recursive: true });
  return dir;
}

test('a GitBook space installation: the list and pages fit 420 px, the form is configurations.space and saves', { skip }, async (t) => {
  const [s, { page, pageErrors }] = await Promise.all([consoleServer(t, { integrationsDir: gitbookIntegrations(t) }), openBrowser(t)]);
  const installed = await s.api('POST', '/api/v1/installations', { integration: 'gb-blocks', space: 'space_docs' });
  assert.equal(installed.status, 201, JSON.stringify(installed.body));
  const id: string = installed.body.installation.id;
  assert.equal(installed.body.installation.status, 'pending');
  await loginInBrowser(page, s);
  await page.setViewportSize({ width: 420, height: 860 });

  // The list: the GitBook integrations with their problems, nothing out of sight.
  await page.goto(`${s.consoleUrl}/console/#/integrations`);
  const connect = page.locator('[data-integration="gb-connect"]');
  await connect.locator('.problems').waitFor();
  await page.locator('[data-integration="gb-blocks"] .badge-loaded').waitFor();
  await assertNothingCutOff(page, 'the GitBook integrations at 420 px');
  await shot(page, '70-gitbook-integrations-narrow', connect.locator('.problems li').first());

  // An integration's page lists the space section's properties.
  await page.goto(`${s.consoleUrl}/console/#/integrations/gb-blocks`);
  const properties = page.locator('section', { has: page.getByRole('heading', { name: 'Configuration properties' }) });
  await properties.getByRole('heading', { name: /^Space installations/ }).waitFor();
  for (const name of ['form_id', 'email', 'subject', 'notify']) assert.match(await properties.innerText(), new RegExp(`\\b${name}\\b`));
  await assertNothingCutOff(page, 'a GitBook integration at 420 px');
  await shot(page, '71-gitbook-integration-narrow', properties.getByRole('heading', { name: /^Space installations/ }));
  await page.goto(`${s.consoleUrl}/console/#/integrations/gb-connect`);
  await page.getByRole('heading', { name: 'Errors' }).waitFor();
  await assertNothingCutOff(page, 'a GitBook integration with problems at 420 px');

  // The installation's form is configurations.space: its fields, saved, and the installation active.
  await page.goto(`${s.consoleUrl}/console/#/installations/${id}`);
  const form = page.getByLabel('Form id');
  await form.waitFor();
  assert.equal(await page.getByLabel('Subject').inputValue(), 'New submission', 'the default is shown');
  await form.fill('f_123');
  await page.getByLabel('Email').fill('team@example.com');
  await page.getByLabel('Notify').check();
  await page.getByRole('button', { name: 'Save configuration' }).click();
  await page.getByTestId('installation-status').getByText('active').waitFor();
  const stored = await s.api('GET', `/api/v1/installations/${id}`);
  assert.deepEqual(stored.body.installation.configuration, { form_id: 'f_123', email: 'team@example.com', subject: 'New submission', notify: true });
  await assertNothingCutOff(page, 'a GitBook space installation at 420 px');
  await shot(page, '72-gitbook-space-form-narrow', page.getByTestId('installation-status'));
  assert.deepEqual(pageErrors, []);
});

test("GitBook blocks render with a document's context; a render that fails shows its error and a link to its log entry", { skip }, async (t) => {
  const [s, { page, pageErrors }] = await Promise.all([consoleServer(t, { integrationsDir: gitbookIntegrations(t) }), openBrowser(t)]);
  const installed = await s.api('POST', '/api/v1/installations', { integration: 'gb-blocks', space: 'space_docs', configuration: { form_id: 'f_1' } });
  assert.equal(installed.body.installation.status, 'active');
  const id: string = installed.body.installation.id;
  await loginInBrowser(page, s);

  await page.goto(`${s.consoleUrl}/console/#/installations/${id}`);
  const diagram = page.locator('[data-component="diagram"]');
  // The first render loads the integration's isolate: under the whole suite that once took over 5 s.
  await diagram.getByText('Diagram (editable)').waitFor({ timeout: FIRST_RENDER_MS });
  assert.match(await diagram.locator('[data-ck="codeblock"]').innerText(), /graph TD\s+A --> B/);
  await shot(page, '73-gitbook-block', diagram.getByText('Diagram (editable)'));

  // The broken block: its error, not a bare "Internal server error", and where its log is.
  const broken = page.locator('[data-component="broken"]');
  const error = broken.getByRole('alert');
  await error.getByText('Error: the broken block failed on purpose').waitFor();
  const link = error.getByRole('link', { name: /^Its log entry/ });
  const requestId = (await link.getAttribute('href'))!.replace(/^#\/logs\//, '');
  assert.match(requestId, /^\S+$/);
  await shot(page, '74-gitbook-block-failed', error);
  await page.setViewportSize({ width: 420, height: 860 });
  await assertNothingCutOff(page, 'the GitBook blocks at 420 px');
  await shot(page, '75-gitbook-blocks-narrow', error);

  await link.click();
  const entry = page.locator(`li.invocation[data-request-id="${requestId}"]`);
  await entry.waitFor();
  assert.match(await entry.innerText(), /gb-blocks[\s\S]*ui_render[\s\S]*500[\s\S]*exception[\s\S]*Error: the broken block failed on purpose/);
  assert.equal(await page.locator('li.invocation').count(), 1, 'only that entry');
  await assertNothingCutOff(page, 'one log entry at 420 px');
  await shot(page, '76-log-entry-narrow', entry.locator('.badge'));
  assert.deepEqual(pageErrors, []);
});
