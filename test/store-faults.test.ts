/**
 * Storage faults, injected for real: the data directory on a small tmpfs that is filled up, and the
 * WAL file made immutable (chattr +i). While the fault lasts, events are refused with 507/503 saying
 * what is wrong, /healthz reports the store as failing; once it clears the queue resumes by itself
 * within seconds, with nothing acknowledged lost and no slot leaked. Needs root (mount, chattr): the
 * tests say so and skip elsewhere; CI runs as root.
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { closeSync, openSync, rmSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { samplePayload } from '../src/events/index.ts';
import { tmpfs, waitFor } from './helpers/index.ts';
import { deliveryServer, scriptedReceiver, type DeliveryTestServer } from './webhooks-support.ts';


/** A receiver that answers 500 to an event's first attempt and 200 after: retries are in flight during the fault. */
async function flakyReceiver(t: TestContext) {
  const seen = new Map<string, number>();
  const delivered = new Set<string>();
  const r = await scriptedReceiver(t, (_n, req) => {
    const id = JSON.parse(req.body).sourceEventId as string;
    const n = (seen.get(id) ?? 0) + 1;
    seen.set(id, n);
    if (n === 1) return 500;
    delivered.add(id);
    return 200;
  });
  return { ...r, delivered, seen };
}

async function health(s: DeliveryTestServer): Promise<{ status: number; body: any }> {
  const r = await fetch(`${s.url}/healthz`);
  return { status: r.status, body: await r.json() };
}

/** Send events until one is refused (the fault bites), collecting the acknowledged ones. */
async function sendUntilRefused(s: DeliveryTestServer, acknowledged: string[], max = 400) {
  for (let i = 0; i < max; i++) {
    const r = await s.send(samplePayload('site_view'));
    if (r.status === 202) acknowledged.push(r.body.eventId);
    else return r;
  }
  throw new Error(`no event was refused in ${max} tries: the fault did not bite`);
}

async function recovers(s: DeliveryTestServer, receiver: Awaited<ReturnType<typeof flakyReceiver>>, acknowledged: string[]) {
  await waitFor(async () => (await health(s)).status === 200, 5_000);
  // New work goes through once the store takes writes again, without a restart.
  const after = await s.send(samplePayload('site_view'));
  assert.equal(after.status, 202);
  acknowledged.push(after.body.eventId);
  await waitFor(() => acknowledged.every((id) => receiver.delivered.has(id)), 15_000).catch(() => {
    throw new Error(`undelivered after recovery: ${acknowledged.filter((id) => !receiver.delivered.has(id)).join(', ')}`);
  });
  await waitFor(() => s.deliveries.inFlight() === 0, 5_000);
  const notDelivered = s.services.store.db
    .prepare("SELECT COUNT(*) AS n FROM webhook_deliveries WHERE status != 'delivered'")
    .get() as { n: number };
  assert.equal(notDelivered.n, 0, 'every stored delivery ends delivered');
  const metrics = await (await fetch(`${s.url}/metrics`, { headers: { authorization: `Bearer ${s.token}` } })).text();
  assert.match(metrics, /^switchyard_webhook_attempts_in_flight 0$/m, 'no slot leaked');
}

test('a full disk: events refused with 507 and a hint, /healthz failing, then the queue resumes by itself', async (t) => {
  const dir = tmpfs(t, 24);
  if (!dir) return t.skip('cannot mount a tmpfs here (needs root)');
  const s = await deliveryServer(t, { data_dir: join(dir, 'data'), webhooks: { base_delay: 100, jitter: 0, max_retries: 5 } });
  const receiver = await flakyReceiver(t);
  await s.subscribe(receiver.url, ['site_view']);
  const acknowledged: string[] = [];
  for (let i = 0; i < 20; i++) {
    const r = await s.send(samplePayload('site_view'));
    assert.equal(r.status, 202);
    acknowledged.push(r.body.eventId);
  }

  // Fill the disk to the last byte.
  const filler = join(dir, 'filler');
  const fd = openSync(filler, 'w');
  const chunk = Buffer.alloc(256 * 1024, 1);
  try {
    for (;;) writeSync(fd, chunk);
  } catch (e) {
    assert.equal((e as NodeJS.ErrnoException).code, 'ENOSPC');
  }
  try {
    for (;;) writeSync(fd, chunk.subarray(0, 512));
  } catch {
    /* full */
  }
  closeSync(fd);

  const refused = await sendUntilRefused(s, acknowledged);
  assert.equal(refused.status, 507);
  assert.equal(refused.body.error.code, 'storage_full');
  assert.match(refused.body.error.message, /disk is full .*nothing was stored/);
  assert.match(refused.body.error.hint, /free space on the disk that holds .*send the request again/);
  const failing = await health(s);
  assert.equal(failing.status, 503);
  assert.equal(failing.body.store, 'failing');
  assert.equal(failing.body.store_error.code, 'storage_full');

  rmSync(filler);
  await recovers(s, receiver, acknowledged);
});

test('an immutable WAL file (chattr +i): 503 with a hint while it lasts, then the queue resumes by itself', async (t) => {
  const probe = spawnSync('chattr', ['--help']);
  if (probe.error) return t.skip('chattr is not installed');
  const s = await deliveryServer(t, { webhooks: { base_delay: 100, jitter: 0, max_retries: 5 } });
  const receiver = await flakyReceiver(t);
  await s.subscribe(receiver.url, ['site_view']);
  const acknowledged: string[] = [];
  for (let i = 0; i < 20; i++) acknowledged.push((await s.send(samplePayload('site_view'))).body.eventId);
  const wal = `${s.services.store.file}-wal`;
  if (spawnSync('chattr', ['+i', wal]).status !== 0) return t.skip('chattr +i is not permitted here (needs root on ext4)');
  let locked = true;
  t.after(() => {
    if (locked) spawnSync('chattr', ['-i', wal]);
  });

  const refused = await sendUntilRefused(s, acknowledged);
  assert.equal(refused.status, 503);
  assert.match(refused.body.error.code, /^storage_(read_only|failed)$/);
  assert.match(refused.body.error.message, /nothing was stored/);
  assert.equal((await health(s)).body.store, 'failing');

  execFileSync('chattr', ['-i', wal]);
  locked = false;
  await recovers(s, receiver, acknowledged);
});
