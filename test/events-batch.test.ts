/** Batch ingest: POST /api/v1/events with an array, each item answered, all valid ones stored in one transaction. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { samplePayload } from '../src/events/index.ts';
import { waitFor } from './helpers/index.ts';
import { deliveryServer, scriptedReceiver } from './webhooks-support.ts';

test('a batch of 1,000 events is stored with every delivery, in one commit, and delivered', async (t) => {
  const s = await deliveryServer(t);
  const r = await scriptedReceiver(t, () => 200);
  await s.subscribe(r.url, ['site_view']);
  const batch = Array.from({ length: 1000 }, () => samplePayload('site_view'));
  const res = await s.api('POST', '/api/v1/events', batch);
  assert.equal(res.status, 202, JSON.stringify(res.body).slice(0, 300));
  assert.deepEqual([res.body.accepted, res.body.duplicates, res.body.rejected], [1000, 0, 0]);
  assert.equal(res.body.results.length, 1000);
  res.body.results.forEach((item: any, i: number) => {
    assert.equal(item.status, 202);
    assert.equal(item.eventId, batch[i].eventId, 'answered in the order sent');
    assert.equal(item.deliveries.length, 1);
  });
  const stored = await s.api('GET', `/api/v1/events/${batch[999].eventId}`);
  assert.equal(stored.status, 200);
  await waitFor(() => new Set(r.requests.map((q) => JSON.parse(q.body).eventId)).size === 1000, 20_000);
});

test('a mixed batch: invalid items answered 400 with their index in the path, valid ones stored; duplicates inside the batch and across', async (t) => {
  const s = await deliveryServer(t);
  const good = samplePayload('site_view');
  const twin = { ...samplePayload('site_view'), eventId: good.eventId };
  const before = samplePayload('site_view');
  assert.equal((await s.send(before)).status, 202);
  const res = await s.api('POST', '/api/v1/events', [good, { type: 'space_exploded' }, 'not an object', twin, before, { type: 'space_content_updated' }]);
  assert.equal(res.status, 207);
  assert.deepEqual([res.body.accepted, res.body.duplicates, res.body.rejected], [1, 2, 3]);
  const st = res.body.results.map((x: any) => x.status);
  assert.deepEqual(st, [202, 400, 400, 200, 200, 400]);
  assert.deepEqual(res.body.results[1].error.problems.map((p: any) => p.where), ['[1].type']);
  assert.deepEqual(res.body.results[5].error.problems.map((p: any) => p.where), ['[5].spaceId', '[5].revisionId']);
  assert.match(res.body.results[2].error.message, /event \[2\] is not valid/);
  assert.deepEqual(res.body.results[2].error.problems.map((p: any) => p.where), ['[2]']);
  assert.equal(res.body.results[3].duplicate, true, 'the same eventId twice in one batch is stored once');
  assert.equal((await s.api('GET', `/api/v1/events/${good.eventId}`)).status, 200);
});

test('batch limits: empty and over 1,000 refused with the count; a single object still works; one event over body_limit is 413', async (t) => {
  const s = await deliveryServer(t, { server: { body_limit: 4096 } });
  const empty = await s.api('POST', '/api/v1/events', []);
  assert.equal(empty.status, 400);
  assert.match(empty.body.error.message, /empty/);
  const over = await s.api('POST', '/api/v1/events', Array.from({ length: 1001 }, () => ({ type: 'x' })));
  assert.equal(over.status, 400);
  assert.match(over.body.error.message, /at most 1000 events, got 1001/);
  const one = await s.send(samplePayload('site_view'));
  assert.equal(one.status, 202);
  assert.equal(one.body.duplicate, false);
  const big = { ...samplePayload('site_view'), url: `https://d.example.com/${'x'.repeat(5000)}` };
  const tooBig = await s.api('POST', '/api/v1/events', big);
  assert.equal(tooBig.status, 413);
  assert.match(tooBig.body.error.message, /server\.body_limit/);
  // The same event inside a batch is within the batch's limit (16 x body_limit).
  const inBatch = await s.api('POST', '/api/v1/events', [big]);
  assert.equal(inBatch.status, 202);
});
