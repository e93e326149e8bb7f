/**
 * The console in a real browser (Debian's Chromium driven by playwright-core) against a real
 * server: log in, browse integrations, configure an installation through the generated form, press
 * a component's buttons, send an event and watch its delivery. Screenshots go to test-artifacts/.
 */
import assert from 'node:assert/strict';
import { cpSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { ROOT, waitFor } from './helpers/index.ts';
import { consoleIntegrations, consoleServer, FIRST_RENDER_MS, hasChromium, loginInBrowser, openBrowser, receiver, shot } from './console-support.ts';

// On a developer machine without Chromium the browser tests are skipped with the reason; in CI
// (.ci/run installs it) they must run, so a missing browser fails there instead of passing quietly.
const skip = hasChromium() || process.env.CI ? false : 'Debian chromium is not installed (apt-get install -y chromium)';

test('log in with the keyboard, see integrations with their status, errors, icon and manifest, log out', { skip }, async (t) => {
  const dir = consoleIntegrations(t);
  // One integration that cannot load, so its errors show.
  mkdirSync(join(dir, 'broken-one'));
  writeFileSync(join(dir, 'broken-one', 'platform-manifest.yaml'), 'name: broken-one\ntitle: Broken\nvisibility: everyone\n');
  const [server, { page, pageErrors }] = await Promise.all([consoleServer(t, { integrationsDir: dir }), openBrowser(t)]);

  await page.goto(`${server.consoleUrl}/console/`);
  const token = page.getByLabel('Admin token');
  await token.waitFor();
  assert.equal(await token.evaluate((el) => el === (globalThis as any).document.activeElement), true, 'the token field has focus');
  await page.keyboard.type('wrong-token');
  await page.keyboard.press('Enter');
  await page.getByRole('alert').getByText('that is not the admin token').waitFor();
  await shot(page, '01-login-error', page.getByRole('alert'));
  await token.fill(server.token);
  await page.keyboard.press('Enter');
  await page.getByRole('heading', { name: 'Integrations', level: 1 }).waitFor();

  const broken = page.locator('tr[data-integration="broken-one"]');
  await broken.locator('.badge-error').waitFor();
  assert.match(await broken.innerText(), /visibility/);
  const hello = page.locator('tr[data-integration="hello-components"]');
  await hello.locator('.badge-loaded').waitFor();
  const icon = hello.locator('img.icon');
  await waitFor(() => icon.evaluate((img: any) => img.complete && img.naturalWidth > 0));
  await shot(page, '02-integrations', broken.locator('.badge-error'));

  await page.getByRole('link', { name: 'Console kitchen sink' }).click();
  await page.getByRole('heading', { name: 'Console kitchen sink', level: 1 }).waitFor();
  await page.getByRole('heading', { name: 'Scopes' }).waitFor();
  assert.match(await page.locator('section', { has: page.getByRole('heading', { name: 'Scopes' }) }).innerText(), /space:content:read/);
  assert.match(await page.locator('section', { has: page.getByRole('heading', { name: 'Blocks' }) }).innerText(), /Kitchen sink\s+kitchen/);
  // The summary's Markdown is rendered, and its HTML stays text.
  const summary = page.locator('.summary');
  assert.equal(await summary.locator('strong').first().innerText(), 'test');
  assert.match(await summary.innerText(), /<script>alert\(1\)<\/script> stays text/);
  assert.equal(await summary.locator('script').count(), 0);
  await shot(page, '03-integration', summary);

  await page.getByRole('button', { name: 'Log out' }).click();
  await page.getByLabel('Admin token').waitFor();
  const api = await page.evaluate(async () => (await fetch('/api/v1/integrations')).status);
  assert.equal(api, 401, 'the session is gone after logout');
  assert.deepEqual(pageErrors, []);
});

test('configure a webhook installation through the form: a field error beside the field, then active', { skip }, async (t) => {
  const [server, hook, { page, pageErrors }] = await Promise.all([consoleServer(t), receiver(t), openBrowser(t)]);
  await loginInBrowser(page, server);

  await page.goto(`${server.consoleUrl}/console/#/installations?install=webhook`);
  await page.getByRole('button', { name: 'Install', exact: true }).click();
  await page.getByText('Copy these now').waitFor();
  assert.match(await page.locator('.notice').innerText(), /whsec_/);
  await page.getByRole('link', { name: 'Configure it' }).click();
  const status = page.getByTestId('installation-status');
  await status.getByText('pending').waitFor();

  await page.getByLabel('Webhook URL').fill('not a url');
  await page.getByLabel('Event types').fill('site_view');
  await page.getByRole('button', { name: 'Save configuration' }).click();
  const urlField = page.locator('[data-field="webhook_url"]');
  await urlField.locator('.field-error').getByText('"not a url" is not an http(s) URL').waitFor();
  assert.equal(await page.getByLabel('Webhook URL').getAttribute('aria-invalid'), 'true');
  assert.equal(
    await page.getByLabel('Webhook URL').evaluate((el) => el === (globalThis as any).document.activeElement),
    true,
    'focus moves to the refused field',
  );
  assert.equal(await page.locator('[data-field="event_types"] .field-error').count(), 0, 'only the bad field is marked');
  assert.equal(await status.innerText(), 'pending');
  await shot(page, '04-config-field-error', urlField.locator('.field-error'));

  await page.getByLabel('Webhook URL').fill(hook.url);
  await page.getByRole('button', { name: 'Save configuration' }).click();
  await status.getByText('active').waitFor();
  assert.equal(await page.locator('.field-error').count(), 0);
  await page.getByRole('status').getByText('Configuration saved. Status: active.').waitFor();
  await shot(page, '05-config-active', status);

  const id = page.url().split('/').pop()!;
  const stored = await server.api('GET', `/api/v1/installations/${id}`);
  assert.equal(stored.body.installation.status, 'active');
  assert.deepEqual(stored.body.installation.configuration, { webhook_url: hook.url, event_types: 'site_view', signature_scheme: 'platform' });
  assert.deepEqual(pageErrors, []);
});

test('every configuration type: enum dropdown, completion_url options, number, boolean and the OAuth button', { skip }, async (t) => {
  const [server, { context, page, pageErrors }] = await Promise.all([consoleServer(t), openBrowser(t)]);
  const installed = await server.api('POST', '/api/v1/installations', { integration: 'console-kitchen' });
  const { id, urls } = installed.body.installation;
  await loginInBrowser(page, server);
  await page.goto(`${server.consoleUrl}/console/#/installations/${id}`);

  const color = page.getByLabel('Color');
  await color.waitFor();
  assert.deepEqual(await color.locator('option').allInnerTexts(), ['— not set —', 'red', 'green', 'blue']);
  const flavour = page.getByLabel('Flavour');
  // Options come from the integration's /options, answered as {"options": [...]}.
  await waitFor(async () => (await flavour.locator('option').allInnerTexts()).includes('Chocolate'));
  assert.deepEqual(await flavour.locator('option').allInnerTexts(), ['— not set —', 'vanilla', 'Chocolate']);
  assert.equal(await page.getByLabel('Limit').inputValue(), '3', 'the default is shown');
  assert.equal(await page.getByLabel('Enabled').isChecked(), false);

  await page.getByLabel('Title').fill('Kitchen');
  await color.selectOption('green');
  await flavour.selectOption('chocolate');
  await page.getByLabel('Limit').fill('7');
  await page.getByLabel('Enabled').check();
  await page.getByRole('button', { name: 'Save configuration' }).click();
  await page.getByTestId('installation-status').getByText('active').waitFor();
  const stored = await server.api('GET', `/api/v1/installations/${id}`);
  assert.deepEqual(stored.body.installation.configuration, { title: 'Kitchen', color: 'green', flavour: 'chocolate', limit: 7, enabled: true });

  // A number the server refuses is shown beside its field.
  await page.getByLabel('Limit').fill('seven');
  await page.getByRole('button', { name: 'Save configuration' }).click();
  await page.locator('[data-field="limit"] .field-error').getByText('must be a number').waitFor();
  await shot(page, '06-config-every-type', '[data-field="limit"] .field-error');

  const [popup] = await Promise.all([context.waitForEvent('page'), page.getByRole('button', { name: 'Connect account' }).click()]);
  await popup.waitForLoadState();
  assert.equal(popup.url(), `${urls.publicEndpoint}/oauth`);
  assert.match(await popup.content(), /Pretend provider/);
  assert.deepEqual(pageErrors, []);
});

test("a component's buttons send their action and re-render with the new state; every element renders", { skip }, async (t) => {
  const [server, { page, pageErrors }] = await Promise.all([consoleServer(t), openBrowser(t)]);
  const hello = await server.api('POST', '/api/v1/installations', { integration: 'hello-components', configuration: { greeting: 'Howdy' } });
  const kitchen = await server.api('POST', '/api/v1/installations', { integration: 'console-kitchen' });
  await loginInBrowser(page, server);

  await page.goto(`${server.consoleUrl}/console/#/installations/${hello.body.installation.id}`);
  const counter = page.locator('[data-component="counter"]');
  // The first render loads the integration's isolate: under the whole suite that once took over 5 s.
  await counter.getByText('Howdy! Pressed 0 times.').waitFor({ timeout: FIRST_RENDER_MS });
  await counter.getByRole('button', { name: 'Press me' }).click();
  await counter.getByText('Howdy! Pressed 1 time.').waitFor();
  // With the keyboard: Enter presses, and focus stays on the button across the re-render.
  const press = counter.getByRole('button', { name: 'Press me' });
  await press.focus();
  await page.keyboard.press('Enter');
  await counter.getByText('Howdy! Pressed 2 times.').waitFor();
  assert.equal(await press.evaluate((el) => el === (globalThis as any).document.activeElement), true, 'focus stays on the button');
  await counter.getByRole('button', { name: 'Show state' }).click();
  assert.deepEqual(JSON.parse(await counter.locator('pre.state').innerText()), { count: 2 });
  await shot(page, '07-component-counter', counter);
  await counter.getByRole('button', { name: 'Reset' }).click();
  await counter.getByText('Howdy! Pressed 0 times.').waitFor();

  await page.goto(`${server.consoleUrl}/console/#/installations/${kitchen.body.installation.id}`);
  const sink = page.locator('[data-component="kitchen"]');
  await sink.getByText('Greeting:').waitFor();
  // Nothing is left over from the previous installation's page: this form is the kitchen's own.
  assert.equal(await page.getByLabel('Limit').inputValue(), '3');
  assert.equal(await page.getByLabel('Greeting').count(), 0);
  for (const type of [
    'block',
    'markdown',
    'hstack',
    'vstack',
    'box',
    'divider',
    'card',
    'image',
    'link',
    'input',
    'textinput',
    'select',
    'switch',
    'checkbox',
    'hint',
    'text',
    'button',
  ])
    assert.ok((await sink.locator(`[data-ck="${type}"], .ck-${type}`).count()) > 0, `${type} is rendered`);
  const unknown = sink.locator('[data-ck="unknown"]');
  assert.match(await unknown.innerText(), /Unsupported element stepper[\s\S]*inside an unknown element/);
  assert.ok(await unknown.isVisible(), 'an unknown element is a visible placeholder');
  assert.match(await sink.locator('.ck-markdown').innerText(), /<b>html<\/b> kept as text/);
  assert.equal(await sink.locator('a.ck-link').getAttribute('href'), 'https://example.com/docs');

  // Controls edit the state that the next action carries.
  await sink.getByLabel('Your name').fill('Ada');
  await sink.getByLabel('Size').selectOption('s');
  await sink.getByLabel('Subscribed').check();
  await sink.getByLabel('I agree').check();
  await sink.getByRole('button', { name: 'Greet' }).click();
  await sink.getByText('Hello, Ada!').waitFor();
  await sink.getByText('Size s, subscribed true, agree true').waitFor();
  await shot(page, '08-component-kitchen', sink.getByText('Hello, Ada!'));
  assert.deepEqual(pageErrors, []);
});

test('pause, resume and uninstall from the installations list', { skip }, async (t) => {
  const [server, { page, pageErrors }] = await Promise.all([consoleServer(t), openBrowser(t)]);
  const hello = await server.api('POST', '/api/v1/installations', { integration: 'hello-components', configuration: { greeting: 'Hi' } });
  const id = hello.body.installation.id;
  await loginInBrowser(page, server);
  await page.goto(`${server.consoleUrl}/console/#/installations`);
  const row = page.locator(`tr[data-installation="${id}"]`);
  await row.locator('.badge-active').waitFor();
  await row.getByRole('button', { name: 'Pause' }).click();
  await row.locator('.badge-paused').waitFor();
  await row.getByRole('button', { name: 'Resume' }).click();
  await row.locator('.badge-active').waitFor();
  await row.getByRole('button', { name: 'Uninstall…' }).click();
  await shot(page, '09-uninstall-confirm', row.getByRole('button', { name: 'Confirm uninstall' }));
  await row.getByRole('button', { name: 'Confirm uninstall' }).click();
  await row.waitFor({ state: 'detached' });
  const after = await server.api('GET', `/api/v1/installations/${id}`);
  assert.equal(after.body.installation.status, 'uninstalled');
  assert.deepEqual(pageErrors, []);
});

for (const mode of ['stream', 'polling'] as const) {
  test(`send a sample event, watch its delivery and attempts appear live (${mode}), open it and retry it`, { skip }, async (t) => {
    // The receiver refuses the first attempt: the automatic retry must show up without any click.
    const [server, hook, { page, pageErrors }] = await Promise.all([consoleServer(t, { retryDelayMs: 300 }), receiver(t, 1), openBrowser(t)]);
    // Without the server's event stream the page polls.
    if (mode === 'polling') await page.route('**/api/v1/deliveries/stream*', (r) => r.fulfill({ status: 404, body: '' }));
    const sub = await server.api('POST', '/api/v1/installations', {
      integration: 'webhook',
      configuration: { webhook_url: hook.url, event_types: 'site_view,page_feedback' },
    });
    assert.equal(sub.status, 201);
    await loginInBrowser(page, server);
    await page.getByRole('link', { name: 'Events', exact: true }).click();
    await page.getByText('Send an event to watch its deliveries here').waitFor();
    await page.locator(mode === 'polling' ? '.live[data-live="polling"]' : '.live[data-live="stream"], .live[data-live="polling"]').waitFor();

    await page.getByLabel('Event type').selectOption('page_feedback');
    await waitFor(async () => JSON.parse(await page.getByLabel('Payload (JSON)').inputValue()).type === 'page_feedback');
    await page.getByRole('button', { name: 'Send event' }).click();
    await page.getByTestId('sent-event').getByText('1 delivery').waitFor();
    const eventId = /evt_[0-9a-f]+/.exec(await page.getByTestId('sent-event').innerText())?.[0];
    assert.ok(eventId);

    // The row appears, and turns delivered after the automatic retry, with no reload or click.
    const row = page.locator('tr[data-delivery]', { hasText: eventId });
    await row.locator('.badge-delivered').waitFor();
    assert.match(await row.innerText(), /\b2\s+2 of 4 automatic/);
    assert.equal(hook.bodies.length, 2);
    assert.equal(JSON.parse(hook.bodies[1]).sourceEventId, eventId);
    await shot(page, `10-deliveries-${mode}`, row.locator('.badge-delivered'));

    // It opens beside the list on the Deliveries page, at an address of its own.
    await row.getByRole('link').first().click();
    await page.getByRole('heading', { name: /^Delivery dlv_/ }).waitFor();
    assert.match(page.url(), /#\/deliveries\/dlv_[0-9a-z]+\?event=/);
    // Its own eventId (what the receiver got), the event it comes from, and the signature header by name.
    const deliveryId = /dlv_[0-9a-z]+/.exec(page.url())![0];
    assert.equal(JSON.parse(hook.bodies[1]).eventId, deliveryId);
    assert.equal(await page.getByTestId('delivery-event-id').innerText(), deliveryId);
    assert.equal(await page.getByTestId('delivery-source-event').innerText(), eventId);
    assert.match(await page.getByTestId('delivery-signature').innerText(), /^X-Platform-Signature: t=\d+,v1=[0-9a-f]{64}$/);
    assert.match(await page.locator('tr[data-attempt="1"]').innerText(), /500\s+retry/);
    assert.match(await page.locator('tr[data-attempt="2"]').innerText(), /200/);
    // A retry asks first, naming where it will send.
    await page.getByRole('button', { name: 'Retry now…' }).click();
    assert.ok((await page.locator('.confirm').innerText()).includes(`Send this delivery to ${hook.url} once more`));
    assert.equal(hook.bodies.length, 2, 'nothing is sent before the confirmation');
    await page.getByRole('button', { name: 'Send now' }).click();
    const manual = page.locator('tr[data-attempt="3"]');
    await manual.getByText('manual').waitFor();
    assert.match(await manual.innerText(), /200/);
    assert.equal(hook.bodies.length, 3);
    await shot(page, `11-delivery-retried-${mode}`, manual.locator('.badge'));
    assert.deepEqual(pageErrors, []);
  });
}

test('an address changed while the console is first drawn (a link followed at once after logging in) is followed', { skip }, async (t) => {
  const [server, { page, pageErrors }] = await Promise.all([consoleServer(t), openBrowser(t)]);
  await page.goto(`${server.consoleUrl}/console/`);
  await page.getByLabel('Admin token').fill(server.token);
  // The moment the Integrations heading is in the document (before the page's effects have run),
  // the address changes: the page must follow it.
  await page.evaluate(() => {
    const g = globalThis as any;
    const seen = new g.MutationObserver(() => {
      if (!g.document.querySelector('[data-page-title]')) return;
      seen.disconnect();
      g.location.hash = '#/catalogue';
    });
    seen.observe(g.document.body, { childList: true, subtree: true });
  });
  await page.getByRole('button', { name: 'Log in' }).click();
  await page.getByRole('heading', { name: 'Catalogue', level: 1 }).waitFor();
  assert.deepEqual(pageErrors, []);
});

test('an Install link preselects its integration, or says why it cannot be installed and preselects nothing else', { skip }, async (t) => {
  // oauth-example without its variables: it needs configuration, so it is not loaded.
  const dir = consoleIntegrations(t);
  cpSync(join(ROOT, 'integrations/oauth-example'), join(dir, 'oauth-example'), { recursive: true });
  const [server, { page, pageErrors }] = await Promise.all([consoleServer(t, { integrationsDir: dir }), openBrowser(t)]);
  await loginInBrowser(page, server);

  await page.goto(`${server.consoleUrl}/console/#/integrations/oauth-example`);
  await page.getByRole('link', { name: 'Install oauth-example' }).click();
  const select = page.getByLabel('Integration', { exact: true });
  await select.waitFor();
  const why = page.getByTestId('install-refused');
  await why.getByText('oauth-example cannot be installed now').waitFor();
  assert.match(await why.innerText(), /needs_configuration[\s\S]*OAUTH_EXAMPLE_CLIENT_ID/);
  assert.equal(await select.inputValue(), '', 'no other integration is chosen in its place');
  assert.equal(await page.getByRole('button', { name: 'Install', exact: true }).isDisabled(), true);
  await shot(page, '12-install-not-loaded', why);
  const before = (await server.api('GET', '/api/v1/installations')).body.installations.length;
  await page.getByRole('button', { name: 'Install', exact: true }).click({ force: true });
  assert.equal((await server.api('GET', '/api/v1/installations')).body.installations.length, before, 'nothing was installed');

  // A loaded one is chosen; another Install link on the same page chooses that one.
  await page.goto(`${server.consoleUrl}/console/#/installations?install=webhook`);
  await waitFor(async () => (await select.inputValue()) === 'webhook');
  assert.equal(await why.count(), 0);
  await page.goto(`${server.consoleUrl}/console/#/installations?install=console-kitchen`);
  await waitFor(async () => (await select.inputValue()) === 'console-kitchen');
  await page.getByRole('button', { name: 'Install', exact: true }).click();
  await page.getByText('Copy these now').waitFor();
  const made = (await server.api('GET', '/api/v1/installations')).body.installations;
  assert.deepEqual(
    made.map((i: { integration: string }) => i.integration),
    ['console-kitchen'],
  );
  assert.deepEqual(pageErrors, []);
});
