/** Batch ingest: a JSON array on POST /api/v1/events, validated item by item, stored in one transaction. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import net from 'node:net';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { openStore, type Db } from '../src/store/index.ts';
import { LOCK_BUSY } from '../src/store/patience.ts';
import { allMigrations } from '../src/server/migrations.ts';
import { createEvents } from '../src/events/service.ts';
import { samplePayload } from '../src/events/index.ts';
import { runCli, tmpDir, waitFor } from './helpers/index.ts';
import { deliveryServer, scriptedReceiver, subscriptionsFailingFor } from './webhooks-support.ts';
import { capabilityOf } from '../src/module/capabilities.ts';

/** SQLite's own handle: this suite runs on SQLite (its counts use json_each). */
const db = (s: { services: { store: { sqlite?: Db } } }) => s.services.store.sqlite!;
const count = (s: Parameters<typeof db>[0], sql: string, ...params: unknown[]) =>
  (
    db(s)
      .prepare(sql)
      .get(...params) as { n: number }
  ).n;
const storedOf = (s: Parameters<typeof db>[0], ids: unknown[]) =>
  count(s, `SELECT count(*) AS n FROM events WHERE id IN (SELECT value FROM json_each(?))`, JSON.stringify(ids));

/** Raw POST of a body as written (the test server's api() always stringifies). */
async function post(url: string, token: string, body: string, headers: Record<string, string> = {}) {
  const res = await fetch(`${url}/api/v1/events`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', ...headers },
    body,
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

test('a batch of 1,000: stored in one go with every delivery and handler run enqueued, answered per item in order', async (t) => {
  const ran: string[] = [];
  const s = await deliveryServer(t, {}, [
    {
      name: 'fake-runtime',
      start(services) {
        services.eventHandlers = {
          targets: (event: { type: string }) => (event.type === 'site_view' ? [{ installationId: 'inst_fake', integration: 'fake' }] : []),
          async run(_installationId: string, event: { eventId: string }) {
            ran.push(event.eventId);
            return { kind: 'ran', ok: true, invocationId: `req_${ran.length}` };
          },
        };
      },
    },
  ]);
  const receiver = await scriptedReceiver(t, () => 200);
  const sub = await s.subscribe(receiver.url, ['site_view']);
  const batch = Array.from({ length: 1000 }, () => samplePayload('site_view'));
  delete batch[10].eventId; // generated, like a single POST's
  const r = await s.api('POST', '/api/v1/events', batch);
  assert.equal(r.status, 202);
  assert.deepEqual([r.body.stored, r.body.duplicates, r.body.rejected], [1000, 0, 0]);
  assert.equal(r.body.results.length, 1000);
  r.body.results.forEach((x: any, i: number) => {
    assert.equal(x.index, i);
    assert.equal(x.status, 202);
    assert.equal(x.duplicate, false);
    assert.equal(x.type, 'site_view');
    if (i !== 10) assert.equal(x.eventId, batch[i].eventId);
    assert.deepEqual(
      x.deliveries.map((d: any) => d.installationId),
      [sub.installationId],
    );
    assert.deepEqual(
      x.handlers.map((h: any) => h.installationId),
      ['inst_fake'],
    );
  });
  assert.match(r.body.results[10].eventId, /^evt_/);
  const ids = r.body.results.map((x: any) => x.eventId);
  assert.equal(new Set(ids).size, 1000);
  assert.equal(storedOf(s, ids), 1000);
  // One transaction: one receipt time for all, and every delivery and run was written with them.
  assert.equal(count(s, `SELECT count(DISTINCT received_at) AS n FROM events WHERE id IN (SELECT value FROM json_each(?))`, JSON.stringify(ids)), 1);
  assert.equal(count(s, `SELECT count(*) AS n FROM webhook_deliveries WHERE event_id IN (SELECT value FROM json_each(?))`, JSON.stringify(ids)), 1000);
  assert.equal(count(s, `SELECT count(*) AS n FROM event_handler_runs WHERE event_id IN (SELECT value FROM json_each(?))`, JSON.stringify(ids)), 1000);
  const one = await s.api('GET', `/api/v1/events/${batch[500].eventId}`);
  assert.deepEqual(one.body.payload, batch[500]);
  assert.equal(one.body.deliveryCount, 1);
  // And after the commit they go out, each once.
  await waitFor(() => receiver.requests.length >= 1000 && ran.length >= 1000, 60_000).catch((e) => {
    const states = db(s).prepare(`SELECT status, count(*) AS n FROM webhook_deliveries GROUP BY status`).all();
    const runs = db(s).prepare(`SELECT status, count(*) AS n FROM event_handler_runs GROUP BY status`).all();
    throw new Error(
      `${e.message}: ${receiver.requests.length} received, ${ran.length} handler runs; deliveries ${JSON.stringify(states)}, runs ${JSON.stringify(runs)}`,
    );
  });
  assert.deepEqual(new Set(receiver.requests.map((q) => JSON.parse(q.body).sourceEventId)), new Set(ids));
  assert.deepEqual(new Set(ran), new Set(ids));
});

test('a batch is atomic: if storing one of its valid events fails, none is stored (and a single event stored alongside is not affected)', async (t) => {
  let explode = true;
  const s = await deliveryServer(t, {}, [subscriptionsFailingFor('page_feedback', () => explode)]);
  const receiver = await scriptedReceiver(t, () => 200);
  await s.subscribe(receiver.url, ['site_view']);
  const batch = [...Array.from({ length: 20 }, () => samplePayload('site_view')), samplePayload('page_feedback'), samplePayload('site_view')];
  const failed = await s.api('POST', '/api/v1/events', batch);
  assert.equal(failed.status, 500);
  assert.equal(
    storedOf(
      s,
      batch.map((e) => e.eventId),
    ),
    0,
    'nothing of the batch is stored',
  );

  // In-process, a single event in the same group commit as the failing batch is stored all the same.
  const events = capabilityOf(s.services, 'events');
  const single = samplePayload('site_view');
  const outcomes = await Promise.allSettled([events.ingestBatch(batch), events.ingest(single)]);
  assert.deepEqual(
    outcomes.map((o) => o.status),
    ['rejected', 'fulfilled'],
  );
  assert.equal(
    storedOf(
      s,
      batch.map((e) => e.eventId),
    ),
    0,
  );
  assert.equal(storedOf(s, [single.eventId]), 1);

  explode = false;
  const retried = await s.api('POST', '/api/v1/events', batch);
  assert.equal(retried.status, 202, 'nothing was left behind: the retry is not a duplicate');
  assert.equal(retried.body.stored, batch.length);
  assert.equal(
    storedOf(
      s,
      batch.map((e) => e.eventId),
    ),
    batch.length,
  );
  await waitFor(() => receiver.requests.length === 22, 20_000); // 21 site_view of the batch + the single one
});

test('mixed valid and invalid items: 207, each invalid one refused with its index in every path, the valid ones stored', async (t) => {
  const s = await deliveryServer(t);
  const good = [samplePayload('site_view'), samplePayload('space_content_updated'), samplePayload('page_feedback')];
  const badIp = samplePayload('site_view') as any;
  badIp.visitor.ip = 'not-an-ip';
  delete badIp.url;
  let deep: any = {};
  const deepEvent: Record<string, unknown> = { ...samplePayload('space_view'), extra: deep };
  for (let i = 0; i < 70; i++) deep = deep.next = {};
  const batch = [good[0], { type: 'space_exploded' }, badIp, 'a string', null, [1, 2], good[1], 42, {}, deepEvent, good[2]];
  const r = await s.api('POST', '/api/v1/events', batch);
  assert.equal(r.status, 207);
  assert.deepEqual([r.body.stored, r.body.duplicates, r.body.rejected], [3, 0, 8]);
  assert.deepEqual(
    r.body.results.map((x: any) => x.index),
    batch.map((_, i) => i),
  );
  assert.deepEqual(
    r.body.results.map((x: any) => x.status),
    [202, 400, 400, 400, 400, 400, 202, 400, 400, 400, 202],
  );
  const wheres = (i: number) => r.body.results[i].error.problems?.map((p: any) => p.where) ?? [r.body.results[i].error.where];
  assert.deepEqual(wheres(1), ['[1].type']);
  assert.deepEqual(wheres(2), ['[2].visitor.ip', '[2].url']);
  for (const i of [3, 4, 5, 7]) {
    assert.equal(r.body.results[i].error.code, 'validation_failed');
    assert.deepEqual(wheres(i), [`[${i}]`]);
    assert.match(r.body.results[i].error.problems[0].message, /must be a JSON object/);
  }
  assert.deepEqual(wheres(8), ['[8].type']);
  assert.equal(r.body.results[9].error.code, 'bad_request');
  assert.equal(r.body.results[9].error.where, '[9]');
  assert.match(r.body.results[9].error.message, /nested deeper/);
  // The same validation and message as a single POST, the paths prefixed.
  assert.equal(r.body.results[1].error.code, 'validation_failed');
  const single = await s.send({ type: 'space_exploded' });
  assert.equal(single.status, 400);
  assert.equal(r.body.results[1].error.message, single.body.error.message.replace('type', '[1].type'));
  assert.equal(r.body.results[1].error.problems[0].hint, single.body.error.problems[0].hint);
  for (const i of [0, 6, 10]) assert.equal(r.body.results[i].eventId, batch[i] && (batch[i] as any).eventId);
  assert.equal(
    storedOf(
      s,
      good.map((e) => e.eventId),
    ),
    3,
  );
  assert.equal(storedOf(s, [badIp.eventId, deepEvent.eventId]), 0);

  // Every item refused: still 207 with the items, nothing stored.
  const none = await s.api('POST', '/api/v1/events', [{}, { type: 'site_view' }]);
  assert.equal(none.status, 207);
  assert.deepEqual([none.body.stored, none.body.rejected], [0, 2]);
  assert.deepEqual(none.body.results[1].error.problems.map((p: any) => p.where).slice(0, 2), ['[1].siteId', '[1].visitor']);
});

test('an empty batch and one of 1,001 events are refused whole, naming the limit and the count', async (t) => {
  const s = await deliveryServer(t);
  const empty = await s.api('POST', '/api/v1/events', []);
  assert.equal(empty.status, 400);
  assert.equal(empty.body.error.code, 'bad_request');
  assert.match(empty.body.error.message, /empty/);
  const batch = Array.from({ length: 1001 }, () => samplePayload('space_view'));
  const big = await s.api('POST', '/api/v1/events', batch);
  assert.equal(big.status, 400);
  assert.equal(big.body.error.code, 'bad_request');
  assert.match(big.body.error.message, /at most 1000 events, got 1001/);
  assert.equal(
    storedOf(
      s,
      batch.map((e) => e.eventId),
    ),
    0,
  );
  const ok = await s.api('POST', '/api/v1/events', batch.slice(0, 1000));
  assert.equal(ok.status, 202);
  assert.equal(ok.body.stored, 1000);
});

test('eventIds dedupe per item: seen before, or twice in the same batch (the first one wins, queued once)', async (t) => {
  const s = await deliveryServer(t);
  const receiver = await scriptedReceiver(t, () => 200);
  await s.subscribe(receiver.url, ['space_content_updated']);
  const earlier = samplePayload('space_content_updated');
  assert.equal((await s.send(earlier)).status, 202);
  const a = samplePayload('space_content_updated');
  const aAgain = { ...a, revisionId: 'rev_other' };
  const b = samplePayload('space_content_updated');
  const r = await s.api('POST', '/api/v1/events', [a, aAgain, earlier, b, a]);
  assert.equal(r.status, 202, 'duplicates are not refusals');
  assert.deepEqual([r.body.stored, r.body.duplicates, r.body.rejected], [2, 3, 0]);
  assert.deepEqual(
    r.body.results.map((x: any) => [x.status, x.duplicate, x.eventId]),
    [
      [202, false, a.eventId],
      [200, true, a.eventId],
      [200, true, earlier.eventId],
      [202, false, b.eventId],
      [200, true, a.eventId],
    ],
  );
  for (const i of [1, 2, 4]) assert.deepEqual([r.body.results[i].deliveries, r.body.results[i].handlers], [[], []]);
  assert.equal((await s.api('GET', `/api/v1/events/${a.eventId}`)).body.payload.revisionId, a.revisionId, 'the first of the batch is kept');
  assert.equal(count(s, 'SELECT count(*) AS n FROM webhook_deliveries WHERE event_id = ?', a.eventId), 1);
  await waitFor(() => receiver.requests.length === 3);
  await new Promise((res) => setTimeout(res, 50));
  assert.equal(receiver.requests.length, 3, 'earlier, a and b: each delivered once');
  // The whole batch again (a sender's retry): every item a duplicate, nothing queued.
  const again = await s.api('POST', '/api/v1/events', [a, b]);
  assert.deepEqual([again.status, again.body.stored, again.body.duplicates], [202, 0, 2]);
});

test('body limits: a batch may be larger than one event (server.batch_body_limit), each of its events no larger than server.body_limit; the 413 names the limit', async (t) => {
  const s = await deliveryServer(t, { server: { body_limit: 4096, batch_body_limit: 64 * 1024 } as any });
  const padded = (n: number): Record<string, unknown> => ({ ...samplePayload('space_view'), padding: 'x'.repeat(n) });
  // A single object over body_limit: 413 as before, naming body_limit.
  const single = await s.send(padded(5000));
  assert.equal(single.status, 413);
  assert.equal(single.body.error.code, 'payload_too_large');
  assert.match(single.body.error.message, /server\.body_limit \(4096 bytes\)/);
  // A batch over body_limit but under batch_body_limit is read; one event over body_limit is refused alone.
  const batch = [...Array.from({ length: 20 }, () => padded(1000)), padded(5000), padded(10)];
  const r = await s.api('POST', '/api/v1/events', batch);
  assert.equal(r.status, 207);
  assert.deepEqual([r.body.stored, r.body.rejected], [21, 1]);
  assert.equal(r.body.results[20].status, 413);
  assert.equal(r.body.results[20].error.code, 'payload_too_large');
  assert.equal(r.body.results[20].error.where, '[20]');
  assert.match(r.body.results[20].error.message, /server\.body_limit \(4096 bytes\)/);
  // A batch over batch_body_limit: 413 naming it, whether Content-Length says so or the stream does.
  const huge = Array.from({ length: 80 }, () => padded(1000));
  const declared = await s.api('POST', '/api/v1/events', huge);
  assert.equal(declared.status, 413);
  assert.match(declared.body.error.message, /server\.batch_body_limit \(65536 bytes\)/);
  assert.equal(declared.body.error.where, 'server.batch_body_limit');
  assert.equal(declared.headers.get('connection'), 'close', 'the unread body is not left in a reusable connection');
  const text = JSON.stringify(huge);
  const streamed = await fetch(`${s.url}/api/v1/events`, {
    method: 'POST',
    headers: { authorization: `Bearer ${s.token}`, 'content-type': 'application/json' },
    body: new ReadableStream({
      start(c) {
        for (let i = 0; i < text.length; i += 8192) c.enqueue(new TextEncoder().encode(text.slice(i, i + 8192)));
        c.close();
      },
    }),
    duplex: 'half',
  } as RequestInit);
  assert.equal(streamed.status, 413);
  assert.match(((await streamed.json()) as any).error.message, /the batch \(a JSON array\) is larger than server\.batch_body_limit/);
  assert.equal(
    storedOf(
      s,
      huge.map((e) => e.eventId),
    ),
    0,
  );
  // Leading blanks do not hide an array; a body that is neither an object nor an array is a 400.
  const blank = await post(s.url, s.token, `  \n[${JSON.stringify(padded(10))}]`);
  assert.equal(blank.status, 202);
  assert.equal(blank.body.stored, 1);
  const scalar = await post(s.url, s.token, '"site_view"');
  assert.equal(scalar.status, 400);
  assert.match(scalar.body.error.message, /JSON object or an array/);
});

test('a client that goes away in the middle of its body: the request ends (400), nothing is stored, the store is not blamed, the next request is served', async (t) => {
  const s = await deliveryServer(t);
  const answered: number[] = [];
  const before = s.services.onHttpResponse;
  s.services.onHttpResponse = (method, route, status) => {
    if (route === '/api/v1/events') answered.push(status);
    before?.(method, route, status);
  };
  const event: Record<string, unknown> = { ...samplePayload('site_view'), padding: 'x'.repeat(3000) };
  const text = JSON.stringify(event);
  const { port } = new URL(s.url);
  const socket = net.connect(Number(port), '127.0.0.1');
  await new Promise((r) => socket.once('connect', r));
  socket.write(
    `POST /api/v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${s.token}\r\nContent-Type: application/json\r\nContent-Length: ${text.length}\r\n\r\n` +
      text.slice(0, 1000),
  );
  await new Promise((r) => setTimeout(r, 100));
  socket.destroy();
  // The handler gave up on the body (a reader left waiting for it would never answer).
  await waitFor(() => answered.includes(400), 5_000);
  assert.deepEqual(answered, [400]);
  assert.equal(storedOf(s, [String(event.eventId)]), 0);
  assert.equal((await fetch(`${s.url}/healthz`)).status, 200, 'a client going away is not the store failing');
  const next = await s.send(samplePayload('site_view'));
  assert.equal(next.status, 202);
});

test('a single event object is answered exactly as before: no per-item wrapping', async (t) => {
  const s = await deliveryServer(t);
  const receiver = await scriptedReceiver(t, () => 200);
  const sub = await s.subscribe(receiver.url, ['site_view']);
  const event = samplePayload('site_view');
  const first = await s.send(event);
  assert.equal(first.status, 202);
  assert.deepEqual(Object.keys(first.body).sort(), ['deliveries', 'duplicate', 'eventId', 'handlers', 'type']);
  assert.deepEqual(
    first.body.deliveries.map((d: any) => d.installationId),
    [sub.installationId],
  );
  const again = await s.send(event);
  assert.deepEqual([again.status, again.body.duplicate], [200, true]);
  const bad = await s.send({ type: 'site_view' });
  assert.equal(bad.status, 400);
  assert.equal(bad.body.error.code, 'validation_failed');
  assert.equal(bad.body.error.problems[0].where, 'siteId', 'no index prefix outside a batch');
});

test('events send --file: NDJSON or a JSON array (stdin with -) sent in batches of 1,000, refusals listed by index and line', async (t) => {
  const s = await deliveryServer(t);
  const env = { SWITCHYARD_URL: s.url, SWITCHYARD_ADMIN_TOKEN: s.token };
  const events = Array.from({ length: 2500 }, () => samplePayload('site_view'));
  const bad = { ...events[1700], url: 'not a url' };
  const lines = [...events.slice(0, 1700).map((e) => JSON.stringify(e)), '', JSON.stringify(bad), ...events.slice(1701).map((e) => JSON.stringify(e))];
  const sent = await runCli(['events', 'send', '--file', '-'], { env, input: `${lines.join('\n')}\n` });
  assert.equal(sent.code, 2, 'a refused event is bad input');
  assert.match(sent.stdout, /sent 2500 events in 3 batches: 2499 stored, 0 duplicates \(already received\), 1 refused/);
  assert.match(sent.stdout, /\[1700\] line 1702 the event is not valid: \[1700\]\.url "not a url" is not an absolute http\(s\) URL/);
  assert.equal(
    storedOf(
      s,
      events.map((e) => e.eventId),
    ),
    2499,
  );

  // A JSON array from a file, the positional type for items without one, --set on each, --json.
  const dir = tmpDir(t);
  const file = join(dir, 'events.json');
  writeFileSync(file, JSON.stringify([{ spaceId: 'a' }, { spaceId: 'b', type: 'space_view' }, events[0]]));
  const json = await runCli(['events', 'send', 'space_gitsync_started', '--file', file, '--set', 'installationId=inst_x', '--json'], { env });
  assert.equal(json.code, 0, json.stderr);
  const answer = JSON.parse(json.stdout);
  assert.deepEqual([answer.stored, answer.duplicates, answer.rejected], [2, 1, 0]);
  assert.deepEqual(
    answer.results.map((r: any) => [r.index, r.type]),
    [
      [0, 'space_gitsync_started'],
      [1, 'space_view'],
      [2, 'site_view'],
    ],
  );
  const first = await s.api('GET', `/api/v1/events/${answer.results[0].eventId}`);
  assert.equal(first.body.installationId, 'inst_x');
  const printed = await runCli(['events', 'send', '--file', file, '--print']);
  assert.equal(printed.stdout.trim().split('\n').length, 3, 'many payloads print as NDJSON');
  const none = await runCli(['events', 'send'], { env });
  assert.equal(none.code, 2);
  assert.match(none.stderr, /name an event type, or give the events with --data or --file/);
});

test('events send --file halves its batches when they are over server.batch_body_limit', async (t) => {
  const s = await deliveryServer(t, { server: { batch_body_limit: 64 * 1024 } as any });
  const env = { SWITCHYARD_URL: s.url, SWITCHYARD_ADMIN_TOKEN: s.token };
  const events: Array<Record<string, unknown>> = Array.from({ length: 300 }, () => ({ ...samplePayload('space_view'), padding: 'x'.repeat(1000) }));
  const file = join(tmpDir(t), 'big.json');
  writeFileSync(file, JSON.stringify(events));
  const sent = await runCli(['events', 'send', '--file', file], { env });
  assert.equal(sent.code, 0, sent.stderr);
  assert.match(sent.stdout, /sent 300 events in 10 batches: 300 stored/, '1,000 -> 500 -> 250 -> 125 -> 63 -> 32 events of 1 kB each: under 64 kB');
  assert.equal(
    storedOf(
      s,
      events.map((e) => e.eventId),
    ),
    300,
  );
});

test('group commit: while another connection holds the write lock, the batch waits a turn (the loop not blocked), then commits', async (t) => {
  const dir = tmpDir(t);
  const store = openStore(dir, { migrations: allMigrations() });
  t.after(() => store.close());
  const other = new Database(join(dir, 'switchyard.db'));
  t.after(() => other.close());
  // Count the group commit's transactions that the lock refused (the queues' reservations are
  // given back by the store's rollback hooks: store-transactions.test.ts).
  let refused = 0;
  const unlessBusy = store.database.transactionUnlessBusy.bind(store.database);
  (store.database as { transactionUnlessBusy: typeof unlessBusy }).transactionUnlessBusy = async (fn) => {
    const r = await unlessBusy(fn);
    if (r === LOCK_BUSY) {
      refused++;
      // The lock is let go once the group commit was refused (whenever its turn came).
      if (other.inTransaction) other.exec('COMMIT');
    }
    return r;
  };
  const log = { debug() {}, info() {}, warn() {}, error() {}, child: () => log };
  const events = createEvents({
    database: store.database,
    log,
  });
  other.exec('BEGIN IMMEDIATE');
  const started = performance.now();
  const r = await events.ingest(samplePayload('space_content_updated', { eventId: 'evt_patient_1' }));
  assert.equal(r.duplicate, false);
  assert.equal(refused, 1, 'refused once');
  assert.ok(performance.now() - started < 1_000, 'no busy_timeout sleep');
  assert.ok(await events.get('evt_patient_1'));
});
