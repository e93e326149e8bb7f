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
import { existsSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { samplePayload } from '../src/events/index.ts';
import { fillDisk, spawnCli, tmpDir, tmpfs, waitFor } from './helpers/index.ts';
import { deliveryServer, scriptedReceiver, type DeliveryTestServer } from './webhooks-support.ts';
import { openStore } from '../src/store/index.ts';
import { memoryLogger } from '../src/log/index.ts';

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
  // An attempt's slot is free before its outcome is written (the record turn comes after): the rows
  // say delivered a moment after the receiver saw the last one.
  const notDelivered = () =>
    s.services.store.sqlite!.prepare("SELECT id, event_id, status, attempts, next_attempt_at FROM webhook_deliveries WHERE status != 'delivered'").all();
  await waitFor(() => notDelivered().length === 0, 5_000).catch(() => {
    throw new Error(`every stored delivery ends delivered; these did not: ${JSON.stringify(notDelivered())} (acknowledged: ${acknowledged.join(', ')})`);
  });
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

  const filler = fillDisk(dir);

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

test('a full disk stays failing while a small write still fits (one into WAL pages already there): it clears once the disk has room and a write succeeds', async (t) => {
  const dir = tmpfs(t, 8);
  if (!dir) return t.skip('cannot mount a tmpfs here (needs root)');
  const store = openStore(join(dir, 'data'));
  t.after(() => store.close());
  const write = (at: number) => store.sqlite!.prepare('INSERT INTO store_probe (id, at) VALUES (1, ?) ON CONFLICT(id) DO UPDATE SET at = excluded.at').run(at);
  // A WAL with room in it: frames written, then checkpointed, so the next writer starts over at its beginning.
  for (let i = 0; i < 50; i++) write(i);
  store.sqlite!.pragma('wal_checkpoint(RESTART)');
  const filler = fillDisk(dir);
  // An event's worth that does not fit, reported as the API reports it.
  let refused: unknown;
  assert.throws(
    () => {
      try {
        store.sqlite!.exec('CREATE TABLE big AS SELECT randomblob(1000000) AS b');
      } catch (e) {
        refused = e;
        throw e;
      }
    },
    { code: 'SQLITE_FULL' },
  );
  store.health.failed(refused);
  // What a sender's record did between an event's 507 and /healthz in a CI run: a write that fit.
  write(100);
  store.health.ok();
  const still = store.health.status();
  assert.equal(still.ok, false, 'a write that fit on a full disk cleared the failure');
  assert.equal(!still.ok && still.code, 'storage_full');
  rmSync(filler);
  store.health.ok();
  assert.deepEqual(store.health.status(), { ok: true });
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

test('a write lock another process holds past the lock wait: events refused with 503 storage_busy, /healthz failing, then the queue resumes by itself', async (t) => {
  const s = await deliveryServer(t, { webhooks: { base_delay: 100, jitter: 0, max_retries: 5 } });
  const receiver = await flakyReceiver(t);
  await s.subscribe(receiver.url, ['site_view']);
  const acknowledged: string[] = [];
  for (let i = 0; i < 5; i++) acknowledged.push((await s.send(samplePayload('site_view'))).body.eventId);
  await waitFor(() => acknowledged.every((id) => receiver.delivered.has(id)), 10_000);
  // Another process (a backup, a tool) takes the write lock and keeps it past the store's 5 s wait.
  const other = openStore(s.config.data_dir);
  t.after(() => other.close());
  // Taken without waiting in SQLite's busy handler: that would hold this process's event loop, and
  // with it the server (in this process) whose transaction it waits for.
  other.sqlite!.pragma('busy_timeout = 0');
  await waitFor(() => {
    try {
      other.sqlite!.exec('BEGIN IMMEDIATE');
      return true;
    } catch {
      return false;
    }
  }, 10_000);
  let held = true;
  t.after(() => {
    if (held) other.sqlite!.exec('ROLLBACK');
  });
  const refusedEvent = samplePayload('site_view');
  const refused = await s.send(refusedEvent);
  assert.equal(refused.status, 503, JSON.stringify(refused.body));
  assert.equal(refused.body.error.code, 'storage_busy');
  // Failing from the refusal on (a loaded machine may also make a /healthz read miss its 500 ms and
  // say unavailable for a moment: looked at until it says failing).
  const failing = await waitFor(async () => {
    const h = await health(s);
    return h.body.store === 'failing' ? h : undefined;
  }, 10_000);
  assert.equal(failing.status, 503, JSON.stringify(failing.body));
  assert.equal(failing.body.store_error.code, 'storage_busy');

  other.sqlite!.exec('ROLLBACK');
  held = false;
  await recovers(s, receiver, acknowledged);
  // Refused means not stored: neither the event nor a delivery of it, then or once the lock is free.
  const stored = s.services.store.sqlite!.prepare(
    'SELECT (SELECT COUNT(*) FROM events WHERE id = ?) + (SELECT COUNT(*) FROM webhook_deliveries WHERE event_id = ?) AS n',
  );
  assert.equal((stored.get(refusedEvent.eventId, refusedEvent.eventId) as { n: number }).n, 0);
});

test('after a full disk under load (serve, 2 processes): the space freed goes to a checkpoint, not the WAL; events are taken again within seconds and stay so; the WAL stays bounded', {
  timeout: 120_000,
}, async (t) => {
  const disk = tmpfs(t, 64);
  if (!disk) return t.skip('cannot mount a tmpfs here (needs root)');
  const dir = tmpDir(t);
  const token = 'test-admin-token-disk-full';
  const data = join(disk, 'data');
  const configFile = join(dir, 'config.yaml');
  writeFileSync(
    configFile,
    [
      'server:',
      '  port: 0',
      '  processes: 2',
      `data_dir: ${JSON.stringify(data)}`,
      `admin_token: ${token}`,
      'log:',
      '  format: json',
      'webhooks:',
      '  allow_private_networks: true',
      '  per_endpoint_concurrency: 16',
    ].join('\n'),
  );
  const { match, output } = await spawnCli(t, ['serve', '--config', configFile], /"msg":"switchyard serving","url":"(http:\/\/[^"]+)"/, { timeoutMs: 30_000 });
  const base = match[1];
  const call = (method: string, path: string, body?: unknown) =>
    fetch(`${base}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    }).then(async (r) => ({ status: r.status, body: (await r.json()) as any }));
  const receiver = await scriptedReceiver(t, () => 200);
  await waitFor(async () => (await call('GET', '/readyz')).status === 200, 15_000);
  const installed = await call('POST', '/api/v1/installations', {
    integration: 'webhook',
    configuration: { webhook_url: receiver.url, event_types: 'site_view' },
  });
  assert.equal(installed.status, 201, JSON.stringify(installed.body));

  // Senders that never stop, as clients that send again after a refusal (a short pause).
  const answers: Array<{ at: number; status: number; code?: string }> = [];
  let sending = true;
  const senders = Array.from({ length: 4 }, async () => {
    while (sending) {
      const r = await call('POST', '/api/v1/events', samplePayload('site_view')).catch((e: Error) => ({ status: 0, body: { error: { code: e.message } } }));
      answers.push({ at: Date.now(), status: r.status, code: r.body?.error?.code });
      if (r.status !== 202) await new Promise((res) => setTimeout(res, 20));
    }
  });
  t.after(async () => {
    sending = false;
    await Promise.all(senders);
  });
  const walFile = join(data, 'switchyard.db-wal');
  const walSize = () => (existsSync(walFile) ? statSync(walFile).size : 0);
  await waitFor(() => answers.filter((a) => a.status === 202).length >= 200, 30_000);

  // The disk filled up to the last byte, of which 24 MB are then freed: a part of the disk, as an
  // operator deleting old logs would (the events sent meanwhile need about 10 MB of it).
  const part = join(disk, 'part');
  writeFileSync(part, Buffer.alloc(24 * 1024 * 1024, 1));
  fillDisk(disk);
  await waitFor(() => answers.some((a) => a.status === 507 && a.code === 'storage_full'), 15_000);
  // Full for a while: every checkpoint and write meanwhile fails.
  await new Promise((res) => setTimeout(res, 3_000));
  const freed = statSync(part).size;
  rmSync(part);
  const freedAt = Date.now();

  const back = await waitFor(() => answers.find((a) => a.at > freedAt && a.status === 202), 15_000).catch(() => {
    const after = answers.filter((a) => a.at > freedAt);
    throw new Error(
      `no event taken in 15 s after freeing ${freed} bytes (${after.length} refused: ${[...new Set(after.map((a) => `${a.status} ${a.code}`))].join(', ')}; WAL ${walSize()} bytes)`,
    );
  });
  // It stays healthy under the same load: nothing refused from a second after the first event taken.
  let walMax = 0;
  const until = Date.now() + 6_000;
  while (Date.now() < until) {
    walMax = Math.max(walMax, walSize());
    await new Promise((res) => setTimeout(res, 25));
  }
  sending = false;
  await Promise.all(senders);
  const later = answers.filter((a) => a.at > back.at + 1_000);
  assert.ok(later.length > 100, `events were sent after the recovery (${later.length})`);
  assert.deepEqual(
    later.filter((a) => a.status !== 202).map((a) => `${a.status} ${a.code}`),
    [],
    'every event taken once the space came back',
  );
  assert.equal((await call('GET', '/healthz')).status, 200);
  // The supervisor's log says when the checkpoint failed and when it succeeded again (the last
  // word). Whether one fails while the disk is full depends on what the WAL holds then: one that
  // fits the database file's pages needs no new space (seen once under a whole suite's load).
  const said = [...output().matchAll(/"msg":"(WAL checkpoint failed; trying again as soon as the disk has room|WAL checkpoint succeeded again)"/g)].map(
    (m) => m[1],
  );
  if (said.length)
    assert.ok(
      said[0].startsWith('WAL checkpoint failed') && said.at(-1) === 'WAL checkpoint succeeded again',
      `the checkpointer's last word:\n${said.join('\n')}`,
    );
  else t.diagnostic('no checkpoint failed while the disk was full');
  t.diagnostic(`${freed} bytes freed; taken again ${back.at - freedAt} ms later; ${later.length} events after; WAL at most ${walMax} bytes`);
  // The WAL is bounded: a small part of the space that came back, not all of it.
  assert.ok(walMax < 16 * 1024 * 1024, `WAL reached ${walMax} bytes after ${freed} bytes were freed`);
});

test('a checkpoint that fails on a full disk does not stop the checkpointer: once the disk has room it empties the WAL, with no write to prompt it', async (t) => {
  const disk = tmpfs(t, 16);
  if (!disk) return t.skip('cannot mount a tmpfs here (needs root)');
  const log = memoryLogger();
  const store = openStore(join(disk, 'data'), {
    lock: true,
    log,
    migrations: [{ module: 'things', steps: ['CREATE TABLE things (id INTEGER PRIMARY KEY, v TEXT)'] }],
  });
  t.after(() => store.close());
  // Little room: the rows fill it through the WAL, so the database file has none left to take them in.
  const filler = join(disk, 'filler');
  writeFileSync(filler, Buffer.alloc(10 * 1024 * 1024, 1));
  const insert = store.sqlite!.prepare('INSERT INTO things (v) VALUES (?)');
  let full: unknown;
  try {
    for (;;)
      store.sqlite!.transaction(() => {
        for (let k = 0; k < 20; k++) insert.run('x'.repeat(800));
      })();
  } catch (e) {
    full = e;
  }
  assert.equal((full as { code?: string }).code, 'SQLITE_FULL');
  const wal = `${store.file}-wal`;
  const before = { db: statSync(store.file).size, wal: statSync(wal).size };
  assert.ok(before.wal > 1024 * 1024, `the rows are in the WAL (${before.wal} bytes)`);
  await waitFor(() => store.checkpointer!.failing(), 5_000);

  rmSync(filler);
  // Nothing writes: only the checkpointer can move the rows into the database file and empty the WAL.
  await waitFor(() => statSync(wal).size === 0, 5_000).catch(() => {
    throw new Error(`the WAL was not emptied (${statSync(wal).size} bytes; database ${statSync(store.file).size} bytes, was ${before.db})`);
  });
  assert.ok(statSync(store.file).size > before.db, 'the rows went into the database file');
  assert.ok(store.checkpointer!.running());
  // The thread says it succeeded in a message of its own, a moment after the WAL is empty.
  await waitFor(() => !store.checkpointer!.failing(), 2_000);
  // And the log says so, once each: the failure (with SQLite's code) first, its end last.
  const said = log.lines.filter((l) => String(l.msg).startsWith('WAL checkpoint'));
  assert.deepEqual(
    said.map((l) => [l.level, l.msg]),
    [
      ['warn', 'WAL checkpoint failed; trying again as soon as the disk has room'],
      ['info', 'WAL checkpoint succeeded again'],
    ],
  );
  assert.equal(said[0].code, 'SQLITE_FULL');
});
