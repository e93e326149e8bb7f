/**
 * Endpoint slots under `switchyard serve` with its default serving processes: deliveries are
 * claimed ahead of their slot, yet the per-endpoint limit holds exactly (counted by the receiver),
 * a slow endpoint never gets more than its slots while another runs at full speed, nothing is sent
 * twice, and a delivery claimed ahead by a process whose slots hang is given back and sent by
 * another process.
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import type http from 'node:http';
import { samplePayload } from '../src/events/index.ts';
import { adminApi, ROOT, spawnCli, tmpDir, waitFor } from './helpers/index.ts';
import { scriptedReceiver } from './webhooks-support.ts';
import { aheadWaiting } from '../src/webhooks/sender-ahead.ts';
import { createSlots } from '../src/webhooks/sender-slots.ts';

const TOKEN = 'test-admin-token';

async function serveDefaults(t: TestContext, webhooks: string[] = []) {
  const dir = tmpDir(t);
  const configFile = join(dir, 'config.yaml');
  writeFileSync(
    configFile,
    [
      'server:',
      '  port: 0',
      `data_dir: ${JSON.stringify(join(dir, 'data'))}`,
      `integrations_dir: ${JSON.stringify(join(ROOT, 'integrations'))}`,
      `admin_token: ${TOKEN}`,
      'log:',
      '  format: json',
      'webhooks:',
      '  allow_private_networks: true',
      ...webhooks.map((l) => `  ${l}`),
    ].join('\n'),
  );
  const served = await spawnCli(t, ['serve', '--config', configFile], /"msg":"switchyard serving","url":"(http:\/\/[^"]+)"/, { timeoutMs: 20_000 });
  const base = served.match[1];
  const api = (method: string, path: string, body?: unknown) => adminApi(base, TOKEN, method, path, body);
  const subscribe = async (url: string, type: string) => {
    const r = await api('POST', '/api/v1/installations', { integration: 'webhook', configuration: { webhook_url: url, event_types: type } });
    assert.equal(r.status, 201, JSON.stringify(r.body));
  };
  const send = async (type: string, n: number) => {
    // In batches, as a busy producer would: many deliveries due at once, claimed ahead.
    for (let i = 0; i < n; i += 50) {
      const events = Array.from({ length: Math.min(50, n - i) }, () => samplePayload(type as 'site_view'));
      const r = await api('POST', '/api/v1/events', events);
      assert.equal(r.status, 202, JSON.stringify(r.body));
    }
  };
  return { api, subscribe, send, base, output: served.output, pid: served.child.pid! };
}

/** A receiver that counts requests open at once and answers after `delayMs`; counts each event id. */
async function countingReceiver(t: TestContext, delayMs: number, hang?: (n: number) => boolean) {
  let open = 0;
  let maxOpen = 0;
  const seen = new Map<string, number>();
  const rx = await scriptedReceiver(t, (n, q, res: http.ServerResponse) => {
    if (hang?.(n)) return; // never answered (until the test ends)
    open++;
    maxOpen = Math.max(maxOpen, open);
    const id = JSON.parse(q.body).eventId as string;
    setTimeout(() => {
      open--;
      seen.set(id, (seen.get(id) ?? 0) + 1);
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    }, delayMs);
  });
  return { ...rx, seen, maxOpen: () => maxOpen };
}

test('default settings, two serving processes: at most per_endpoint_concurrency in flight to one endpoint, a slow one does not hold up a fast one, none sent twice', {
  timeout: 60_000,
}, async (t) => {
  const s = await serveDefaults(t);
  const slow = await countingReceiver(t, 200);
  const fast = await countingReceiver(t, 0);
  await s.subscribe(slow.url, 'site_view');
  await s.subscribe(fast.url, 'page_feedback');
  await s.send('site_view', 60);
  await s.send('page_feedback', 200);
  await waitFor(() => fast.seen.size === 200, 20_000);
  // 60 at 200 ms over 4 slots take 3 s at least: the fast endpoint was served meanwhile, not after.
  const slowWhenFastDone = slow.seen.size;
  await waitFor(() => slow.seen.size === 60, 20_000);
  assert.ok(slowWhenFastDone < 60, `the fast endpoint was done while the slow one still had ${60 - slowWhenFastDone} to go`);
  assert.equal(slow.maxOpen(), 4, 'the slow endpoint had exactly its 4 slots in use, never more');
  assert.ok(fast.maxOpen() <= 4, `the fast endpoint had at most 4 in flight, got ${fast.maxOpen()}`);
  await new Promise((r) => setTimeout(r, 300)); // anything sent twice would arrive by now
  for (const rx of [slow, fast])
    assert.deepEqual(
      [...rx.seen.values()].filter((n) => n !== 1),
      [],
      'each delivery arrived once',
    );
  const listed = await s.api('GET', '/api/v1/deliveries?status=delivered&limit=1');
  assert.equal(listed.status, 200);
});

