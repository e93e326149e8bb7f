/**
 * What the console's deliveries page and charts ask of the management API: the endpoint (URL
 * origin) filter, a dry run of a replay narrowed by type and endpoint, and per-endpoint statistics
 * in time buckets computed in SQL (counts by status, nearest-rank percentiles of latency and
 * response time).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { openStore } from '../src/store/index.ts';
import { createQueue, deliveryStats, statsQueries, type Delivery, type DeliveryStats } from '../src/webhooks/index.ts';
import { SwitchyardError } from '../src/errors.ts';
import { tmpDir } from './helpers/index.ts';
import { inspectionServer, receiver } from './inspection-support.ts';
import { allMigrations } from '../src/server/migrations.ts';

const MIN = 60_000;
/** A minute boundary, so buckets are predictable. */
const T0 = Date.UTC(2025, 0, 31, 12, 0, 0);

test('statistics per endpoint and minute: counts by status now, p50/p95/max of latency and response time, in SQL', async (t) => {
  const store = openStore(tmpDir(t), { migrations: allMigrations() });
  t.after(() => store.close());
  const queue = createQueue(store.database, { maxAttempts: () => 4 });
  let n = 0;
  /** One delivery created at `at`, with one attempt of `durationMs`, ending in `status` at `at + latencyMs`. */
  const delivery = async (url: string, at: number, status: 'delivered' | 'failed' | 'pending', latencyMs = 0, durationMs = 0, installationId = 'ins_a') => {
    const c = (await queue.enqueue(store.database, { eventId: `evt_${n++}`, eventType: 'site_view', installationId, url, body: '{}', now: at }))!;
    if (status === 'pending') return;
    await queue.completeMany(store.database, [
      {
        seq: c.seq,
        attempt: {
          manual: false,
          startedAt: at + latencyMs - durationMs,
          durationMs,
          url,
          signatureHeader: null,
          status: status === 'delivered' ? 200 : 400,
          outcome: status === 'delivered' ? 'success' : 'failed',
          error: null,
          errorCode: null,
          responseExcerpt: null,
          responseTruncated: false,
          nextAttemptAt: null,
        },
        next: { status, attempts: 1, nextAttemptAt: null, completedAt: at + latencyMs },
        now: at + latencyMs,
      },
    ]);
  };
  // Endpoint A, minute 0: ten delivered (latency 100..1000 ms, attempts 10..100 ms) and one failed (5 ms).
  for (let i = 1; i <= 10; i++) await delivery('https://a.example/hooks', T0 + i * 1000, 'delivered', 100 * i, 10 * i);
  await delivery('https://a.example/other', T0 + 30_000, 'failed', 5, 5);
  // Minute 2: two more delivered (50 and 70 ms).
  await delivery('https://a.example/hooks', T0 + 2 * MIN, 'delivered', 50, 20);
  await delivery('https://a.example/hooks', T0 + 2 * MIN + 1, 'delivered', 70, 30);
  // Endpoint B, minute 1: one still pending; and one long before the window.
  await delivery('https://b.example:8443/x', T0 + MIN + 5, 'pending', 0, 0, 'ins_b');
  await delivery('https://b.example:8443/x', T0 - 10 * MIN, 'delivered', 10, 10, 'ins_b');

  const stats = await deliveryStats(store.database, { since: T0 + 20_000, until: T0 + 5 * MIN, bucketMs: MIN });
  assert.equal(stats.since, new Date(T0).toISOString(), 'the window starts on a bucket boundary');
  assert.deepEqual(
    stats.endpoints.map((e) => [e.endpoint, e.total, e.byStatus]),
    [
      ['https://a.example', 13, { delivered: 12, failed: 1 }],
      ['https://b.example:8443', 1, { pending: 1 }],
    ],
    'per origin, busiest first; nothing from before the window',
  );
  const [a, b] = stats.endpoints;
  assert.deepEqual(a.buckets, [
    {
      at: new Date(T0).toISOString(),
      counts: { delivered: 10, failed: 1 },
      latency: { count: 10, p50: 500, p95: 1000, max: 1000 },
      // 5, 10, 20, ..., 100: rank 6 of 11 is 50; rank 11 is 100.
      response: { count: 11, p50: 50, p95: 100, max: 100 },
    },
    {
      at: new Date(T0 + 2 * MIN).toISOString(),
      counts: { delivered: 2 },
      latency: { count: 2, p50: 50, p95: 70, max: 70 },
      response: { count: 2, p50: 20, p95: 30, max: 30 },
    },
  ]);
  assert.deepEqual(b.buckets, [{ at: new Date(T0 + MIN).toISOString(), counts: { pending: 1 }, latency: null, response: null }]);

  const onlyB = await deliveryStats(store.database, { since: T0 - 20 * MIN, until: T0 + 5 * MIN, bucketMs: 5 * MIN, origin: 'https://b.example:8443' });
  assert.deepEqual(
    onlyB.endpoints.map((e) => e.buckets.map((x) => [x.at, x.counts])),
    [
      [
        [new Date(T0 - 10 * MIN).toISOString(), { delivered: 1 }],
        [new Date(T0).toISOString(), { pending: 1 }],
      ],
    ],
  );
  assert.equal(
    (await deliveryStats(store.database, { since: T0, until: T0 + 5 * MIN, bucketMs: MIN, installation: 'ins_b' })).endpoints[0].endpoint,
    'https://b.example:8443',
  );
  assert.deepEqual((await deliveryStats(store.database, { since: T0 + 10 * MIN, until: T0 + 20 * MIN, bucketMs: MIN })).endpoints, []);
});

