/**
 * The console's Events page in a real browser (Debian's Chromium) against a real server: the
 * recent events with the filters of `switchyard events list` (type, installation, time), kept in
 * the address and answered by the server, paged by its cursor; an opened event shows its own
 * deliveries, and the send form's deliveries say whose they are. Screenshots go to
 * test-artifacts/console-8*.png, each after the checks of assertInSight.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Page } from 'playwright-core';
import { samplePayload } from '../src/events/index.ts';
import { waitFor } from './helpers/index.ts';
import { assertNothingCutOff, hasChromium, loginInBrowser, openBrowser, shot } from './console-support.ts';
import { inspectionServer, receiver, type InspectionServer } from './inspection-support.ts';

const skip = hasChromium() || process.env.CI ? false : 'Debian chromium is not installed (apt-get install -y chromium)';

const rowIds = (page: Page) => page.locator('tr[data-event]').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-event')));
const apiIds = async (s: InspectionServer, query: string) =>
  ((await s.api('GET', `/api/v1/events?limit=50&${query}`)).body.events as Array<{ eventId: string }>).map((e) => e.eventId);

test('events: the recent ones filtered by type, installation and time, paged by cursor; an opened event shows its own deliveries', { skip }, async (t) => {
  const [s, ok, { page, pageErrors }] = await Promise.all([inspectionServer(t, { server: { shutdown_timeout: 300 } }), receiver(t, 200), openBrowser(t)]);
  const hook = await s.subscribe(ok.url, ['site_view', 'page_feedback']);
  // 52 site views, one page_feedback, and one event sent to the webhook installation alone.
  const batch = Array.from({ length: 52 }, () => samplePayload('site_view'));
  assert.equal((await s.api('POST', '/api/v1/events', batch)).status, 202);
  const feedback = await s.send('page_feedback');
  const targeted = await s.send('site_view', { installationId: hook });
  assert.equal(targeted.deliveries.length, 1);

  await loginInBrowser(page, s);
  await page.getByRole('link', { name: 'Events', exact: true }).click();
  await page.getByRole('heading', { name: 'Recent events' }).waitFor();
  // Newest first, 50 to a page, as the API answers; older ones by its cursor.
  await waitFor(async () => (await rowIds(page)).length === 50);
  assert.deepEqual(await rowIds(page), await apiIds(s, ''));
  assert.equal((await rowIds(page))[0], targeted.eventId);
  const first = page.locator(`tr[data-event="${feedback.eventId}"]`);
  assert.match(await first.innerText(), /page_feedback[\s\S]*every subscriber[\s\S]*\b1\b[\s\S]*\d{4}-\d\d-\d\d \d\d:\d\d:\d\d/);
  await page.getByRole('link', { name: 'Older →' }).click();
  await waitFor(async () => (await rowIds(page)).length === 4);
  assert.match(page.url(), /#\/events\?cursor=\d+/);
  await page.getByRole('link', { name: '← Newest' }).click();
  await waitFor(async () => (await rowIds(page)).length === 50);

  // Each filter is the server's, and the address keeps it.
  await page.getByLabel('Type', { exact: true }).selectOption('page_feedback');
  await waitFor(async () => JSON.stringify(await rowIds(page)) === JSON.stringify([feedback.eventId]));
  assert.match(page.url(), /type=page_feedback/);
  await page.getByLabel('Type', { exact: true }).selectOption('');
  await page.getByLabel('Installation').selectOption(hook);
  await waitFor(async () => JSON.stringify(await rowIds(page)) === JSON.stringify([targeted.eventId]));
  assert.deepEqual(await rowIds(page), await apiIds(s, `installation=${hook}`));
  assert.match(await page.locator(`tr[data-event="${targeted.eventId}"]`).innerText(), new RegExp(hook));
  await page.getByLabel('Time').selectOption('custom');
  await page.getByLabel('From').fill('2001-01-01T00:00:00');
  await page.getByLabel('To').fill('2001-01-02T00:00:00');
  await page.getByText('No event matches these filters.').waitFor();
  assert.match(page.url(), /until=2001-01-0/);
  await page.getByRole('link', { name: /^Clear 3 filters$/ }).click();
  await waitFor(async () => (await rowIds(page)).length === 50);

  // An opened event: its own deliveries under its own heading, the filters kept in the address.
  // Its delivery is delivered before the event is opened (a loaded machine can take a while), so
  // the panel finds it so.
  await waitFor(async () => (await s.api('GET', `/api/v1/deliveries?event=${feedback.eventId}`)).body.deliveries?.[0]?.status === 'delivered', 30_000).catch(
    async (e) => {
      // Said with the delivery's own record if it happens: which state it is in, and its attempts.
      const listed = (await s.api('GET', `/api/v1/deliveries?event=${feedback.eventId}`)).body.deliveries ?? [];
      const details = await Promise.all(listed.map(async (d: { id: string }) => (await s.api('GET', `/api/v1/deliveries/${d.id}`)).body));
      throw new Error(`the event's delivery is not delivered after 30 s: ${JSON.stringify(details)}`, { cause: e });
    },
  );
  await page.getByLabel('Type', { exact: true }).selectOption('page_feedback');
  await page.locator(`tr[data-event="${feedback.eventId}"] a`).first().click();
  const panel = page.locator('section.event');
  await panel.getByRole('heading', { name: `Event ${feedback.eventId}` }).waitFor();
  assert.match(page.url(), new RegExp(`#/events/${feedback.eventId}\\?type=page_feedback`));
  await panel.locator('tr[data-delivery] .badge-delivered').waitFor();
  assert.equal(await panel.getByRole('heading', { name: 'Its deliveries' }).count(), 1);
  assert.equal(await page.getByRole('heading', { name: 'Its deliveries' }).count(), 1, 'the only "Its deliveries" is the opened event\'s');
  assert.match(await page.locator('#sent-deliveries').innerText(), /^Deliveries of the event sent/);
  await shot(page, '80-event-open', panel.locator('tr[data-delivery] .badge-delivered'));
  await page.setViewportSize({ width: 420, height: 860 });
  await assertNothingCutOff(page, 'the events page with an event open at 420 px');
  await shot(page, '81-events-narrow', page.locator(`tr[data-event="${feedback.eventId}"] a`).first());
  await panel.getByRole('link', { name: 'Close' }).click();
  await panel.waitFor({ state: 'detached' });
  assert.match(page.url(), /#\/events\?type=page_feedback$/);
  assert.deepEqual(pageErrors, []);
});
