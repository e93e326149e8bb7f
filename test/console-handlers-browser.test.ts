/**
 * The console's event detail in a real browser (Debian's Chromium): an event's handler runs with
 * their status and attempts, and the Replay button that runs a failed one again.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { startTestServer, waitFor } from './helpers/index.ts';
import { hasChromium, loginInBrowser, openBrowser, shot } from './console-support.ts';
import { receiver, recorderIntegration, siteView } from './handler-support.ts';

const skip = hasChromium() || process.env.CI ? false : 'Debian chromium is not installed (apt-get install -y chromium)';

test('an event shows its failed handler run; Replay runs it again until it is delivered', { skip }, async (t) => {
  const rx = await receiver(t);
  const [server, { page, pageErrors }] = await Promise.all([
    startTestServer(t, {
      integrations_dir: recorderIntegration(t),
      server: { shutdown_timeout: 300 },
      webhooks: { base_delay: 20, jitter: 0, max_retries: 1 },
    }),
    openBrowser(t),
  ]);
  const inst = await server.api('POST', '/api/v1/installations', { integration: 'recorder' });
  assert.equal(inst.status, 201);
  rx.state.fail = true;
  const event = siteView(rx.url);
  assert.equal((await server.api('POST', '/api/v1/events', event)).status, 202);
  await waitFor(async () => (await server.api('GET', `/api/v1/handler-runs?event=${event.eventId}&status=failed`)).body.handlerRuns.length === 1, 10_000);

  await loginInBrowser(page, server);
  await page.goto(`${server.url}/console/#/events/${event.eventId}`);
  await page.getByRole('heading', { name: `Event ${event.eventId}` }).waitFor();
  const row = page.locator('tr[data-handler-run]');
  await row.locator('.badge-failed').waitFor();
  assert.match(await row.innerText(), /2 \/ 2/);
  assert.match(await row.innerText(), /the receiver answered 500/);
  await shot(page, '20-handler-run-failed', row.locator('.badge-failed'));

  rx.state.fail = false;
  await row.getByRole('button', { name: /^Replay handler run hdl_/ }).click();
  // The panel follows the run live until the replayed attempt has succeeded.
  await row.locator('.badge-delivered').waitFor({ timeout: 15_000 });
  // The count starts again: one attempt (two when a loaded machine made the first one time out).
  assert.match(await row.innerText(), /\b[12] \/ 2\b/);
  assert.ok(rx.seen.has(event.eventId as string));
  await shot(page, '21-handler-run-replayed', row.locator('.badge-delivered'));
  assert.deepEqual(pageErrors, []);
});
