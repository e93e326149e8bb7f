/**
 * One outcome vocabulary everywhere: a delivery whose retries ran out ends with an attempt recorded
 * `failed`, and the API, `deliveries tail --json`, the CLI's filters and /metrics all say so. A
 * store written with the old vocabulary (`fail`, and `retry` on the last attempt) is migrated.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { openStore } from '../src/store/index.ts';
import { allMigrations } from '../src/server/migrations.ts';
import { createQueue, type AttemptFeedItem, type Delivery, type DeliveryDetail } from '../src/webhooks/index.ts';
import { spawnCli, sql, tmpDir, waitFor } from './helpers/index.ts';
import { inspectionServer, receiver } from './inspection-support.ts';

/** `name{labels} value` lines of a Prometheus page. */
const metrics = (text: string) =>
  new Map(
    text
      .split('\n')
      .filter((l) => l && !l.startsWith('#'))
      .map((l) => [l.slice(0, l.lastIndexOf(' ')), Number(l.slice(l.lastIndexOf(' ') + 1))]),
  );

test('a delivery whose retries ran out is failed in the API, in tail --json, in the CLI filter and in /metrics', async (t) => {
  // Two retries 50 and 100 ms apart; the receiver always answers 500.
  const s = await inspectionServer(t, { webhooks: { max_retries: 2, base_delay: 50, jitter: 0 } });
  const bad = await receiver(t, 500);
  const inst = await s.subscribe(bad.url, ['site_view']);
  const tail = await spawnCli(t, ['deliveries', 'tail', '--json'], /following new delivery attempts/, { env: s.env });

  const [{ id }] = (await s.send('site_view')).deliveries;
  const d = await s.settled(id);
  assert.equal(d.status, 'failed');
  assert.deepEqual(
    d.attempts.map((a) => [a.status, a.outcome, a.nextAttemptAt !== null]),
    [
      [500, 'retry', true],
      [500, 'retry', true],
      [500, 'failed', false],
    ],
    'the last attempt scheduled nothing: failed, not retry',
  );
  assert.deepEqual([d.attemptCount, d.scheduledAttempts, d.maxAttempts], [3, 3, 3]);
  assert.equal(bad.answered.get(500), 3);

  // The live tail prints the same outcomes, one JSON object per attempt.
  const lines = await waitFor(() => {
    const items = tail
      .output()
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as AttemptFeedItem);
    return items.length === 3 ? items : undefined;
  }, 10_000);
  tail.child.kill('SIGINT');
  assert.deepEqual(
    lines.map((l) => [l.deliveryId, l.attempt.number, l.attempt.outcome]),
    [
      [id, 1, 'retry'],
      [id, 2, 'retry'],
      [id, 3, 'failed'],
    ],
  );
  assert.equal(lines[2].deliveryStatus, 'failed');

  const listed = await s.cliJson<{ deliveries: Delivery[] }>(['deliveries', 'list', '--status', 'failed', '--installation', inst]);
  assert.deepEqual(
    listed.deliveries.map((x) => x.id),
    [id],
  );
  const shown = await s.cli(['deliveries', 'show', id]);
  assert.match(shown.stdout, /\n3\s+\S+Z\s+auto\s+500\s+[\d.]+ ms\s+failed\s*\n/);

  // /metrics counts the failed attempt, so an alert on it can fire.
  const page = await fetch(`${s.url}/metrics`, { headers: { authorization: `Bearer ${s.token}` } });
  const m = metrics(await page.text());
  assert.equal(m.get('switchyard_webhook_attempts_total{outcome="failed",trigger="automatic"}'), 1);
  assert.equal(m.get('switchyard_webhook_attempts_total{outcome="retry",trigger="automatic"}'), 2);
  assert.equal(m.get('switchyard_webhook_attempts_total{outcome="success",trigger="automatic"}'), 0);
  assert.equal(m.get('switchyard_webhook_deliveries{state="failed"}'), 1);
  assert.equal(
    [...m.keys()].some((k) => k.includes('outcome="fail"')),
    false,
    'no series in the old vocabulary',
  );
});

