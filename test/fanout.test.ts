import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { ROOT, startTestServer, waitFor } from './helpers/index.ts';
import { inspectionServer, receiver } from './inspection-support.ts';
import { capabilityOf } from '../src/server/capabilities.ts';

const FIXTURES = join(ROOT, 'test/fixtures/integrations');
process.env.KITCHEN_SINK_API_KEY = 'sk_test_kitchen';

test('platform events reach the handlers of active installations whose scopes allow them, with outcomes recorded', async (t) => {
  const s = await startTestServer(t, { integrations_dir: FIXTURES });
  const sink = await s.api('POST', '/api/v1/installations', { integration: 'kitchen-sink', configuration: { channel: 'c' } });
  const pendingSink = await s.api('POST', '/api/v1/installations', { integration: 'kitchen-sink', configuration: {} });
  const scopeless = await s.api('POST', '/api/v1/installations', { integration: 'scopeless' });
  assert.equal(sink.status, 201);
  assert.equal(scopeless.body.installation.status, 'active');

  const content = await s.api('POST', '/api/v1/events', { eventId: 'evt-content-1', type: 'space_content_updated', spaceId: 'sp1', revisionId: 'rev9' });
  assert.ok(content.status === 200 || content.status === 201 || content.status === 202, JSON.stringify(content.body));
  const runs = (eventId: string) =>
    s.services.store.db.prepare('SELECT installation_id, status, logs FROM invocations WHERE event_id = ? ORDER BY installation_id').all(eventId) as any[];
  await waitFor(() => runs('evt-content-1').length >= 1);
  // give any wrong extra dispatch a moment to show up before asserting there is none
  await new Promise((r) => setTimeout(r, 300));
  const contentRuns = runs('evt-content-1');
  assert.deepEqual(contentRuns.map((r) => r.installation_id), [sink.body.installation.id], 'only the active installation with the scope ran');
  assert.match(contentRuns[0].logs, /content updated sp1 rev9/);
  assert.ok(!contentRuns.some((r) => r.installation_id === pendingSink.body.installation.id));

  const feedback = {
    type: 'page_feedback',
    siteId: 'site1',
    spaceId: 'sp1',
    pageId: 'p1',
    feedback: { rating: 'bad', comment: 'meh' },
    visitor: { anonymousId: 'a', userAgent: 'ua', ip: '203.0.113.9', cookies: {} },
    url: 'https://docs.example.com/p1',
    referrer: '',
  };
  await s.api('POST', '/api/v1/events', { ...feedback, eventId: 'evt-feedback-1' });
  await waitFor(() => runs('evt-feedback-1').length === 1);
  const [failed] = runs('evt-feedback-1');
  assert.equal(failed.installation_id, scopeless.body.installation.id);
  assert.equal(failed.status, 500, 'a throwing handler is recorded as a failed outcome');
  assert.match(failed.logs, /feedback bad/);
});

test('webhook subscriptions follow installs, event_types edits and uninstall; a paused installation stays subscribed', async (t) => {
  const s = await startTestServer(t, { integrations_dir: join(ROOT, 'integrations') });
  const subs = (type: string) => capabilityOf(s.services, 'subscriptions').forEventType(type);
  assert.deepEqual(subs('site_view'), []);
  const r = await s.api('POST', '/api/v1/installations', {
    integration: 'webhook',
    configuration: { webhook_url: 'http://127.0.0.1:9/a', event_types: 'site_view, page_feedback' },
  });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  const id = r.body.installation.id;
  assert.deepEqual(subs('site_view'), [{ installationId: id, url: 'http://127.0.0.1:9/a' }]);
  assert.deepEqual(subs('space_content_updated'), []);
  await s.api('PATCH', `/api/v1/installations/${id}`, { configuration: { event_types: 'space_content_updated', webhook_url: 'http://127.0.0.1:9/b' } });
  assert.deepEqual(subs('site_view'), []);
  assert.deepEqual(subs('space_content_updated'), [{ installationId: id, url: 'http://127.0.0.1:9/b' }]);
  // A paused installation stays subscribed: its deliveries are stored held until it resumes.
  await s.api('POST', `/api/v1/installations/${id}/pause`);
  assert.deepEqual(subs('space_content_updated'), [{ installationId: id, url: 'http://127.0.0.1:9/b' }]);
  await s.api('POST', `/api/v1/installations/${id}/resume`);
  assert.equal(subs('space_content_updated').length, 1);
  const bad = await s.api('PATCH', `/api/v1/installations/${id}`, { configuration: { event_types: 'site_veiw' } });
  assert.equal(bad.status, 400);
  assert.equal(subs('space_content_updated').length, 1, 'a refused edit changes nothing');
  await s.api('DELETE', `/api/v1/installations/${id}`);
  assert.deepEqual(subs('space_content_updated'), []);
});

test('an event that names its installation is delivered to that webhook installation only; an unknown id reaches none', async (t) => {
  const s = await inspectionServer(t);
  const rx = await receiver(t, 200);
  const a = await s.subscribe(rx.url, ['site_view']);
  const b = await s.subscribe(rx.url, ['site_view']);
  const everyone = await s.send('site_view');
  assert.deepEqual(new Set(everyone.deliveries.map((d) => d.installationId)), new Set([a, b]));
  const forA = await s.send('site_view', { installationId: a });
  assert.deepEqual(forA.deliveries.map((d) => d.installationId), [a]);
  const settled = await s.settled(forA.deliveries[0].id);
  assert.equal(JSON.parse(settled.body).installationId, a, 'the delivered body names it');
  const nobody = await s.send('site_view', { installationId: 'inst_nobody' });
  assert.deepEqual(nobody.deliveries, []);
});