test('the endpoint filter, a replay dry run narrowed by type and endpoint, and GET /api/v1/deliveries/stats', async (t) => {
  const s = await inspectionServer(t, { webhooks: { max_retries: 0 } });
  const ok = await receiver(t, 200);
  const bad = await receiver(t, 400);
  const worse = await receiver(t, 400);
  await s.subscribe(ok.url, ['site_view']);
  const failing = await s.subscribe(bad.url, ['site_view', 'page_feedback']);
  await s.subscribe(worse.url, ['site_view']);
  const ids: string[] = [];
  for (let i = 0; i < 2; i++) ids.push(...(await s.send('site_view')).deliveries.map((d) => d.id));
  ids.push(...(await s.send('page_feedback')).deliveries.map((d) => d.id));
  for (const id of ids) await s.settled(id);
  assert.equal(ids.length, 7);

  const badOrigin = new URL(bad.url).origin;
  const list = async (query: string) => (await s.api('GET', `/api/v1/deliveries?${query}`)).body as { deliveries: Delivery[] };
  const toBad = await list(`endpoint=${encodeURIComponent(badOrigin)}`);
  assert.equal(toBad.deliveries.length, 3);
  assert.ok(toBad.deliveries.every((d) => d.installationId === failing));
  // A whole URL counts as its origin.
  assert.equal((await list(`endpoint=${encodeURIComponent(`${badOrigin}/elsewhere?x=1`)}&type=page_feedback`)).deliveries.length, 1);
  const refused = await s.api('GET', '/api/v1/deliveries?endpoint=ftp://x');
  assert.equal(refused.status, 400);
  assert.equal(refused.body.error.where, 'endpoint');

  // Dry run: which failed site_view deliveries to that endpoint a replay would take; nothing changes.
  const dry = await s.api('POST', '/api/v1/deliveries/replay', { failed: true, since: '1h', type: 'site_view', endpoint: bad.url, dryRun: true });
  assert.equal(dry.status, 200, JSON.stringify(dry.body));
  assert.equal(dry.body.dryRun, true);
  assert.equal(dry.body.replayed, 0);
  assert.equal(dry.body.matched, 2);
  const failedSiteViews = toBad.deliveries.filter((d) => d.eventType === 'site_view').map((d) => d.id);
  assert.deepEqual(new Set(dry.body.deliveries), new Set(failedSiteViews));
  assert.equal((await list('status=failed')).deliveries.length, 5, 'a dry run replays nothing');
  assert.equal((await s.api('POST', '/api/v1/deliveries/replay', { failed: true, since: '1h', dryRun: 'yes' })).body.error.where, 'dryRun');

  // The real replay takes exactly those: the other endpoint's and the page_feedback failure stay failed.
  bad.answer = 200;
  const replay = await s.api('POST', '/api/v1/deliveries/replay', { failed: true, since: '1h', type: 'site_view', endpoint: badOrigin });
  assert.deepEqual(new Set(replay.body.deliveries), new Set(failedSiteViews));
  for (const id of failedSiteViews) assert.equal((await s.settled(id)).status, 'delivered');
  assert.equal((await list('status=failed')).deliveries.length, 3);

  const stats = await s.api('GET', '/api/v1/deliveries/stats?since=1h&bucket=1m');
  assert.equal(stats.status, 200, JSON.stringify(stats.body));
  const body = stats.body as DeliveryStats;
  assert.equal(body.bucketMs, MIN);
  const byEndpoint = Object.fromEntries(body.endpoints.map((e) => [e.endpoint, e]));
  assert.deepEqual(byEndpoint[new URL(ok.url).origin].byStatus, { delivered: 2 });
  assert.deepEqual(byEndpoint[badOrigin].byStatus, { delivered: 2, failed: 1 });
  assert.deepEqual(byEndpoint[new URL(worse.url).origin].byStatus, { failed: 2 });
  for (const e of body.endpoints)
    for (const b of e.buckets) for (const p of [b.latency, b.response]) if (p) assert.ok(p.count > 0 && p.p50 <= p.p95 && p.p95 <= p.max, JSON.stringify(p));
  // Every attempt of the window was timed: the failed endpoint's two and the replayed ones' four.
  const responses = (e: string) => byEndpoint[e].buckets.reduce((sum, b) => sum + (b.response?.count ?? 0), 0);
  assert.equal(responses(badOrigin), 5);
  assert.equal(responses(new URL(worse.url).origin), 2);

  const only = await s.api('GET', `/api/v1/deliveries/stats?endpoint=${encodeURIComponent(ok.url)}`);
  assert.deepEqual(
    only.body.endpoints.map((e: { endpoint: string }) => e.endpoint),
    [new URL(ok.url).origin],
  );
  for (const [query, where, message] of [
    ['since=30d&bucket=1m', 'bucket', /the window holds \d+ buckets of 1m; at most 1440/],
    ['bucket=10ms', 'bucket', /bucket must be a duration of at least 1s/],
    ['since=1h&until=2h', 'until', /until must be later than since/],
    ['endpoint=nope', 'endpoint', /endpoint must be an http\(s\) origin/],
    // Numbers past what a date holds are refused like any other bad value, not answered with a 500.
    [`bucket=${'9'.repeat(400)}d`, 'bucket', /bucket must be at most 3650000d/],
    [`since=${'9'.repeat(400)}d&bucket=1d`, 'since', /since must be a time from 0001-01-01 to 9999-12-31/],
    [`since=1h&until=${'9'.repeat(400)}d`, 'until', /until must be a time from 0001-01-01 to 9999-12-31/],
  ] as const) {
    const r = await s.api('GET', `/api/v1/deliveries/stats?${query}`);
    assert.equal(r.status, 400, query);
    assert.equal(r.body.error.where, where);
    assert.match(r.body.error.message, message);
  }
});