test('a store written with the old vocabulary is migrated: fail and a last retry become failed, a paused queue becomes held', {
  skip: process.env.SWITCHYARD_TEST_PG_URL ? 'a SQLite migration (PostgreSQL starts at the current shape)' : false,
}, async (t) => {
  const dataDir = join(tmpDir(t), 'data');
  // The store as the previous version left it: the webhooks schema at its second step.
  const old = openStore(dataDir, { migrations: allMigrations().map((m) => (m.module === 'webhooks' ? { ...m, steps: m.steps.slice(0, 2) } : m)) });
  const now = Date.now();
  old.sqlite!.exec(`
    INSERT INTO webhook_endpoints (installation_id, paused, created_at) VALUES ('inst_live', 0, ${now}), ('inst_paused', 1, ${now});
    INSERT INTO webhook_deliveries (seq, id, event_id, event_type, installation_id, url, origin, body, status, attempts, next_attempt_at, created_at, updated_at, completed_at, last_status) VALUES
      (1, 'dlv_exhausted', 'evt_1', 'site_view', 'inst_live', 'http://127.0.0.1:9/h', 'http://127.0.0.1:9', '{}', 'failed', 2, NULL, ${now}, ${now}, ${now}, 500),
      (2, 'dlv_refused', 'evt_2', 'site_view', 'inst_live', 'http://127.0.0.1:9/h', 'http://127.0.0.1:9', '{}', 'failed', 1, NULL, ${now}, ${now}, ${now}, 410),
      (3, 'dlv_waiting', 'evt_3', 'site_view', 'inst_paused', 'http://127.0.0.1:9/h', 'http://127.0.0.1:9', '{}', 'retrying', 1, ${now + 3_600_000}, ${now}, ${now}, NULL, 500),
      (4, 'dlv_queued', 'evt_4', 'site_view', 'inst_live', 'http://127.0.0.1:9/h', 'http://127.0.0.1:9', '{}', 'retrying', 1, ${now + 3_600_000}, ${now}, ${now}, NULL, 500);
    INSERT INTO webhook_attempts (delivery_seq, number, manual, started_at, url, status, outcome, next_attempt_at) VALUES
      (1, 1, 0, ${now}, 'http://127.0.0.1:9/h', 500, 'retry', ${now + 1000}),
      (1, 2, 0, ${now}, 'http://127.0.0.1:9/h', 500, 'retry', NULL),
      (1, 3, 1, ${now}, 'http://127.0.0.1:9/h', 503, 'retry', NULL),
      (2, 1, 0, ${now}, 'http://127.0.0.1:9/h', 410, 'fail', NULL),
      (3, 1, 0, ${now}, 'http://127.0.0.1:9/h', 500, 'retry', ${now + 3_600_000}),
      (4, 1, 0, ${now}, 'http://127.0.0.1:9/h', 500, 'retry', ${now + 3_600_000});
  `);
  assert.throws(() => old.sqlite!.exec(`UPDATE webhook_deliveries SET status = 'held' WHERE seq = 3`), /CHECK constraint failed/, 'the old schema has no held');
  old.close();

  // This version opens it (the server does) and answers in the new vocabulary.
  const s = await inspectionServer(t, { data_dir: dataDir });
  const get = async (id: string) => (await s.api('GET', `/api/v1/deliveries/${id}`)).body as DeliveryDetail;
  const exhausted = await get('dlv_exhausted');
  assert.deepEqual(
    exhausted.attempts.map((a) => a.outcome),
    ['retry', 'failed', 'failed'],
    'the last automatic attempt and the manual one scheduled nothing',
  );
  assert.deepEqual([exhausted.attemptCount, exhausted.scheduledAttempts], [3, 2]);
  assert.deepEqual(
    (await get('dlv_refused')).attempts.map((a) => a.outcome),
    ['failed'],
  );
  const waiting = await get('dlv_waiting');
  assert.deepEqual([waiting.status, waiting.held, waiting.nextAttemptAt], ['held', true, null], 'queued for a paused installation: held');
  assert.deepEqual(
    waiting.attempts.map((a) => a.outcome),
    ['retry'],
    'a retry that was scheduled stays a retry',
  );
  const queued = await get('dlv_queued');
  assert.deepEqual([queued.status, queued.nextAttemptAt], ['retrying', new Date(now + 3_600_000).toISOString()], "an active installation's queue is untouched");

  // Filters keep working on migrated rows.
  const failed = await s.cliJson<{ deliveries: Delivery[] }>(['deliveries', 'list', '--status', 'failed']);
  assert.deepEqual(failed.deliveries.map((d) => d.id).sort(), ['dlv_exhausted', 'dlv_refused']);
  const held = await s.cliJson<{ deliveries: Delivery[] }>(['deliveries', 'list', '--status', 'held']);
  assert.deepEqual(
    held.deliveries.map((d) => d.id),
    ['dlv_waiting'],
  );
  const rows = await sql.all(s.services.store, 'SELECT outcome, COUNT(*) AS n FROM webhook_attempts GROUP BY outcome ORDER BY outcome');
  assert.deepEqual(rows, [
    { outcome: 'failed', n: 3 },
    { outcome: 'retry', n: 3 },
  ]);
  // Attempt ids (the tail's cursor) and rowids are kept; new attempts number on.
  assert.equal(await sql.value(s.services.store, 'SELECT MAX(id) AS n FROM webhook_attempts'), 6);
});

