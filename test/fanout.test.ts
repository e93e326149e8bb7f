import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { ROOT, sql, startTestServer, waitFor } from './helpers/index.ts';
import { inspectionServer, receiver } from './inspection-support.ts';
import { capabilityOf } from '../src/module/capabilities.ts';
import { samplePayload } from '../src/events/index.ts';
import { connectStore } from '../src/store/index.ts';
import { allMigrations } from '../src/server/migrations.ts';
import { webhooksMigrations } from '../src/webhooks/schema.ts';

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
    sql.all(s.services.store, 'SELECT installation_id, status, logs FROM invocations WHERE event_id = ? ORDER BY installation_id', [eventId]);
  await waitFor(async () => (await runs('evt-content-1')).length >= 1);
  // give any wrong extra dispatch a moment to show up before asserting there is none
  await new Promise((r) => setTimeout(r, 300));
  const contentRuns = await runs('evt-content-1');
  assert.deepEqual(
    contentRuns.map((r) => r.installation_id),
    [sink.body.installation.id],
    'only the active installation with the scope ran',
  );
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
  await waitFor(async () => (await runs('evt-feedback-1')).length === 1);
  const [failed] = await runs('evt-feedback-1');
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
  assert.deepEqual(
    forA.deliveries.map((d) => d.installationId),
    [a],
  );
  const settled = await s.settled(forA.deliveries[0].id);
  assert.equal(JSON.parse(settled.body).installationId, a, 'the delivered body names it');
  const nobody = await s.send('site_view', { installationId: 'inst_nobody' });
  assert.deepEqual(nobody.deliveries, []);
});

/** A URL whose host is `length` random characters (no DNS name is longer than 253). */
const hugeUrl = (length = 3500) =>
  `https://${randomBytes(length)
    .toString('base64url')
    .slice(0, length)
    .toLowerCase()
    .replace(/[^a-z0-9]/g, 'x')}.example/hook`;

test("stored texts have limits, answered 400 naming the field: a webhook installation's own token cannot store a 3.5 kB URL, and every subscriber keeps receiving", async (t) => {
  const s = await startTestServer(t, { integrations_dir: join(ROOT, 'integrations') });
  const rx = await receiver(t, 200);
  const install = (body: Record<string, unknown>) => s.api('POST', '/api/v1/installations', { integration: 'webhook', ...body });
  const a = await install({ configuration: { webhook_url: rx.url, event_types: 'site_view' } });
  const b = await install({ configuration: { webhook_url: rx.url, event_types: 'site_view' } });
  assert.equal(b.status, 201, JSON.stringify(b.body));
  const refused = (r: { status: number; body: any }, where: string, message: RegExp) => {
    assert.equal(r.status, 400, JSON.stringify(r.body).slice(0, 400));
    const problem = (r.body.error.problems ?? [r.body.error]).find((p: { where: string }) => p.where === where);
    assert.ok(problem, `${where} is named: ${JSON.stringify(r.body.error).slice(0, 400)}`);
    assert.match(problem.message, message);
    assert.ok(JSON.stringify(r.body).length < 2000, 'the answer does not repeat what was refused');
  };

  // The installation's own token, as an integration's code or a leaked token could use it.
  const huge = hugeUrl();
  const own = await s.api('PATCH', `/api/v1/installations/${b.body.installation.id}`, { configuration: { webhook_url: huge } }, b.body.token);
  refused(own, 'configuration.webhook_url', /at most 2048 characters/);
  refused(await install({ configuration: { webhook_url: huge, event_types: 'site_view' } }), 'configuration.webhook_url', /at most 2048 characters/);
  refused(
    await install({ configuration: { webhook_url: 'https://hooks.example/a\u0000b', event_types: 'site_view' } }),
    'configuration.webhook_url',
    /control character/,
  );
  refused(await install({ configuration: { webhook_url: rx.url, event_types: Array(8000).fill('site_view').join(',') } }), 'configuration', /at most 64 kB/);
  refused(
    await install({ target: 'space', space: 's'.repeat(201), configuration: { webhook_url: rx.url, event_types: 'site_view' } }),
    'space',
    /at most 200 characters/,
  );
  refused(
    await install({ target: 'site', site: 's'.repeat(201), configuration: { webhook_url: rx.url, event_types: 'site_view' } }),
    'site',
    /at most 200 characters/,
  );
  refused(
    await install({ configuration: { webhook_url: rx.url, event_types: 'site_view' }, externalIds: ['e'.repeat(201)] }),
    'externalIds[0]',
    /at most 200 characters/,
  );
  refused(
    await install({ configuration: { webhook_url: rx.url, event_types: 'site_view' }, externalIds: Array.from({ length: 101 }, (_, i) => `e${i}`) }),
    'externalIds',
    /at most 100 items/,
  );
  refused(
    await install({ configuration: { webhook_url: rx.url, event_types: 'site_view' }, webhook_secret: 'w'.repeat(257) }),
    'webhook_secret',
    /at most 256 characters/,
  );
  refused(await s.api('POST', `/api/v1/webhooks/${a.body.installation.id}/secret/rotate`, { secret: 'w'.repeat(257) }), 'secret', /at most 256 characters/);
  refused(await s.api('POST', '/api/v1/events', samplePayload('site_view', { installationId: 'i'.repeat(201) })), 'installationId', /at most 200 characters/);
  // The GitBook-style route an integration's code updates its installation with: the same limits.
  const gitbook = await s.api('PATCH', `/api/v1/integrations/webhook/installations/${b.body.installation.id}`, { externalIds: ['e'.repeat(201)] });
  assert.equal(gitbook.status, 400, JSON.stringify(gitbook.body).slice(0, 400));

  // Nothing of it was stored; every subscriber still gets its delivery.
  const sent = await s.api('POST', '/api/v1/events', samplePayload('site_view'));
  assert.equal(sent.status, 202, JSON.stringify(sent.body).slice(0, 400));
  assert.deepEqual(
    new Set(sent.body.deliveries.map((d: { installationId: string }) => d.installationId)),
    new Set([a.body.installation.id, b.body.installation.id]),
  );
  const deliveries = capabilityOf(s.services, 'deliveries');
  for (const { id } of sent.body.deliveries) await waitFor(async () => (await deliveries.get(id))?.status === 'delivered');
});

