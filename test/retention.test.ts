/** The retention job: what it purges, what it keeps, in batches that let delivery run between them. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRetention, serverPurgers, type RetentionReport } from '../src/retention/index.ts';
import { memoryLogger } from '../src/log/index.ts';
import { sql, startTestServer, waitFor } from './helpers/index.ts';
import { inspectionServer, receiver, type InspectionServer } from './inspection-support.ts';
import { capabilityOf } from '../src/module/capabilities.ts';

const DAY = 86_400_000;
const count = async (s: InspectionServer, text: string, ...params: unknown[]) => (await sql.get<{ n: number }>(s.services.store, text, params))!.n;

test('retention purges delivered and cancelled deliveries with their attempts, orphaned events and old logs; keeps failed, queued and recent', async (t) => {
  // A 400 fails at once; a 500 waits a minute for its retry.
  const s = await inspectionServer(t, { webhooks: { max_retries: 1, base_delay: 60_000 }, retention: { batch_size: 2 } });
  const ok = await receiver(t, 200);
  const bad = await receiver(t, 400);
  const later = await receiver(t, 500);
  await s.subscribe(ok.url, ['site_view']);
  await s.subscribe(bad.url, ['site_view']);
  const paused = await s.subscribe(later.url, ['page_feedback']);
  const gone = await s.subscribe(later.url, ['page_feedback']);
  await s.install('inspector');

  const sent = [];
  for (let i = 0; i < 5; i++) sent.push(...(await s.send('site_view')).deliveries);
  for (const d of sent) await s.settled(d.id);
  const held = await s.send('page_feedback');
  await waitFor(async () => (await count(s, "SELECT COUNT(*) AS n FROM webhook_deliveries WHERE status = 'retrying'")) === 2, 20_000);
  assert.equal((await s.api('POST', `/api/v1/installations/${paused}/pause`)).status, 200);
  assert.equal((await s.api('DELETE', `/api/v1/installations/${gone}`)).status, 200);
  for (let i = 0; i < 3; i++) {
    await s.send('space_content_updated', { spaceId: 'fine', revisionId: `r${i}` });
    // Generous: the first one builds the integration's isolate, on a machine busy with other suites.
    await waitFor(async () => (await count(s, 'SELECT COUNT(*) AS n FROM invocations')) === i + 1, 30_000);
  }
  const before = {
    delivered: await count(s, "SELECT COUNT(*) AS n FROM webhook_deliveries WHERE status = 'delivered'"),
    cancelled: await count(s, "SELECT COUNT(*) AS n FROM webhook_deliveries WHERE status = 'cancelled'"),
    maxAttempt: await count(s, 'SELECT MAX(id) AS n FROM webhook_attempts'),
  };
  assert.deepEqual([before.delivered, before.cancelled], [5, 1]);
  // The delivery holding the newest attempt is kept, so attempt ids (the tail's cursor) are never reused.
  const newest = (await sql.get<{ id: string; status: string }>(
    s.services.store,
    'SELECT d.id, d.status FROM webhook_attempts a JOIN webhook_deliveries d ON d.seq = a.delivery_seq ORDER BY a.id DESC LIMIT 1',
  ))!;
  const keptForCursor = newest.status === 'delivered' || newest.status === 'cancelled' ? 1 : 0;

  const retention = capabilityOf(s.services, 'retention');
  const now = await retention.run();
  assert.deepEqual([now.deliveries, now.events, now.invocations], [0, 0, 0], 'nothing is older than retention.keep yet');

  const report: RetentionReport = await retention.run({ now: Date.now() + 31 * DAY });
  assert.equal(report.deliveries, 6 - keptForCursor);
  assert.equal(report.events, 3, 'the space_content_updated events had no deliveries');
  assert.equal(report.invocations, 2, 'the newest invocation stays (its rowid is the logs cursor)');
  assert.equal(report.failedDeliveries, 0, 'failed deliveries are kept for retention.keep_failed (90 days)');
  assert.equal(report.handlerRuns, 3, 'the inspector handled the space_content_updated events');
  assert.equal(report.failedHandlerRuns, 0);
  // batch_size 2: deliveries in ceil((n+1)/2) batches, failed ones (1), handler runs (2), failed
  // handler runs (1), then events (2), then invocations (2).
  assert.equal(report.batches, Math.floor(report.deliveries / 2) + 1 + 1 + 2 + 1 + 2 + 2);
  assert.ok(report.longestBatchMs >= 0 && report.durationMs >= report.longestBatchMs);
  assert.equal(report.interrupted, false);

  assert.equal(await count(s, "SELECT COUNT(*) AS n FROM webhook_deliveries WHERE status = 'failed'"), 5);
  assert.equal(await count(s, "SELECT COUNT(*) AS n FROM webhook_deliveries WHERE status = 'held'"), 1, 'the held retry waits for its installation');
  assert.equal(await count(s, "SELECT COUNT(*) AS n FROM webhook_deliveries WHERE status IN ('delivered', 'cancelled')"), keptForCursor);
  assert.equal(
    await count(s, 'SELECT COUNT(*) AS n FROM webhook_attempts WHERE delivery_seq NOT IN (SELECT seq FROM webhook_deliveries)'),
    0,
    'attempts went with their deliveries',
  );
  assert.equal(await count(s, "SELECT COUNT(*) AS n FROM webhook_attempts a JOIN webhook_deliveries d ON d.seq = a.delivery_seq WHERE d.status = 'failed'"), 5);
  assert.equal(await count(s, "SELECT COUNT(*) AS n FROM events WHERE type = 'site_view'"), 5, 'events of failed deliveries stay');
  assert.equal(await count(s, 'SELECT COUNT(*) AS n FROM events WHERE id = ?', held.eventId), 1);
  assert.equal(await count(s, 'SELECT COUNT(*) AS n FROM invocations'), 1);
  if (keptForCursor) assert.equal((await s.api('GET', `/api/v1/deliveries/${newest.id}`)).status, 200);

  const again = await retention.run({ now: Date.now() + 31 * DAY });
  assert.deepEqual([again.deliveries, again.events, again.invocations], [0, 0, 0], 'a second run finds nothing');

  // After retention.keep_failed, failed deliveries go too (with their attempts), then their events;
  // one being retried by hand right now (leased) is left alone.
  const store = s.services.store;
  const failedKeptForCursor = newest.status === 'failed' ? 1 : 0;
  const retried = (await sql.get<{ seq: number }>(store, "SELECT seq FROM webhook_deliveries WHERE status = 'failed' AND id != ? LIMIT 1", [newest.id]))!;
  await sql.run(store, 'UPDATE webhook_deliveries SET lease_until = ? WHERE seq = ?', [Date.now() + 91 * DAY + 60_000, retried.seq]);
  const late = await retention.run({ now: Date.now() + 91 * DAY });
  assert.equal(late.failedDeliveries, 4 - failedKeptForCursor);
  assert.equal(late.events, 4 - failedKeptForCursor, "the failed deliveries' events are orphans now");
  assert.equal(await count(s, "SELECT COUNT(*) AS n FROM webhook_deliveries WHERE status = 'failed'"), failedKeptForCursor + 1);
  assert.equal(await count(s, 'SELECT COUNT(*) AS n FROM webhook_deliveries WHERE seq = ?', retried.seq), 1, 'an attempt in flight is never purged under it');
  await sql.run(store, 'UPDATE webhook_deliveries SET lease_until = NULL WHERE seq = ?', [retried.seq]);
  assert.equal(await count(s, 'SELECT COUNT(*) AS n FROM webhook_attempts WHERE delivery_seq NOT IN (SELECT seq FROM webhook_deliveries)'), 0);
  assert.equal(await count(s, "SELECT COUNT(*) AS n FROM webhook_deliveries WHERE status = 'held'"), 1, 'the held retry still waits');
  // New attempts continue after the old ids.
  const next = await s.send('site_view');
  await s.settled(next.deliveries[0].id);
  assert.ok((await count(s, 'SELECT MIN(id) AS n FROM webhook_attempts WHERE id > ?', before.maxAttempt)) > before.maxAttempt);
  assert.equal((await s.api('GET', '/api/v1/retention')).body.lastRun.startedAt, late.startedAt);
});

test('between batches the job yields: a delivery goes out in the middle of a purge', async (t) => {
  const s = await inspectionServer(t, { retention: { batch_size: 1 } });
  const ok = await receiver(t, 200);
  await s.subscribe(ok.url, ['site_view']);
  const old = [];
  for (let i = 0; i < 4; i++) old.push(...(await s.send('site_view')).deliveries);
  for (const d of old) await s.settled(d.id);

  let deliveredMidway: string | undefined;
  let batchesBefore = 0;
  const progress: number[] = [];
  const retention = createRetention({
    purgers: () => serverPurgers(s.services).map((p) => ({ ...p, purge: (b, l) => (progress.push(1), p.purge(b, l)) })),
    settings: () => ({ keep: DAY, keep_failed: 90 * DAY, batch_size: 1 }),
    log: memoryLogger(),
    now: () => Date.now() + 2 * DAY,
    async pause() {
      if (deliveredMidway) return;
      batchesBefore = progress.length;
      const sent = await s.send('site_view');
      deliveredMidway = (await s.settled(sent.deliveries[0].id)).status;
    },
  });
  const report = await retention.run();
  assert.equal(deliveredMidway, 'delivered');
  assert.equal(batchesBefore, 1, 'the delivery went out after the first batch, before the second');
  assert.ok(report.batches > 3);
  // All 4 old ones: the newest attempt moved to the new (recent) delivery after the first batch.
  assert.equal(report.deliveries, 4);
  assert.equal(report.events, 4);
});

test('retention run|status from the CLI; a bad schedule stops the server with the key named', async (t) => {
  const s = await inspectionServer(t);
  const run = await s.cliJson<RetentionReport>(['retention', 'run']);
  assert.deepEqual([run.deliveries, run.events, run.invocations, run.interrupted], [0, 0, 0, false]);
  const people = await s.cli(['retention', 'run']);
  assert.match(
    people.stdout,
    /^purged history older than \S+Z: 0 deliveries \(with their attempts\), 0 handler runs, 0 events, 0 invocation logs, and 0 failed deliveries and 0 failed handler runs that failed before \S+Z, in 6 batches, /,
  );
  const status = await s.cli(['retention', 'status']);
  assert.equal(status.code, 0, status.stderr);
  assert.match(
    status.stdout,
    /^schedule {3}17 3 \* \* \* \(next \S+T\d\d:17:00Z\)\nkeep {7}30d \(failed deliveries 90d\), 500 rows per batch\nlast run {3}\S+Z: purged history/,
  );

  await assert.rejects(startTestServer(t, { retention: { schedule: '61 * * * *' } }), (e: Error & { code?: string; where?: string }) => {
    assert.equal(e.code, 'config_invalid');
    assert.equal(e.where, 'retention.schedule');
    assert.match(e.message, /"61 \* \* \* \*" is not a cron expression: .*minute/);
    return true;
  });
});