test("one producer's batch lands in one serving process: it borrows the other's endpoint slots, so the endpoint gets all of them, never more", {
  timeout: 60_000,
}, async (t) => {
  const s = await serveDefaults(t);
  await waitFor(() => s.output().includes('switchyard ready'), 20_000); // the other process answers asks
  const slow = await countingReceiver(t, 300);
  await s.subscribe(slow.url, 'site_view');
  // One POST of 8: every delivery is leased at its ingest in the process that took it (its line
  // holds a second of its 2 slots' pace), and 8 at 300 ms on 2 slots end in 1.2 s, before any
  // would wait the 2 s after which a line goes back to the store for the other process.
  await s.send('site_view', 8);
  await waitFor(() => slow.seen.size === 8, 20_000);
  assert.equal(slow.maxOpen(), 4, 'all 4 of the endpoint slots were in use at once (2 of them borrowed), never more');
  const metrics = await fetch(`${s.base}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } }).then((r) => r.text());
  const borrowed = /^switchyard_webhook_slots_borrowed (\d+)$/m.exec(metrics);
  assert.ok(borrowed && Number(borrowed[1]) >= 2, `slots borrowed, per /metrics: ${borrowed?.[0]}`);
  assert.deepEqual(
    [...slow.seen.values()].filter((n) => n !== 1),
    [],
    'each delivery arrived once',
  );
});

test("kill -9 of either serving process while slots are on loan: never more than the limit at the endpoint (a dead process's requests may still be running there), every delivery arrives", {
  timeout: 90_000,
}, async (t) => {
  for (const victim of [0, 1]) {
    // A dead process's borrowed slots are held for `timeout` (10 s by default); 2 s, well over the
    // endpoint's 300 ms, keeps the test short.
    const s = await serveDefaults(t, ['timeout: 2s']);
    await waitFor(() => s.output().includes('switchyard ready'), 20_000);
    const slow = await countingReceiver(t, 300);
    await s.subscribe(slow.url, 'site_view');
    await s.send('site_view', 40); // one connection: one process takes the batch and borrows
    await waitFor(() => slow.maxOpen() === 4, 10_000);
    const pids = execFileSync('pgrep', ['-P', String(s.pid)])
      .toString()
      .trim()
      .split('\n')
      .map(Number)
      .sort((a, b) => a - b);
    process.kill(pids[victim], 'SIGKILL');
    await waitFor(() => slow.seen.size === 40, 60_000).catch(() => {
      throw new Error(`victim ${victim}: ${slow.seen.size} of 40 delivered`);
    });
    // Given back at once, the dead borrower's slots put 6 in flight here (its requests still open).
    assert.ok(slow.maxOpen() <= 4, `victim ${victim}: ${slow.maxOpen()} in flight at once, limit 4`);
  }
});

test('a delivery claimed ahead by a process whose slot hangs is given back and sent by the other process', { timeout: 60_000 }, async (t) => {
  // One slot per process (2 in all), a 30 s attempt time-out: a hung attempt holds its slot that long.
  const s = await serveDefaults(t, ['per_endpoint_concurrency: 2', 'timeout: 30s']);
  // Fast at first (both processes learn the endpoint answers quickly and claim ahead), then one
  // request hangs: its process has deliveries waiting behind the hung slot.
  const rx = await countingReceiver(t, 0, (n) => n === 150);
  await s.subscribe(rx.url, 'site_view');
  await s.send('site_view', 300);
  const t0 = performance.now();
  await waitFor(() => rx.seen.size === 299, 10_000);
  assert.ok(performance.now() - t0 < 10_000);
  assert.deepEqual(
    [...rx.seen.values()].filter((n) => n !== 1),
    [],
    'each delivery arrived once',
  );
});

test('per_endpoint_concurrency: 1 with two serving processes: one attempt at a time to the endpoint, never two', { timeout: 60_000 }, async (t) => {
  const s = await serveDefaults(t, ['per_endpoint_concurrency: 1']);
  const rx = await countingReceiver(t, 100);
  await s.subscribe(rx.url, 'site_view');
  await s.send('site_view', 20);
  await waitFor(() => rx.seen.size === 20, 20_000);
  assert.equal(rx.maxOpen(), 1, 'the two processes share the one slot: never two attempts in flight');
  assert.deepEqual(
    [...rx.seen.values()].filter((n) => n !== 1),
    [],
    'each delivery arrived once',
  );
});

test('one process, a slow endpoint: deliveries claimed ahead and given back after their wait are sent, the last of a burst too', {
  timeout: 60_000,
}, async (t) => {
  const { deliveryServer } = await import('./webhooks-support.ts');
  const s = await deliveryServer(t, { webhooks: { per_endpoint_concurrency: 2 } });
  const seen = new Set<string>();
  // Slower than the wait of a delivery claimed ahead (50 ms): what waits behind a busy slot is given back.
  const r = await scriptedReceiver(t, async (_n, req) => {
    await new Promise((done) => setTimeout(done, 120));
    seen.add(JSON.parse(req.body).sourceEventId as string);
    return 200;
  });
  await s.subscribe(r.url, ['site_view']);
  const ids: string[] = [];
  for (let i = 0; i < 16; i++) {
    const e = samplePayload('site_view');
    ids.push(e.eventId as string);
    void s.send(e);
  }
  await waitFor(() => ids.every((id) => seen.has(id)), 20_000).catch(() => {
    throw new Error(`not delivered: ${ids.filter((id) => !seen.has(id)).join(', ')} (${seen.size} of ${ids.length})`);
  });
});

test("claimed ahead per origin: one slot's worth while its pace is unknown or slow, more the faster its exchanges end (as many as its slots send in a quarter of the 50 ms wait), at most three slots' worth; a clock that steps back is no recent free", () => {
  const slots = createSlots();
  assert.equal(slots.holdMs('http://a'), undefined);
  for (let at = 0; at <= 20; at++) slots.freed('http://a', at, 1); // exchanges of 1 ms
  assert.equal(slots.holdMs('http://a'), 1);
  assert.equal(aheadWaiting(4, slots.holdMs('http://a')), 12, "three slots' worth at most (4 slots would send 50 in 12.5 ms)");
  assert.equal(aheadWaiting(2, 0), 6);
  assert.equal(aheadWaiting(4, 5), 10, '4 slots of 5 ms send 10 in 12.5 ms');
  assert.equal(aheadWaiting(2, 20), 2, "one slot's worth at least");
  assert.equal(aheadWaiting(2, undefined), 2);
  // Slots started together end together: many frees in one ms do not read as a faster pace.
  for (let i = 0; i < 16; i++) slots.freed('http://b', 100, 20);
  assert.equal(slots.holdMs('http://b'), 20);
  assert.equal(aheadWaiting(16, slots.holdMs('http://b')), 16, "16 slots of 20 ms: one slot's worth, sent within 20 ms");
  // The average follows a slower pace, and is forgotten with the origin's last free.
  for (let at = 40; at <= 400; at += 20) slots.freed('http://a', at, 25);
  assert.ok(slots.holdMs('http://a')! > 24, String(slots.holdMs('http://a')));
  assert.equal(aheadWaiting(2, slots.holdMs('http://a')), 2);
  assert.equal(slots.freedWithin('http://a', 420, 50), true);
  slots.forgetFreedBefore(500, 50);
  assert.equal(slots.holdMs('http://a'), undefined);
  // A clock stepped back: not a free within the window, and forgotten rather than kept for good.
  slots.freed('http://c', 10_000, 1);
  assert.equal(slots.freedWithin('http://c', 9_990, 50), false);
  slots.forgetFreedBefore(9_990, 50);
  assert.equal(slots.holdMs('http://c'), undefined);
});
