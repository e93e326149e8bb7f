/** Event ingest: validation per spec 2.8, storage before acknowledgement, dedup, fan-out. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EVENT_TYPES, samplePayload, validateEventPayload } from '../src/events/index.ts';
import { waitFor } from './helpers/index.ts';
import { deliveryServer, scriptedReceiver, subscriptionsFailingFor } from './webhooks-support.ts';
import { capabilityOf } from '../src/module/capabilities.ts';

test('every sample payload is valid, with a fresh eventId', () => {
  for (const type of EVENT_TYPES) {
    const p = samplePayload(type);
    assert.deepEqual(validateEventPayload(p), [], type);
    assert.equal(p.type, type);
    assert.match(String(p.eventId), /^evt_[0-9a-f]{24}$/);
  }
  assert.notEqual(samplePayload('site_view').eventId, samplePayload('site_view').eventId);
  const o = samplePayload('site_view', { 'visitor.ip': '198.51.100.4', siteId: 'site_x' }) as any;
  assert.equal(o.visitor.ip, '198.51.100.4');
  assert.equal(o.siteId, 'site_x');
  assert.ok(o.visitor.anonymousId, 'other visitor fields kept');
  assert.throws(() => samplePayload('nope'), /not a platform event type/);
});

test('validation names every bad field by its path', () => {
  const wheres = (p: unknown) => validateEventPayload(p).map((x) => x.where);
  assert.deepEqual(wheres([]), ['(body)']);
  assert.deepEqual(wheres({}), ['type']);
  assert.deepEqual(wheres({ type: 'space_exploded' }), ['type']);
  assert.deepEqual(wheres({ type: 'space_content_updated' }), ['spaceId', 'revisionId']);
  assert.deepEqual(wheres({ type: 'space_content_updated', spaceId: 's', revisionId: 'r', eventId: 7, installationId: '' }), ['eventId', 'installationId']);
  const view = samplePayload('site_view') as any;
  view.visitor.cookies = { ok: 'v', x: 5 };
  view.visitor.ip = 'not-an-ip';
  delete view.visitor.userAgent;
  view.url = '/relative';
  view.referrer = null;
  assert.deepEqual(wheres(view), ['visitor.userAgent', 'visitor.ip', 'visitor.cookies.x', 'url', 'referrer']);
  const fb = samplePayload('page_feedback') as any;
  fb.feedback = { rating: '', comment: 3 };
  delete fb.pageId;
  fb.visitor = 'someone';
  assert.deepEqual(wheres(fb), ['pageId', 'feedback.rating', 'feedback.comment', 'visitor']);
  assert.deepEqual(wheres({ ...samplePayload('site_view'), referrer: '' }), [], 'an empty referrer is a direct visit');
  const msg = validateEventPayload({
    type: 'site_view',
    siteId: 's',
    url: 'https://x',
    referrer: '',
    visitor: { anonymousId: 'a', userAgent: 'u', ip: '1.2.3.4' },
  });
  assert.match(msg[0].message, /cookies|required/);
});

test('POST /api/v1/events: 400 naming each bad field; nothing stored', async (t) => {
  const s = await deliveryServer(t);
  const bad = {
    eventId: 'evt_bad_1',
    type: 'page_feedback',
    siteId: 's',
    spaceId: 'p',
    feedback: { rating: 'good' },
    visitor: { anonymousId: 'a', userAgent: 'u', ip: '1.1.1.1', cookies: { a: 1 } },
    url: 'https://d.example.com/x',
    referrer: '',
  };
  const r = await s.send(bad);
  assert.equal(r.status, 400);
  assert.equal(r.body.error.code, 'validation_failed');
  assert.deepEqual(
    r.body.error.problems.map((p: any) => p.where),
    ['pageId', 'feedback.comment', 'visitor.cookies.a'],
  );
  assert.match(r.body.error.message, /pageId/);
  assert.equal((await s.api('GET', '/api/v1/events/evt_bad_1')).status, 404);
  const notJson = await s.api('POST', '/api/v1/events', undefined);
  assert.equal(notJson.status, 400);
  const anon = await s.api('POST', '/api/v1/events', samplePayload('site_view'), 'not-the-token');
  assert.equal(anon.status, 401);
});

test('an event is stored and enqueued in one go, acknowledged with its deliveries; a repeated eventId is not enqueued again', async (t) => {
  const s = await deliveryServer(t, { webhooks: { base_delay: 20 } });
  const r = await scriptedReceiver(t, () => 200);
  const sub = await s.subscribe(r.url, ['space_content_updated']);
  await s.subscribe(r.url, ['site_view']); // another type: not this event
  const event = samplePayload('space_content_updated');
  const first = await s.send(event);
  assert.equal(first.status, 202);
  assert.equal(first.body.duplicate, false);
  assert.equal(first.body.eventId, event.eventId);
  assert.deepEqual(
    first.body.deliveries.map((d: any) => d.installationId),
    [sub.installationId],
  );
  const stored = await s.api('GET', `/api/v1/events/${event.eventId}`);
  assert.equal(stored.status, 200);
  assert.deepEqual(stored.body.payload, event);
  assert.equal(stored.body.deliveryCount, 1);
  assert.equal(stored.body.deliveries[0].id, first.body.deliveries[0].id);

  const again = await s.send(event);
  assert.equal(again.status, 200);
  assert.equal(again.body.duplicate, true);
  assert.deepEqual(again.body.deliveries, []);
  await s.settled(first.body.deliveries[0].id);
  await new Promise((res) => setTimeout(res, 50));
  assert.equal(r.requests.length, 1, 'delivered once');

  const generated = await s.send({ ...samplePayload('space_content_updated'), eventId: undefined });
  assert.match(generated.body.eventId, /^evt_/);

  const list = await s.api('GET', '/api/v1/events?type=space_content_updated&limit=1');
  assert.equal(list.body.events.length, 1);
  assert.equal(list.body.events[0].eventId, generated.body.eventId);
  assert.ok(list.body.nextCursor);
  const next = await s.api('GET', `/api/v1/events?type=space_content_updated&cursor=${list.body.nextCursor}`);
  assert.deepEqual(
    next.body.events.map((e: any) => e.eventId),
    [event.eventId],
  );
});

test('an event whose installationId holds a NUL or a lone surrogate is stored, as each engine stores text (U+FFFD for them), in a batch with others', async (t) => {
  const s = await deliveryServer(t);
  // Its payload keeps what was sent (JSON text); the column the store filters on holds the replacement.
  const odd = { ...samplePayload('site_view'), installationId: 'ins_\u0000_\ud800_x' } as Record<string, unknown>;
  const plain = samplePayload('site_view');
  const r = await s.api('POST', '/api/v1/events', [odd, plain]);
  assert.equal(r.status, 202, JSON.stringify(r.body));
  assert.deepEqual(
    r.body.results.map((x: any) => x.duplicate),
    [false, false],
  );
  const stored = await s.api('GET', `/api/v1/events/${odd.eventId}`);
  assert.equal(stored.status, 200);
  assert.equal(stored.body.installationId, 'ins_\ufffd_\ufffd_x');
  assert.deepEqual(stored.body.payload, odd);
});

test('enqueue is in the same transaction: if fan-out fails, the event is not stored', async (t) => {
  let explode = true;
  const s = await deliveryServer(t, {}, [
    {
      name: 'exploding-subscriptions',
      // Wraps the subscriptions the events module is handed: starts after their provider, before events.
      provides: ['subscriptions'],
      needs: ['subscriptions'],
      start(services) {
        const real = services.subscriptions;
        services.subscriptions = {
          forEventType(type: string) {
            if (explode) throw new Error('subscriptions unavailable');
            return real?.forEventType(type) ?? [];
          },
        };
      },
    },
  ]);
  const event = samplePayload('site_view');
  const r = await s.send(event);
  assert.equal(r.status, 500);
  assert.equal((await s.api('GET', `/api/v1/events/${event.eventId}`)).status, 404, 'not stored, so a retry by the sender is not a duplicate');
  explode = false;
  const retried = await s.send(event);
  assert.equal(retried.status, 202);
});

test('events stored in one group commit: one whose fan-out fails is left out, the others are stored with their deliveries', async (t) => {
  // Two delivery slots: the good events take both at enqueue (to start at commit); the rollback
  // must give them back, or nothing could ever be sent again.
  const s = await deliveryServer(t, { webhooks: { concurrency: 2, per_endpoint_concurrency: 2 } }, [subscriptionsFailingFor('page_feedback')]);
  const receiver = await scriptedReceiver(t, () => 200);
  await s.subscribe(receiver.url, ['site_view']);
  const events = capabilityOf(s.services, 'events');
  const good = [samplePayload('site_view'), samplePayload('site_view')];
  const bad = samplePayload('page_feedback');
  // Called in the same turn of the event loop: one batch, one transaction.
  const outcomes = await Promise.allSettled([events.ingest(good[0]), events.ingest(bad), events.ingest(good[1])]);
  assert.deepEqual(
    outcomes.map((o) => o.status),
    ['fulfilled', 'rejected', 'fulfilled'],
  );
  assert.match(String((outcomes[1] as PromiseRejectedResult).reason?.message), /subscriptions unavailable/);
  for (const [i, e] of good.entries()) {
    const stored = await s.api('GET', `/api/v1/events/${e.eventId}`);
    assert.equal(stored.status, 200, `good event ${i} is stored`);
    assert.equal((outcomes[i === 0 ? 0 : 2] as PromiseFulfilledResult<any>).value.deliveries.length, 1);
  }
  assert.equal((await s.api('GET', `/api/v1/events/${bad.eventId}`)).status, 404, 'the failed event left nothing behind');
  await waitFor(() => receiver.requests.length === 2);
  assert.deepEqual(receiver.requests.map((r) => JSON.parse(r.body).sourceEventId).sort(), good.map((e) => e.eventId).sort());
  const later = samplePayload('site_view');
  assert.equal((await s.send(later)).status, 202);
  await waitFor(() => receiver.requests.length === 3);
  assert.equal(JSON.parse(receiver.requests[2].body).sourceEventId, later.eventId);
});

test('handler runs are stored with the event and run after the commit, without holding the answer; a failed run is retried', async (t) => {
  const calls: Array<{ event: any; installationId: string; storedAtCall: boolean; runStored: boolean }> = [];
  let release!: () => void;
  const s = await deliveryServer(t, { webhooks: { base_delay: 20, jitter: 0 } }, [
    {
      name: 'fake-runtime',
      start(services) {
        services.eventHandlers = {
          targets: (event: { type: string }) => (event.type === 'page_feedback' ? [{ installationId: 'inst_fake', integration: 'fake' }] : []),
          async run(installationId: string, event: any) {
            const stored = capabilityOf(services, 'events').get(event.eventId) !== undefined;
            const runStored = (await capabilityOf(services, 'handlerRuns').ofEvent(event.eventId)).length === 1;
            calls.push({ event, installationId, storedAtCall: stored, runStored });
            if (calls.length > 1) return { kind: 'ran', ok: true, invocationId: 'req_2' };
            await new Promise<void>((r) => (release = r));
            return { kind: 'ran', ok: false, invocationId: 'req_1', error: 'exception: a handler failed' };
          },
        };
      },
    },
  ]);
  const event = samplePayload('page_feedback');
  const r = await s.send(event);
  assert.equal(r.status, 202, 'answered while the handler is still running');
  assert.deepEqual(
    r.body.handlers.map((h: any) => h.installationId),
    ['inst_fake'],
  );
  await waitFor(() => calls.length === 1);
  assert.deepEqual(calls[0].event, event);
  assert.equal(calls[0].installationId, 'inst_fake');
  assert.equal(calls[0].storedAtCall, true);
  assert.equal(calls[0].runStored, true);
  release();
  await waitFor(() => calls.length === 2);
  const detail = await waitFor(async () => {
    const d = (await s.api('GET', `/api/v1/events/${event.eventId}`)).body;
    return d.handlerRuns[0]?.status === 'delivered' && d;
  });
  assert.equal(detail.handlerRuns[0].attemptCount, 2);
  assert.equal(detail.handlerRuns[0].lastInvocation, 'req_2');
  const site = await s.send(samplePayload('site_view'));
  assert.deepEqual(site.body.handlers, [], 'no run where no integration handles the type');
});

test('a missing visitor or feedback says it is required and what it holds, never "got undefined undefined"', () => {
  const { visitor: _v, ...noVisitor } = samplePayload('page_feedback') as any;
  const { feedback: _f, ...neither } = noVisitor;
  const problems = validateEventPayload(neither);
  assert.deepEqual(
    problems.map((p) => `${p.where} ${p.message}`),
    [
      'feedback is required for page_feedback (an object {rating, comment})',
      'visitor is required for page_feedback (an object {anonymousId, userAgent, ip, cookies})',
    ],
  );
  for (const v of [undefined, 5, 'x', null])
    assert.doesNotMatch(
      validateEventPayload({ ...noVisitor, visitor: { anonymousId: v, userAgent: 'u', ip: '1.2.3.4', cookies: {} } })
        .map((p) => p.message)
        .join(),
      /undefined/,
    );
});
