/**
 * Three `switchyard serve` nodes on one PostgreSQL queue, as users run them (real processes, real
 * HTTP, one database): 3,000 events in batches spread over the nodes, a receiver that answers 500
 * to the first attempt of every 5th event (and to the first two of every 25th), one node kill -9'd
 * twice mid-stream: restarted the first time only after its leases ran out (the other nodes take
 * them), at once the second time (it takes back its own). Shown, from the receiver's log and the
 * attempt rows:
 *   - every acknowledged event delivered (a 200 reached the receiver, the delivery is `delivered`);
 *   - every retry inside its window: scheduled base_delay·2^(n-1)·[1, 1+jitter] after its attempt
 *     ended, and sent no earlier than scheduled and not much later; a delivery whose lease the
 *     killed node held is sent again only after that lease ran out (or by the node itself, after
 *     its restart recorded the attempt as interrupted);
 *   - duplicates only there: a delivery received more often than its attempts were recorded (or
 *     answered 200 twice) must have had its lease held by the killed node at the kill. Counted and
 *     printed.
 * One serving process per node (server.processes: 1): a kill -9 then takes the whole node, with no
 * supervisor to give its leases back early (that path is test/processes.test.ts's), and 3 nodes,
 * PostgreSQL, the receiver and the sender fit on 2 cores.
 * Skipped where PostgreSQL cannot be started (test/helpers/postgres.ts says why).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { cpSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import pg from 'pg';
import { adminApi, ROOT, tmpDir, waitFor } from './helpers/index.ts';
import { adminSql, postgresFor } from './helpers/postgres.ts';
import { samplePayload } from '../src/events/index.ts';
import { retryDelay } from '../src/webhooks/policy.ts';

const TOKEN = 'test-admin-token-postgres-nodes';
const NODES = 3;
const EVENTS = 3000;
const BATCH = 50;
const BATCHES = EVENTS / BATCH;
/** One batch every this many ms (round robin over the nodes that are up): the stream lasts ~BATCHES·PACE. */
const PACE_MS = 400;
/**
 * And no more while this many acknowledged events wait for their first attempt: the stream stays
 * below what the machine delivers (less on a busy one, e.g. beside other test files), so a retry
 * waits for its time, not for a backlog.
 */
const MAX_BACKLOG = 4 * BATCH;
/** The webhooks settings every node gets (docs/configuration.md). */
const WEBHOOKS = {
  timeout: 1_000,
  // The shortest lease the server takes: timeout + 5 s (src/webhooks/sender-leases.ts raises a shorter one).
  lease: 1_000 + 5_000,
  base_delay: 500,
  jitter: 0.5,
  // At most 2 answers of 500 per event, and an attempt lost to a kill is not counted: room to spare.
  max_retries: 4,
  per_endpoint_concurrency: 8,
  concurrency: 32,
};
/** How often a node looks for due work it did not schedule itself (src/webhooks/due-signals.ts: REFRESH_MS). */
const POLL_MS = 1_000;
/**
 * How late a due attempt may go out: the poll (a retry scheduled by a node that was then killed is
 * found by another node's next look), plus room for this shared 2-core machine (3 nodes,
 * PostgreSQL, receiver and sender on it) and for the due work that queues for free slots. The
 * lateness seen is printed.
 */
const LATE_MS = POLL_MS + 4_000;
/** The receiver holds each answer this long, so a kill finds attempts in flight. */
const HOLD_MS = 20;

/** How many first attempts of event number `i` are answered 500. */
const failuresFor = (i: number) => (i % 25 === 0 ? 2 : i % 5 === 0 ? 1 : 0);

interface Receipt {
  eventId: string;
  deliveryId: string;
  at: number;
  status: number;
}

interface Node {
  index: number;
  dataDir: string;
  configFile: string;
  child?: ChildProcess;
  url?: string;
  id?: string;
  up: boolean;
  output: string;
}

interface Kill {
  node: number;
  pid: number;
  /** Just before SIGKILL. */
  at: number;
  /** The deliveries the node held a lease on when it died (its connections gone). */
  leases: Map<string, { until: number; owner: string }>;
  /** When it served again. */
  restartedAt?: number;
}