test("a webhook URL stored before the limits (a 3.5 kB host) cannot fail anyone's ingest on either engine: origins are kept to 300 characters, older ones cut when the store opens", async (t) => {
  const over = { integrations_dir: join(ROOT, 'integrations') };
  const first = await startTestServer(t, over);
  const rx = await receiver(t, 200);
  const install = async (url: string) => {
    const r = await first.api('POST', '/api/v1/installations', { integration: 'webhook', configuration: { webhook_url: url, event_types: 'site_view' } });
    assert.equal(r.status, 201, JSON.stringify(r.body));
    return r.body.installation.id as string;
  };
  const a = await install(rx.url);
  const b = await install('http://127.0.0.1:9/b');
  assert.equal((await first.api('POST', `/api/v1/installations/${b}/pause`)).status, 200);
  const held = await first.api('POST', '/api/v1/events', samplePayload('site_view'));
  assert.equal(held.status, 202);
  await first.close();

  // What an older version let through: the URL in the configuration, and a held delivery to it whose
  // origin is the whole host (held: outside the due index, so PostgreSQL took it), in a store whose
  // webhooks schema predates the step that cuts origins.
  const huge = hugeUrl();
  const store = await connectStore(first.config.data_dir, { url: first.config.store || undefined, migrations: allMigrations() });
  await sql.run(store, 'UPDATE installations SET configuration = ? WHERE id = ?', [JSON.stringify({ webhook_url: huge, event_types: 'site_view' }), b]);
  assert.equal(
    (await sql.run(store, "UPDATE webhook_deliveries SET url = ?, origin = ? WHERE installation_id = ? AND status = 'held'", [huge, new URL(huge).origin, b]))
      .changes,
    1,
  );
  const steps = store.engine === 'postgres' ? webhooksMigrations.postgres! : webhooksMigrations.steps;
  await sql.run(store, "UPDATE schema_migrations SET version = ? WHERE module = 'webhooks'", [
    steps.findIndex((step) => step.includes('substr(origin, 1, 300)')),
  ]);
  await store.close();

  const s = await startTestServer(t, { ...over, data_dir: first.config.data_dir, store: first.config.store });
  const origins = async () =>
    (await sql.all<{ origin: string }>(s.services.store, 'SELECT origin FROM webhook_deliveries WHERE installation_id = ?', [b])).map((r) => r.origin);
  assert.deepEqual(
    (await origins()).map((o) => o.length),
    [300],
    "the held delivery's origin was cut when the store opened",
  );
  assert.ok(new URL(huge).origin.startsWith((await origins())[0]!));
  // Resumed: its held delivery becomes due (enters the due index).
  assert.equal((await s.api('POST', `/api/v1/installations/${b}/resume`)).status, 200);
  // Every ingest of the type it takes still succeeds, single and batched, and the others are delivered.
  const one = await s.api('POST', '/api/v1/events', samplePayload('site_view'));
  assert.equal(one.status, 202, JSON.stringify(one.body).slice(0, 400));
  const batch = await s.api('POST', '/api/v1/events', [samplePayload('site_view'), samplePayload('site_view')]);
  assert.equal(batch.status, 202, JSON.stringify(batch.body).slice(0, 400));
  assert.equal(batch.body.stored, 2);
  const deliveries = capabilityOf(s.services, 'deliveries');
  const toA = [one.body, ...batch.body.results]
    .flatMap((r: { deliveries: Array<{ id: string; installationId: string }> }) => r.deliveries)
    .filter((d) => d.installationId === a);
  assert.equal(toA.length, 3);
  for (const { id } of toA) await waitFor(async () => (await deliveries.get(id))?.status === 'delivered');
  const cut = await origins();
  assert.ok(cut.length === 4 && cut.every((o) => o.length === 300), 'every origin of its deliveries is held to 300 characters');
  assert.equal((await fetch(`${s.url}/healthz`)).status, 200);
});