test('statistics read the window through the creation-time index, whatever the filters (not every delivered delivery, not all of an installation)', (t) => {
  const store = openStore(tmpDir(t), { migrations: allMigrations() });
  t.after(() => store.close());
  for (const f of [{}, { origin: 'https://a.example' }, { installation: 'ins_a' }, { origin: 'https://a.example', installation: 'ins_a' }]) {
    for (const [name, q] of Object.entries(statsQueries({ since: T0, until: T0 + 5 * MIN, bucketMs: MIN, ...f }))) {
      const plan = store
        .sqlite!.prepare(`EXPLAIN QUERY PLAN ${q.sql}`)
        .all(q.params)
        .map((r) => (r as { detail: string }).detail);
      const deliveries = plan.filter((d) => / d( |$)/.test(d));
      assert.deepEqual(deliveries.length, 1, `${name} ${JSON.stringify(f)}: ${plan.join(' | ')}`);
      assert.match(
        deliveries[0],
        /^SEARCH d USING (COVERING )?INDEX webhook_deliveries_by_time \(created_at>\? AND created_at<\?\)$/,
        `${name} ${JSON.stringify(f)}: ${plan.join(' | ')}`,
      );
    }
  }
});

test('a window holding more deliveries than one answer may read is refused, saying how to narrow it', async (t) => {
  const store = openStore(tmpDir(t), { migrations: allMigrations() });
  t.after(() => store.close());
  const queue = createQueue(store.database, { maxAttempts: () => 4 });
  for (let i = 0; i < 6; i++)
    await queue.enqueue(store.database, {
      eventId: `evt_${i}`,
      eventType: 'site_view',
      installationId: 'ins_a',
      url: 'https://a.example/h',
      body: '{}',
      now: T0 + i * MIN,
    });
  const window = { since: T0, until: T0 + 10 * MIN, bucketMs: MIN };
  assert.equal((await deliveryStats(store.database, window, { maxDeliveries: 6 })).endpoints[0].total, 6);
  await assert.rejects(
    () => deliveryStats(store.database, window, { maxDeliveries: 5 }),
    (e: unknown) =>
      e instanceof SwitchyardError &&
      e.code === 'bad_request' &&
      e.where === 'since' &&
      /more than 5 deliveries/.test(e.message) &&
      /shorter window/.test(e.hint ?? ''),
  );
  // The bound is on the window's deliveries, filters or not: a filter does not make the read smaller.
  await assert.rejects(() => deliveryStats(store.database, { ...window, origin: 'https://elsewhere.example' }, { maxDeliveries: 5 }), SwitchyardError);
  assert.equal((await deliveryStats(store.database, { ...window, until: T0 + 5 * MIN }, { maxDeliveries: 5 })).endpoints[0].total, 5);
});