test('3 nodes on one PostgreSQL queue, 3,000 events, one node kill -9 twice: every acknowledged event delivered, retries in their windows, duplicates only after a kill', async (t) => {
  const server = await postgresFor(t);
  if (!server) return;
  adminSql(server.url, 'CREATE DATABASE nodes');
  const url = new URL(server.url);
  url.pathname = '/nodes';
  const db = new pg.Client({ connectionString: url.toString() });
  db.on('error', () => {}); // the server is stopped (immediate) before this client ends
  await db.connect();
  t.after(() => db.end().catch(() => {}));

  // --- the receiver --------------------------------------------------------------------------
  const receipts: Receipt[] = [];
  const seen = new Map<string, number>();
  const acked = new Set<string>();
  /** Acknowledged events the receiver has seen (the backlog is the others). */
  let ackedSeen = 0;
  const ack = (id: string) => {
    if (acked.has(id)) return;
    acked.add(id);
    if (seen.has(id)) ackedSeen++;
  };
  let aborted = 0;
  const receiver = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('aborted', () => aborted++);
    req.on('end', () => {
      const at = Date.now();
      // The event's id (each delivery has its own eventId; this test follows events).
      const eventId = String(JSON.parse(Buffer.concat(chunks).toString('utf8')).sourceEventId);
      const deliveryId = String(req.headers['x-platform-delivery-id']);
      const n = seen.get(eventId) ?? 0;
      seen.set(eventId, n + 1);
      if (n === 0 && acked.has(eventId)) ackedSeen++;
      const number = Number(/_(\d+)$/.exec(eventId)?.[1] ?? -1);
      const status = n < failuresFor(number) ? 500 : 200;
      receipts.push({ eventId, deliveryId, at, status });
      setTimeout(() => res.writeHead(status, { 'content-type': 'application/json' }).end('{}'), HOLD_MS);
    });
  });
  receiver.listen(0, '127.0.0.1');
  await once(receiver, 'listening');
  t.after(() => receiver.close());
  receiver.keepAliveTimeout = 30_000;
  const hook = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;

  // --- the nodes -------------------------------------------------------------------------------
  const dir = tmpDir(t);
  const integrations = join(dir, 'integrations');
  cpSync(join(ROOT, 'integrations/webhook'), join(integrations, 'webhook'), { recursive: true });
  const nodes: Node[] = Array.from({ length: NODES }, (_, index) => {
    const home = join(dir, `node${index}`);
    mkdirSync(home);
    const configFile = join(home, 'config.yaml');
    writeFileSync(
      configFile,
      [
        'server:',
        '  port: 0',
        '  processes: 1',
        `store: ${JSON.stringify(url.toString())}`,
        `data_dir: ${JSON.stringify(join(home, 'data'))}`,
        `integrations_dir: ${JSON.stringify(integrations)}`,
        `admin_token: ${TOKEN}`,
        'log:',
        '  format: json',
        'webhooks:',
        '  allow_private_networks: true',
        `  timeout: ${WEBHOOKS.timeout}ms`,
        `  lease: ${WEBHOOKS.lease}ms`,
        `  base_delay: ${WEBHOOKS.base_delay}ms`,
        `  jitter: ${WEBHOOKS.jitter}`,
        `  max_retries: ${WEBHOOKS.max_retries}`,
        `  per_endpoint_concurrency: ${WEBHOOKS.per_endpoint_concurrency}`,
        `  concurrency: ${WEBHOOKS.concurrency}`,
      ].join('\n'),
    );
    return { index, dataDir: join(home, 'data'), configFile, up: false, output: '' };
  });

  /** A node's process group (with processes: 1 the node is one process; the group takes anything it started). */
  const killGroup = (child: ChildProcess | undefined) => {
    if (child?.pid && child.exitCode === null && child.signalCode === null) {
      try {
        process.kill(-child.pid, 'SIGKILL');
      } catch {
        /* gone */
      }
    }
  };
  t.after(() => nodes.forEach((n) => killGroup(n.child)));

  async function start(node: Node): Promise<void> {
    const child = spawn(process.execPath, ['--no-node-snapshot', join(ROOT, 'src/main.ts'), 'serve', '--config', node.configFile], {
      cwd: ROOT,
      env: { ...process.env, NO_COLOR: '1' },
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    node.child = child;
    const start = node.output.length;
    const onData = (d: Buffer) => (node.output += d);
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    const m = await waitFor(
      () => {
        if (child.exitCode !== null) throw new Error(`node ${node.index} exited (${child.exitCode}):\n${node.output.slice(start)}`);
        return /"msg":"switchyard serving","url":"(http:\/\/[^"]+)"/.exec(node.output.slice(start));
      },
      60_000,
      50,
    );
    node.url = m[1];
    await waitFor(async () => (await fetch(`${node.url}/readyz`)).status === 200, 30_000, 50);
    node.id = readFileSync(join(node.dataDir, 'node-id'), 'utf8').trim();
    node.up = true;
  }

  const api = (node: Node, method: string, path: string, body?: unknown) => adminApi(String(node.url), TOKEN, method, path, body);

  // One after the other: they migrate under an advisory lock anyway, and 2 cores start one faster.
  for (const n of nodes) await start(n);
  assert.equal(new Set(nodes.map((n) => n.id)).size, NODES, 'each node has its own id');
  const inst = await api(nodes[0], 'POST', '/api/v1/installations', { integration: 'webhook', configuration: { webhook_url: hook, event_types: 'site_view' } });
  assert.equal(inst.status, 201, JSON.stringify(inst.body));

  let notAcked = 0;
  const otherAnswers: string[] = [];
  const run = Date.now().toString(36);
  let eventNumber = 0;
  const event = () => samplePayload('site_view', { eventId: `evt_${run}_${++eventNumber}` });
  // Every node fans out to the installation made on node 0 (it learns it from the store).
  for (const n of nodes) {
    await waitFor(
      async () => {
        const e = event();
        const r = await api(n, 'POST', '/api/v1/events', e);
        assert.equal(r.status, 202, JSON.stringify(r.body));
        ack(e.eventId as string);
        return r.body.deliveries.length === 1;
      },
      10_000,
      100,
    );
  }

  // --- the stream, and the kills -------------------------------------------------------------
  const kills: Kill[] = [];
  const victim = nodes[1];

  /** kill -9 of the victim's process group; its leases as they stood when it died (once its connections were gone). */
  async function kill(): Promise<Kill> {
    const child = victim.child!;
    const pid = child.pid!;
    victim.up = false;
    const exited = once(child, 'exit');
    const at = Date.now();
    process.kill(-pid, 'SIGKILL');
    await exited;
    // PostgreSQL rolls back what the dead connection left open: the leases are what it committed.
    await waitFor(
      async () => {
        const r = await db.query('SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = ANY($1)', [
          [`switchyard ${pid}`, `switchyard ${pid} (listen)`],
        ]);
        return r.rows[0].n === 0;
      },
      10_000,
      5,
    );
    const r = await db.query('SELECT id, lease_until, lease_owner FROM webhook_deliveries WHERE lease_owner LIKE $1', [`${victim.id}.%`]);
    const k: Kill = {
      node: victim.index,
      pid,
      at,
      leases: new Map(r.rows.map((x) => [x.id as string, { until: Number(x.lease_until), owner: x.lease_owner as string }])),
    };
    assert.ok(
      [...k.leases.values()].every((l) => l.until > Date.now()),
      'the snapshot was taken before any of its leases ran out',
    );
    kills.push(k);
    return k;
  }

  const post = async (node: Node, batch: Record<string, unknown>[]) => {
    const res = await fetch(`${node.url}/api/v1/events`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify(batch),
    }).catch(() => null);
    const body = res ? await res.text().catch(() => '') : '';
    if (res?.status === 202) for (const e of batch) ack(e.eventId as string);
    else {
      // Only a batch sent to the node being killed may go unanswered; every answer is a 202.
      if (res) otherAnswers.push(`${res.status} ${body.slice(0, 300)}`);
      notAcked += batch.length;
    }
  };

  const inFlight = new Set<Promise<void>>();
  const send = (node: Node, batch: Record<string, unknown>[]) => {
    const p = post(node, batch).finally(() => inFlight.delete(p));
    inFlight.add(p);
    return p;
  };
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
  const KILL_AT = [Math.floor(BATCHES * 0.3), Math.floor(BATCHES * 0.7)];
  let restarting: Promise<void> | undefined;
  const streamStart = Date.now();
  let rr = 0;
  let heldBack = 0;
  for (let b = 0; b < BATCHES; b++) {
    if (acked.size - ackedSeen > MAX_BACKLOG) {
      const since = Date.now();
      await waitFor(() => acked.size - ackedSeen <= MAX_BACKLOG, 60_000, 20);
      heldBack += Date.now() - since;
    }
    const paced = sleep(PACE_MS);
    const batch = Array.from({ length: BATCH }, event);
    if (KILL_AT.includes(b)) {
      // The second kill waits for the node to be back from the first.
      await restarting;
      // A batch the victim acknowledges (its deliveries are in flight when it dies), then one it
      // is taking when it dies (not acknowledged: not counted, delivered or not).
      await send(victim, batch);
      void send(victim, Array.from({ length: BATCH }, event));
      await sleep(15);
      const k = await kill();
      const first = kills.length === 1;
      restarting = (async () => {
        // First kill: back only once its leases ran out, so the other nodes take them. Second: at once.
        if (first) await sleep(WEBHOOKS.lease + POLL_MS);
        await start(victim);
        k.restartedAt = Date.now();
      })();
      restarting.catch(() => {}); // awaited below (a failed start fails the test there)
    } else {
      let node = nodes[rr++ % NODES];
      if (!node.up) node = nodes[rr++ % NODES];
      void send(node, batch);
    }
    await paced;
  }
  await Promise.all(inFlight);
  await restarting;
  const streamMs = Date.now() - streamStart;
  assert.equal(kills.length, 2);
  assert.deepEqual(otherAnswers, [], 'every batch answered was acknowledged whole');

  // --- drained -----------------------------------------------------------------------------------
  const delivered = () => new Set(receipts.filter((r) => r.status === 200).map((r) => r.eventId));
  await waitFor(
    async () => {
      const got = delivered();
      if (![...acked].every((id) => got.has(id))) return false;
      const r = await db.query(`SELECT count(*)::int AS n FROM webhook_deliveries WHERE status <> 'delivered' OR lease_owner IS NOT NULL`);
      return r.rows[0].n === 0;
    },
    90_000,
    250,
  ).catch(async (e) => {
    const got = delivered();
    const missing = [...acked].filter((id) => !got.has(id));
    const state = await db.query(
      `SELECT status, count(*)::int AS n, count(lease_owner)::int AS leased, min(next_attempt_at) AS next FROM webhook_deliveries GROUP BY status`,
    );
    for (const n of nodes) t.diagnostic(`node ${n.index} log tail:\n${n.output.slice(-3000)}`);
    assert.fail(
      `${missing.length} acknowledged events not delivered (${missing.slice(0, 5).join(', ')}); queue: ${JSON.stringify(state.rows)}; now ${Date.now()}: ${(e as Error).message}`,
    );
  });
  const drainedMs = Date.now() - streamStart;

  // --- what the store recorded ---------------------------------------------------------------------
  const deliveries = (await db.query('SELECT seq, id, event_id, status, attempts, lease_owner FROM webhook_deliveries')).rows;
  const attempts = (
    await db.query(
      'SELECT delivery_seq, id, number, manual, started_at, duration_ms, status, outcome, error_code, next_attempt_at FROM webhook_attempts ORDER BY delivery_seq, id',
    )
  ).rows.map((a) => ({ ...a, started_at: Number(a.started_at), next_attempt_at: a.next_attempt_at === null ? null : Number(a.next_attempt_at) }));
  const rowsOf = new Map<number, typeof attempts>();
  for (const a of attempts) {
    const seq = Number(a.delivery_seq);
    rowsOf.set(seq, [...(rowsOf.get(seq) ?? []), a]);
  }
  const receiptsOf = new Map<string, Receipt[]>();
  for (const r of receipts) receiptsOf.set(r.deliveryId, [...(receiptsOf.get(r.deliveryId) ?? []), r]);

  // Every acknowledged event: one delivery, delivered, a 200 at the receiver.
  const byEvent = new Map(deliveries.map((d) => [d.event_id as string, d]));
  for (const id of acked) {
    const d = byEvent.get(id);
    assert.ok(d, `acknowledged event ${id} has a delivery`);
    assert.equal(d.status, 'delivered', `delivery of ${id}`);
  }
  assert.ok(acked.size >= EVENTS - 2 * BATCH, `nearly every event acknowledged (${acked.size})`);
  assert.equal(deliveries.length, new Set(deliveries.map((d) => d.event_id)).size, 'one delivery per event');

  // Windows and duplicates, delivery by delivery.
  const heldAtKill = (id: string) => kills.filter((k) => k.leases.has(id));
  const problems: string[] = [];
  const lateness: number[] = [];
  let retries = 0;
  /** Deliveries the receiver got more often than their attempts were recorded: a send whose outcome died with its node. */
  let duplicated = 0;
  let duplicatedAfterExpiry = 0;
  let duplicatedAfterRestart = 0;
  /** Of those, answered 200 more than once (the receiver took the same delivery twice). */
  let twice200 = 0;
  let unexplained = 0;
  let reclaimedAfterExpiry = 0;
  let retakenAtRestart = 0;
  const leaseWaits: number[] = [];
  for (const d of deliveries) {
    const id = d.id as string;
    const rows = rowsOf.get(Number(d.seq)) ?? [];
    const got = (receiptsOf.get(id) ?? []).sort((a, b) => a.at - b.at);
    const sent = rows.filter((r) => r.status !== null);
    const automatic = rows.filter((r) => r.outcome !== 'interrupted' && !r.manual);
    const lost = got.length - sent.length;
    const twice = got.filter((r) => r.status === 200).length > 1;
    const held = heldAtKill(id);
    if (lost < 0) problems.push(`${id}: ${sent.length} attempts recorded with an answer, ${got.length} received`);
    // Every attempt made changed the delivery (none was recorded late, after its lease was taken over).
    if (automatic.length !== Number(d.attempts)) problems.push(`${id}: ${automatic.length} attempts recorded, the delivery counts ${d.attempts}`);
    // The answers recorded are those the receiver gave, in order, less the ones lost to a kill.
    let i = 0;
    for (const r of got) if (i < sent.length && r.status === sent[i].status) i++;
    if (i < sent.length) problems.push(`${id}: recorded answers ${sent.map((s) => s.status)} are not among those given ${got.map((g) => g.status)}`);
    if (lost > 0 || twice) {
      duplicated++;
      if (twice) twice200++;
      if (!held.length || lost > held.length) {
        unexplained++;
        problems.push(
          `${id}: ${lost} sends whose outcome was never recorded${twice ? ', answered 200 twice,' : ''} but the killed node held its lease at ${held.length} kill(s)`,
        );
      }
    }

    // Scheduled retries: each `retry` attempt schedules the next one base·2^(n-1)·[1, 1+jitter] after it ended.
    let made = 0;
    for (const r of rows) {
      if (r.outcome === 'interrupted' || r.manual) continue;
      made++;
      if (r.outcome !== 'retry') continue;
      retries++;
      const min = retryDelay(made, { ...WEBHOOKS, jitter: 0 });
      const max = retryDelay(made, WEBHOOKS, () => 1);
      const ended = r.started_at + Number(r.duration_ms);
      const wait = r.next_attempt_at! - ended;
      if (wait < min - 2 || wait > max + 5)
        problems.push(`${id}: retry ${made} scheduled ${wait.toFixed(1)} ms after attempt ${made} ended, window [${min}, ${max}]`);
      // Sent: the next request the receiver got, no earlier than scheduled, not much later.
      const next = got.find((g) => g.at > ended);
      if (!next) problems.push(`${id}: retry ${made} due at ${r.next_attempt_at} never arrived`);
      else {
        lateness.push(next.at - r.next_attempt_at!);
        // A retry the killed node had claimed ahead waits for that lease to run out first.
        const late = held.length ? LATE_MS + WEBHOOKS.lease : LATE_MS;
        if (next.at < r.next_attempt_at! || next.at > r.next_attempt_at! + late)
          problems.push(`${id}: retry ${made} due at ${r.next_attempt_at} arrived at ${next.at} (${next.at - r.next_attempt_at!} ms)`);
      }
      // Recorded: the attempt after it started no earlier (exact: the claim compares the same clock).
      const after = rows[rows.indexOf(r) + 1];
      if (after && after.outcome !== 'interrupted' && after.started_at < r.next_attempt_at!)
        problems.push(`${id}: attempt after retry ${made} started at ${after.started_at}, before it was due (${r.next_attempt_at})`);
    }

    // A lease the killed node held: the delivery is taken again only once it ran out (another node),
    // or by the node itself after its restart (an `interrupted` attempt row first).
    for (const k of held) {
      const lease = k.leases.get(id)!;
      const following = rows.filter((r) => r.started_at >= k.at);
      const first = following[0];
      if (!first) {
        problems.push(`${id}: leased by the node killed at ${k.at}, no attempt after it`);
        continue;
      }
      if (first.outcome === 'interrupted') {
        retakenAtRestart++;
        if (lost > 0) duplicatedAfterRestart++;
        if (k.restartedAt !== undefined && first.started_at > k.restartedAt)
          problems.push(`${id}: recorded interrupted at ${first.started_at}, not by the restart after the kill at ${k.at}`);
        const resent = following[1];
        if (!resent || resent.started_at > first.started_at + LATE_MS)
          problems.push(`${id}: taken back at restart (${first.started_at}), sent again at ${resent?.started_at}`);
      } else {
        reclaimedAfterExpiry++;
        if (lost > 0) duplicatedAfterExpiry++;
        leaseWaits.push(first.started_at - lease.until);
        if (first.started_at < lease.until) problems.push(`${id}: lease of the killed node ran until ${lease.until}, taken again at ${first.started_at}`);
        if (first.started_at > lease.until + LATE_MS) problems.push(`${id}: lease ran out at ${lease.until}, taken again only at ${first.started_at}`);
      }
    }
  }

  const sorted = [...lateness].sort((a, b) => a - b);
  const pct = (p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
  const warnings = new Map<string, number>();
  for (const n of nodes)
    for (const m of n.output.matchAll(/"level":"(warn|error)".*?"msg":"([^"]*)"/g))
      warnings.set(`${m[1]}: ${m[2]}`, (warnings.get(`${m[1]}: ${m[2]}`) ?? 0) + 1);
  t.diagnostic(
    `${acked.size} events acknowledged (${notAcked} sent to the node being killed and not acknowledged), ${deliveries.length} deliveries, ` +
      `${receipts.length} requests received (${aborted} cut off); stream ${(streamMs / 1000).toFixed(1)} s (${(heldBack / 1000).toFixed(1)} s of it held back by a backlog), queue drained ${((drainedMs - streamMs) / 1000).toFixed(1)} s after it`,
  );
  t.diagnostic(
    `${retries} retries, each scheduled in [base·2^(n-1), base·2^(n-1)·(1+${WEBHOOKS.jitter})] after its attempt ended; sent late by p50 ${pct(50)} ms, p99 ${pct(99)} ms, max ${pct(100)} ms (allowed ${LATE_MS})`,
  );
  for (const k of kills)
    t.diagnostic(
      `kill -9 of node ${k.node} (pid ${k.pid}) at +${((k.at - streamStart) / 1000).toFixed(1)} s: it held ${k.leases.size} leases; serving again at +${(((k.restartedAt ?? NaN) - streamStart) / 1000).toFixed(1)} s`,
    );
  t.diagnostic(
    `leases of the killed node: ${reclaimedAfterExpiry} taken by another node once they ran out (at most ${leaseWaits.length ? Math.max(...leaseWaits) : 0} ms after), ` +
      `${retakenAtRestart} taken back by the node at its restart`,
  );
  t.diagnostic(
    `duplicates: ${duplicated} deliveries received more often than their attempts were recorded, ${duplicated - unexplained} of them leased by the killed node when it died: ` +
      `${duplicatedAfterExpiry} sent again by another node after the lease expired, ${duplicatedAfterRestart} by the node after its restart; ` +
      `${twice200} of them answered 200 twice; duplicates without a kill: ${unexplained}`,
  );
  t.diagnostic(`node logs: ${[...warnings].map(([m, n]) => `${n}× ${m}`).join('; ') || 'no warnings or errors'}`);
  assert.deepEqual(problems.slice(0, 20), [], `${problems.length} problems`);
  assert.ok(
    kills.some((k) => k.leases.size > 0),
    'a kill found leases held (the lease paths were exercised)',
  );
  assert.ok(retries > EVENTS / 5, `retries were made (${retries})`);
});