test('an attempt that ends after its lease expired and another sender took the delivery is recorded, and leaves the delivery to that sender', async (t) => {
  const store = openStore(tmpDir(t), { migrations: allMigrations() });
  t.after(() => store.close());
  const queue = createQueue(store.database, { maxAttempts: () => 4 });
  const db = store.database;
  const T = Date.UTC(2026, 0, 1);
  const c = (await queue.enqueue(db, {
    eventId: 'evt_stale',
    eventType: 'site_view',
    installationId: 'ins_a',
    url: 'http://127.0.0.1:9/hook',
    body: '{}',
    now: T,
  }))!;
  const attempt = (status: number, outcome: 'success' | 'retry') => ({
    manual: false,
    startedAt: T,
    durationMs: 5,
    url: 'http://127.0.0.1:9/hook',
    signatureHeader: null,
    status,
    outcome,
    error: null,
    errorCode: null,
    responseExcerpt: null,
    responseTruncated: false,
    nextAttemptAt: outcome === 'retry' ? T + 70_000 : null,
  });
  assert.equal((await queue.claimMany(db, [c.seq], 'sender-a', T, T + 30_000)).length, 1, 'A takes the lease');
  assert.deepEqual(await queue.claimMany(db, [c.seq], 'sender-b', T + 1_000, T + 31_000), [], 'B cannot while it holds');
  // A is held past its lease (a stopped process); B takes the delivery and delivers it.
  assert.equal((await queue.claimMany(db, [c.seq], 'sender-b', T + 31_000, T + 61_000)).length, 1, 'B takes the expired lease');
  const b = await queue.completeMany(db, [
    {
      seq: c.seq,
      owner: 'sender-b',
      attempt: attempt(200, 'success'),
      next: { status: 'delivered', attempts: 1, nextAttemptAt: null, completedAt: T + 32_000 },
      now: T + 32_000,
    },
  ]);
  assert.deepEqual(b.stale, []);
  // A's answer comes in last: a 500, which would make the delivered delivery retrying again.
  const a = await queue.completeMany(db, [
    {
      seq: c.seq,
      owner: 'sender-a',
      attempt: attempt(500, 'retry'),
      next: { status: 'retrying', attempts: 1, nextAttemptAt: T + 70_000, completedAt: null },
      now: T + 40_000,
    },
  ]);
  assert.deepEqual(a.stale, [c.seq]);
  const d = (await queue.get(c.id))!;
  assert.equal(d.status, 'delivered', 'the late outcome does not undo the delivery');
  assert.equal(d.nextAttemptAt, null);
  assert.deepEqual(
    d.attempts.map((x) => x.status),
    [200, 500],
    'both attempts were made, and both are on record',
  );
});
