/**
 * Durable delivery through the HTTP API, against two hand-written relays, in the same run.
 * Run: PATH=node_modules/.bin:$PATH node --no-node-snapshot scripts/bench/delivery.ts
 *
 * Five processes besides this one, all on the same machine, none pinned:
 * - `switchyard serve` as a user starts it (its default serving processes; BENCH_PROCESSES=n for
 *   another count) with a webhook installation made through the API whose URL is the receiver;
 * - the relay: a plain Node HTTP server written here, the least a sender could do over the same two
 *   hops: it checks the bearer token, parses the event, signs the body with the same scheme and
 *   POSTs it to the receiver, then answers 202. Nothing is stored: a crash loses what is in flight;
 * - the durable relay (issue 29's fair peer: it persists what it accepts): the same checks, but the
 *   events of one event-loop turn are committed to SQLite (better-sqlite3, WAL, synchronous=NORMAL)
 *   before their 202s, then signed and POSTed; the attempts of one turn are recorded in one
 *   transaction (an attempt row each, the event delivered or retried a second later); at start it
 *   re-queues the events its file holds undelivered. One process, one connection; its file in a
 *   temp folder removed when it stops, or in BENCH_RELAY_DIR, kept (to try its restart by hand);
 * - the durable relay storing Switchyard's rows (the rows relay): the same relay, but its file is made
 *   by Switchyard's own migrations (every table and index) and it writes per event what Switchyard
 *   writes, row for row, by hand (prepared statements, one transaction per turn as above): the
 *   event, its delivery stored leased, then the attempt and the delivery's final state. The durable
 *   relay against it is what Switchyard's data model costs; it against Switchyard, what the rest does;
 * - the receiver, which answers every POST at once with 200 and is also the load generator, so
 *   that latency is measured on one clock (from the start of the ingest request to the arrival).
 *
 * 1. Throughput: BENCH_N single-event POST /api/v1/events over BENCH_CONNECTIONS (64) keep-alive
 *    connections, closed loop, timed from the first request to the N-th arrival at the receiver.
 *    webhooks.per_endpoint_concurrency is raised to BENCH_PER_ENDPOINT (default: the connections),
 *    and the relay keeps to the same bound of POSTs in flight to the receiver, so at the product's
 *    default (BENCH_PER_ENDPOINT=4) both senders are held to four at once.
 *    Goal: Switchyard >= 0.8x the durable relay; its ratios to the relay that stores nothing and
 *    to the rows relay are printed beside it.
 * 2. Latency at 1,000 events/s (open loop, BENCH_LATENCY_SECONDS long): ingest-to-receiver p99.
 *    Goal: p99 < 25 ms. Also both relays' figures in the same run, and an idle pace (20/s) for switchyard and the durable relay.
 * Rounds alternate between the three senders; medians of BENCH_ROUNDS (5) are printed, with the CPU
 * each event cost each sender's processes and the receiver (from /proc), and the ratio by CPU.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { timingSafeEqual } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { samplePayload } from '../../src/events/index.ts';
import { allMigrations } from '../../src/server/migrations.ts';
import { DB_FILE, openStore } from '../../src/store/index.ts';
import { signatureHeader } from '../../src/webhooks/signature.ts';
import { ask, cpuMs, median, PEER_SECRET, percentile, processTree, readAnswer, setting, startServe } from './common.ts';

const N = setting('BENCH_N', 6000);
const CONNECTIONS = setting('BENCH_CONNECTIONS', 64);
const ROUNDS = setting('BENCH_ROUNDS', 5);
const RATE = 1000;
const LATENCY_SECONDS = setting('BENCH_LATENCY_SECONDS', 3, false);
const TOKEN = 'bench-token-0123456789';
const GOAL_RATIO = 0.8;
const GOAL_P99 = 25;

const role = process.argv[2];

// ---------------------------------------------------------------------------------------------
// The relay: bearer check, parse, sign, forward, answer. One Node process, like a hand-written one.
if (role === 'relay') {
  const expected = Buffer.from(`Bearer ${TOKEN}`);
  // At most as many POSTs in flight to the receiver as Switchyard may have (BENCH_PER_ENDPOINT):
  // the same politeness toward one receiver, so the two are compared on one bound.
  const agent = new http.Agent({ keepAlive: true, maxSockets: setting('BENCH_PER_ENDPOINT', CONNECTIONS) });
  let target = '';
  const server = http.createServer((req, res) => {
    const auth = Buffer.from(req.headers.authorization ?? '');
    if (auth.length !== expected.length || !timingSafeEqual(auth, expected)) return void res.writeHead(401).end();
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      let event: { eventId?: string; type?: unknown };
      try {
        event = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      } catch {
        return void res.writeHead(400).end();
      }
      if (typeof event.type !== 'string') return void res.writeHead(400).end();
      const body = Buffer.from(JSON.stringify({ ...event, installationId: 'inst_relay' }));
      const out = http.request(target, {
        method: 'POST',
        agent,
        headers: {
          'content-type': 'application/json',
          'content-length': body.length,
          'x-platform-signature': signatureHeader([PEER_SECRET], Math.floor(Date.now() / 1000), body),
        },
      });
      out.on('response', (r) => {
        r.resume();
        r.on('end', () => res.writeHead(202, { 'content-type': 'application/json' }).end(`{"id":"${event.eventId}"}`));
      });
      out.on('error', () => res.writeHead(502).end());
      out.end(body);
    });
  });
  process.on('disconnect', () => process.exit(0));
  process.on('message', (m: any) => {
    if (m.target) target = m.target;
  });
  server.listen(0, '127.0.0.1', () => process.send!({ port: (server.address() as AddressInfo).port }));
}

// ---------------------------------------------------------------------------------------------
// The durable relay: what it accepts is committed first, once per turn; attempts recorded once per
// turn; at start, what its file holds undelivered is sent again. As `rows-relay`, the same relay
// stores Switchyard's rows instead of its own two small tables: the file made by Switchyard's own
// migrations (every table and index), and per event what Switchyard writes, row for row (an event,
// its delivery stored leased, then an attempt and the delivery's final state), with the same
// pragmas. What separates it from the durable relay is the data model's cost; what separates
// Switchyard from it is the rest (HTTP, validation, the queue's code, the sender's).
if (role === 'durable-relay' || role === 'rows-relay') {
  const expected = Buffer.from(`Bearer ${TOKEN}`);
  const agent = new http.Agent({ keepAlive: true, maxSockets: setting('BENCH_PER_ENDPOINT', CONNECTIONS) });
  let target = '';
  const dir = process.env.BENCH_RELAY_DIR ?? mkdtempSync(join(tmpdir(), 'switchyard-bench-relay-'));
  const rows = role === 'rows-relay' ? switchyardRows(dir) : ownRows(dir);
  const { db, store, record, undelivered } = rows;
  let outcomes: RelayOutcome[] = [];
  const recordTurn = () => {
    const turn = outcomes;
    outcomes = [];
    record(turn);
  };
  const send = (id: number, body: string) => {
    const bytes = Buffer.from(body);
    const startedAt = Date.now();
    const signature = signatureHeader([PEER_SECRET], Math.floor(startedAt / 1000), bytes);
    const out = http.request(target, {
      method: 'POST',
      agent,
      headers: {
        'content-type': 'application/json',
        'content-length': bytes.length,
        'x-platform-signature': signature,
      },
    });
    const outcome = (status: number, excerpt: string | null = null) => {
      if (!outcomes.length) setImmediate(recordTurn);
      outcomes.push({ id, status, startedAt, durationMs: Date.now() - startedAt, signature, excerpt, url: target });
      // A failed attempt is tried again a second later (from the file again after a restart).
      if (status < 200 || status >= 300) setTimeout(() => send(id, body), 1000);
    };
    // Like Switchyard, the answer's first bytes are kept with the attempt.
    out.on('response', (r) => readAnswer(r, outcome));
    out.on('error', () => outcome(0));
    out.end(bytes);
  };

  let accepted: Array<RelayEvent & { res: http.ServerResponse }> = [];
  const storeTurn = () => {
    const turn = accepted;
    accepted = [];
    let ids: number[];
    try {
      ids = store(turn, target);
    } catch {
      for (const a of turn) a.res.writeHead(503).end();
      return;
    }
    turn.forEach((a, i) => {
      a.res.writeHead(202, { 'content-type': 'application/json' }).end(`{"id":"${a.eventId}"}`);
      send(ids[i], a.body);
    });
  };
  const server = http.createServer((req, res) => {
    const auth = Buffer.from(req.headers.authorization ?? '');
    if (auth.length !== expected.length || !timingSafeEqual(auth, expected)) return void res.writeHead(401).end();
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      let event: { eventId?: string; type?: unknown };
      try {
        event = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      } catch {
        return void res.writeHead(400).end();
      }
      if (typeof event.type !== 'string') return void res.writeHead(400).end();
      if (!accepted.length) setImmediate(storeTurn);
      accepted.push({ eventId: String(event.eventId), type: event.type, body: JSON.stringify({ ...event, installationId: 'inst_relay' }), res });
    });
  });
  const quit = () => {
    db.close();
    if (!process.env.BENCH_RELAY_DIR) rmSync(dir, { recursive: true, force: true });
    process.exit(0);
  };
  process.on('disconnect', quit);
  process.on('SIGTERM', quit);
  process.on('message', (m: any) => {
    if (!m.target) return;
    target = m.target;
    // What a previous run accepted and did not deliver goes out again, once there is somewhere to send it.
    for (const r of undelivered()) send(r.id, r.body);
  });
  server.listen(0, '127.0.0.1', () => process.send!({ port: (server.address() as AddressInfo).port }));
}

interface RelayEvent {
  eventId: string;
  type: string;
  body: string;
}
interface RelayOutcome {
  id: number;
  status: number;
  startedAt: number;
  durationMs: number;
  signature: string;
  excerpt: string | null;
  url: string;
}
interface RelayRows {
  db: Database.Database;
  /** A turn's events, in one transaction: each one's id to send it by. */
  store(batch: RelayEvent[], url: string): number[];
  /** A turn's attempts, in one transaction. */
  record(outcomes: RelayOutcome[]): void;
  undelivered(): Array<{ id: number; body: string }>;
}

function openRelayFile(file: string): Database.Database {
  const db = new Database(file);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  return db;
}

/** The durable relay's own two tables: an event row, and an attempt row with the event's update. */
function ownRows(dir: string): RelayRows {
  const db = openRelayFile(join(dir, 'relay.db'));
  db.exec(`
    CREATE TABLE IF NOT EXISTS events (id INTEGER PRIMARY KEY, event_id TEXT NOT NULL, body TEXT NOT NULL,
      delivered INTEGER NOT NULL DEFAULT 0, attempts INTEGER NOT NULL DEFAULT 0);
    CREATE INDEX IF NOT EXISTS events_undelivered ON events (id) WHERE delivered = 0;
    CREATE TABLE IF NOT EXISTS attempts (id INTEGER PRIMARY KEY, event INTEGER NOT NULL, status INTEGER NOT NULL, at INTEGER NOT NULL);
  `);
  const insertEvent = db.prepare('INSERT INTO events (event_id, body) VALUES (?, ?)');
  const insertAttempt = db.prepare('INSERT INTO attempts (event, status, at) VALUES (?, ?, ?)');
  const delivered = db.prepare('UPDATE events SET delivered = 1, attempts = attempts + 1 WHERE id = ?');
  const retried = db.prepare('UPDATE events SET attempts = attempts + 1 WHERE id = ?');
  return {
    db,
    store: db.transaction((batch: RelayEvent[]) => batch.map((b) => Number(insertEvent.run(b.eventId, b.body).lastInsertRowid))),
    record: db.transaction((outcomes: RelayOutcome[]) => {
      const at = Date.now();
      for (const o of outcomes) {
        insertAttempt.run(o.id, o.status, at);
        (o.status >= 200 && o.status < 300 ? delivered : retried).run(o.id);
      }
    }),
    undelivered: () => db.prepare('SELECT id, body FROM events WHERE delivered = 0 ORDER BY id').all() as Array<{ id: number; body: string }>,
  };
}

/**
 * Switchyard's rows, written by hand: its schema from its own migrations, and per event its events
 * row, its delivery row stored leased (as Switchyard stores a delivery whose endpoint has a free
 * slot), then the attempt's row and the delivery's final state (or its retry a second later).
 */
function switchyardRows(dir: string): RelayRows {
  openStore(dir, { migrations: allMigrations() }).close();
  const db = openRelayFile(join(dir, DB_FILE));
  db.pragma('foreign_keys = ON');
  const insertEvent = db.prepare(
    'INSERT INTO events (id, type, installation_id, payload, received_at, delivery_count) VALUES (?, ?, ?, ?, ?, 1) ON CONFLICT (id) DO NOTHING',
  );
  const insertDelivery = db.prepare(
    `INSERT INTO webhook_deliveries (id, event_id, event_type, installation_id, url, origin, body, status, next_attempt_at, lease_until, lease_owner, created_at, updated_at)
     VALUES (?, ?, ?, 'inst_relay', ?, ?, ?, 'pending', ?, ?, 'relay', ?, ?)`,
  );
  const insertAttempt = db.prepare(
    `INSERT INTO webhook_attempts (delivery_seq, number, manual, started_at, duration_ms, url, signature, status, outcome, response_excerpt, response_truncated, next_attempt_at)
     VALUES (?, (SELECT attempts + 1 FROM webhook_deliveries WHERE seq = ?), 0, ?, ?, ?, ?, ?, ?, ?, 0, ?)`,
  );
  const settle = db.prepare(
    `UPDATE webhook_deliveries SET status = ?, attempts = attempts + 1, next_attempt_at = ?, lease_until = NULL, lease_owner = NULL,
       updated_at = ?, completed_at = ?, last_status = ? WHERE seq = ?`,
  );
  let n = 0;
  return {
    db,
    store: db.transaction((batch: RelayEvent[], url: string) => {
      const now = Date.now();
      const origin = new URL(url).origin;
      return batch.map((b) => {
        insertEvent.run(b.eventId, b.type, null, b.body, now);
        const id = `dlv_relay_${process.pid}_${now}_${n++}`;
        return Number(insertDelivery.run(id, b.eventId, b.type, url, origin, b.body, now, now + 30_000, now, now).lastInsertRowid);
      });
    }),
    record: db.transaction((outcomes: RelayOutcome[]) => {
      const now = Date.now();
      for (const o of outcomes) {
        const ok = o.status >= 200 && o.status < 300;
        const next = ok ? null : now + 1000;
        insertAttempt.run(o.id, o.id, o.startedAt, o.durationMs, o.url, o.signature, o.status || null, ok ? 'success' : 'retry', o.excerpt, next);
        settle.run(ok ? 'delivered' : 'retrying', next, now, ok ? now : null, o.status || null, o.id);
      }
    }),
    undelivered: () =>
      db.prepare(`SELECT seq AS id, body FROM webhook_deliveries WHERE status IN ('pending', 'retrying') ORDER BY seq`).all() as Array<{
        id: number;
        body: string;
      }>,
  };
}

// ---------------------------------------------------------------------------------------------
// Receiver and load generator: counts arrivals, times each from its ingest request's start.
if (role === 'receiver') {
  let count = 0;
  let target = Infinity;
  let onTarget: (() => void) | null = null;
  const sentAt = new Map<string, number>();
  const latencies: number[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"received":true}');
      count++;
      if (sentAt.size) {
        // The event a delivery comes from: Switchyard's sourceEventId (its eventId is the delivery's own), the relay's eventId.
        const body = JSON.parse(Buffer.concat(chunks).toString());
        const t0 = sentAt.get(body.sourceEventId ?? body.eventId);
        if (t0 !== undefined) latencies.push(performance.now() - t0);
      }
      if (count === target) onTarget?.();
    });
  });
  server.keepAliveTimeout = 30_000;
  const agent = new http.Agent({ keepAlive: true, maxSockets: CONNECTIONS });
  const post = (url: string, body: string) =>
    new Promise<number>((resolve) => {
      const req = http.request(
        `${url}/api/v1/events`,
        { method: 'POST', agent, headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' } },
        (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode ?? 0));
        },
      );
      req.on('error', () => resolve(0));
      req.end(body);
    });
  const arrivals = (n: number) =>
    new Promise<void>((resolve) => {
      count = 0;
      target = n;
      onTarget = resolve;
    });
  process.on('disconnect', () => process.exit(0));
  process.on('message', async (m: any) => {
    if (m.blast) {
      const { url } = m.blast;
      const bodies = Array.from({ length: N }, () => JSON.stringify(samplePayload('site_view')));
      sentAt.clear();
      const all = arrivals(N);
      let next = 0;
      let refused = 0;
      const t0 = performance.now();
      const lane = async () => {
        while (next < bodies.length) if ((await post(url, bodies[next++])) !== 202) refused++;
      };
      await Promise.all(Array.from({ length: CONNECTIONS }, lane));
      const acked = performance.now() - t0;
      const timeout = setTimeout(() => onTarget?.(), 30_000);
      await all;
      clearTimeout(timeout);
      process.send!({ ms: performance.now() - t0, ackedMs: acked, refused, received: count });
    }
    if (m.load) {
      // Open loop: send at a fixed rate whatever the answers, each send timed from its start.
      const { url, rate, seconds } = m.load;
      sentAt.clear();
      latencies.length = 0;
      const total = Math.round(rate * seconds);
      const all = arrivals(total);
      const start = performance.now();
      for (let i = 0; i < total; i++) {
        const wait = start + (i * 1000) / rate - performance.now();
        if (wait > 1) await new Promise((r) => setTimeout(r, wait));
        const body = JSON.stringify(samplePayload('site_view'));
        sentAt.set(JSON.parse(body).eventId, performance.now());
        void post(url, body);
      }
      const timeout = setTimeout(() => onTarget?.(), 5000);
      await all;
      clearTimeout(timeout);
      process.send!({ latencies: [...latencies], lost: total - latencies.length });
    }
  });
  server.listen(0, '127.0.0.1', () => process.send!({ port: (server.address() as AddressInfo).port }));
}

// ---------------------------------------------------------------------------------------------

async function child(name: string): Promise<{ proc: ChildProcess; port: number }> {
  const proc = fork(new URL(import.meta.url).pathname, [name], { execArgv: ['--no-node-snapshot'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const { port } = await ask<{ port: number }>(proc, undefined, 'port');
  return { proc, port };
}

async function main(): Promise<void> {
  const receiver = await child('receiver');
  const relay = await child('relay');
  const durable = await child('durable-relay');
  const rows = await child('rows-relay');
  const hook = `http://127.0.0.1:${receiver.port}/hook`;
  relay.proc.send({ target: hook });
  durable.proc.send({ target: hook });
  rows.proc.send({ target: hook });
  // The relay has as many POSTs in flight to the receiver as it has clients (64); the product's
  // default per-endpoint cap (4, politeness toward one receiver) would measure that cap, not the engine.
  const perEndpoint = setting('BENCH_PER_ENDPOINT', CONNECTIONS);
  const serve = await startServe({
    processes: process.env.BENCH_PROCESSES ?? 0,
    webhooks: { per_endpoint_concurrency: perEndpoint, concurrency: Math.max(32, perEndpoint) },
  });
  if (serve.token !== TOKEN) throw new Error('the benchmark and startServe disagree on the admin token');
  await serve.api('POST', '/api/v1/installations', { integration: 'webhook', configuration: { webhook_url: hook, event_types: 'site_view' } });
  const senders = {
    switchyard: serve.url,
    relay: `http://127.0.0.1:${relay.port}`,
    durable: `http://127.0.0.1:${durable.port}`,
    rows: `http://127.0.0.1:${rows.port}`,
  };
  type Sender = keyof typeof senders;
  /** One empty list per sender. */
  const perSender = <X>(): Record<Sender, X[]> => ({ switchyard: [], relay: [], durable: [], rows: [] });

  console.log(
    `durable delivery benchmark: switchyard serve (processes ${process.env.BENCH_PROCESSES ?? 'default'}, webhooks.per_endpoint_concurrency ${perEndpoint}) vs a hand-written relay, durable (SQLite) and not, and durable storing Switchyard's rows; ` +
      `${N} single-event POSTs over ${CONNECTIONS} connections per round, ${ROUNDS} rounds, Node ${process.version}`,
  );

  // CPU per event (/proc utime + stime, ticks of 10 ms: a round of thousands of events reads to a few us):
  // the sender's processes (switchyard: the supervisor and its serving processes) and the receiver,
  // which is the load generator too (its share tells a sender that loads it more, e.g. by smaller writes).
  const pidsOf: Record<Sender, () => number[]> = {
    switchyard: () => processTree(serve.child.pid!),
    relay: () => [relay.proc.pid!],
    durable: () => [durable.proc.pid!],
    rows: () => [rows.proc.pid!],
  };
  const cpu = (pids: number[]) => pids.reduce((sum, p) => sum + (cpuMs(p) ?? 0), 0);
  const blast = async (s: Sender) => {
    const pids = pidsOf[s]();
    const before = { sender: cpu(pids), receiver: cpuMs(receiver.proc.pid!)! };
    const r = await ask<{ ms: number; ackedMs: number; refused: number; received: number }>(receiver.proc, { blast: { url: senders[s] } }, 'ms');
    if (r.refused || r.received < N) throw new Error(`${s}: ${r.refused} ingest requests refused, ${r.received} of ${N} delivered`);
    const usPerEvent = (ms: number) => (ms * 1000) / N;
    return {
      rate: (N / r.ms) * 1000,
      ackRate: (N / r.ackedMs) * 1000,
      cpuUs: usPerEvent(cpu(pids) - before.sender),
      receiverCpuUs: usPerEvent(cpuMs(receiver.proc.pid!)! - before.receiver),
    };
  };
  const load = async (s: Sender, rate: number, seconds: number) => {
    const r = await ask<{ latencies: number[]; lost: number }>(receiver.proc, { load: { url: senders[s], rate, seconds } }, 'latencies');
    const sorted = r.latencies.sort((a, b) => a - b);
    return { p50: percentile(sorted, 50), p99: percentile(sorted, 99), lost: r.lost };
  };

  // --- 1. throughput --------------------------------------------------------------------------
  await blast('relay'); // warm-up (JIT, sockets, SQLite pages)
  await blast('durable');
  await blast('rows');
  await blast('switchyard');
  const rates = perSender<number>();
  const acks = perSender<number>();
  const cpus = perSender<number>();
  const receiverCpus = perSender<number>();
  for (let i = 0; i < ROUNDS; i++)
    for (const s of ['relay', 'durable', 'rows', 'switchyard'] as const) {
      const r = await blast(s);
      rates[s].push(r.rate);
      acks[s].push(r.ackRate);
      cpus[s].push(r.cpuUs);
      receiverCpus[s].push(r.receiverCpuUs);
    }
  const rate = (s: Sender) => median(rates[s]);
  const ratio = rate('switchyard') / rate('durable');
  console.log(
    `throughput  switchyard ${rate('switchyard').toFixed(0)} events/s delivered, durable relay ${rate('durable').toFixed(0)}/s: ratio ${ratio.toFixed(2)} ` +
      `(goal >= ${GOAL_RATIO}: ${ratio >= GOAL_RATIO ? 'met' : 'NOT met'})`,
  );
  console.log(
    `            relay storing nothing ${rate('relay').toFixed(0)}/s: switchyard / relay ${(rate('switchyard') / rate('relay')).toFixed(2)}, ` +
      `durable relay / relay ${(rate('durable') / rate('relay')).toFixed(2)} (what persisting costs the hand-written relay)`,
  );
  console.log(
    `            durable relay storing Switchyard's rows ${rate('rows').toFixed(0)}/s: rows relay / durable relay ${(rate('rows') / rate('durable')).toFixed(2)} ` +
      `(what Switchyard's data model costs a hand-written sender), switchyard / rows relay ${(rate('switchyard') / rate('rows')).toFixed(2)} (what the rest costs)`,
  );
  console.log(
    `            ingest alone (all 202s answered): switchyard ${median(acks.switchyard).toFixed(0)} events/s (stored), durable relay ${median(acks.durable).toFixed(0)} (committed), ` +
      `rows relay ${median(acks.rows).toFixed(0)} (committed), relay ${median(acks.relay).toFixed(0)} (answers after its POST)`,
  );
  const us = (xs: number[]) => `${median(xs).toFixed(0)} us`;
  console.log(
    `            CPU per event (medians): switchyard ${us(cpus.switchyard)} (its processes), durable relay ${us(cpus.durable)}, rows relay ${us(cpus.rows)}, ` +
      `relay ${us(cpus.relay)}; by CPU switchyard / durable relay ${(median(cpus.durable) / median(cpus.switchyard)).toFixed(2)}, ` +
      `switchyard / rows relay ${(median(cpus.rows) / median(cpus.switchyard)).toFixed(2)}, rows relay / durable relay ${(median(cpus.durable) / median(cpus.rows)).toFixed(2)}; ` +
      `the receiver and load generator ${us(receiverCpus.switchyard)}, ${us(receiverCpus.durable)}, ${us(receiverCpus.rows)}, ${us(receiverCpus.relay)} in the same rounds`,
  );
  console.log(
    `            rounds switchyard [${rates.switchyard.map((x) => x.toFixed(0)).join(', ')}]  durable relay [${rates.durable.map((x) => x.toFixed(0)).join(', ')}]  ` +
      `rows relay [${rates.rows.map((x) => x.toFixed(0)).join(', ')}]  relay [${rates.relay.map((x) => x.toFixed(0)).join(', ')}]`,
  );

  // --- 2. latency -------------------------------------------------------------------------------
  await load('switchyard', 200, 1); // warm-up
  type Lat = Awaited<ReturnType<typeof load>>;
  const lat = perSender<Lat>();
  // The idle pace for the durable relay too: what an idle machine (a VM whose cores sleep between
  // events) adds to any sender, told apart from what switchyard adds.
  const idle: Lat[] = [];
  const idleDurable: Lat[] = [];
  for (let i = 0; i < ROUNDS; i++) {
    lat.relay.push(await load('relay', RATE, LATENCY_SECONDS));
    lat.durable.push(await load('durable', RATE, LATENCY_SECONDS));
    lat.switchyard.push(await load('switchyard', RATE, LATENCY_SECONDS));
    idle.push(await load('switchyard', 20, 2));
    idleDurable.push(await load('durable', 20, 2));
  }
  const med = (xs: Lat[], k: 'p50' | 'p99') => median(xs.map((x) => x[k]));
  const p99 = med(lat.switchyard, 'p99');
  console.log(
    `latency     ingest-to-receiver at ${RATE}/s: switchyard p50 ${med(lat.switchyard, 'p50').toFixed(2)} ms, p99 ${p99.toFixed(2)} ms ` +
      `(goal p99 < ${GOAL_P99} ms: ${p99 < GOAL_P99 ? 'met' : 'NOT met'}; ratio to the goal ${(p99 / GOAL_P99).toFixed(2)}); durable relay p50 ${med(lat.durable, 'p50').toFixed(2)} ms, p99 ${med(lat.durable, 'p99').toFixed(2)} ms; ` +
      `relay p50 ${med(lat.relay, 'p50').toFixed(2)} ms, p99 ${med(lat.relay, 'p99').toFixed(2)} ms`,
  );
  console.log(
    `            idle (20/s): switchyard p50 ${med(idle, 'p50').toFixed(2)} ms, p99 ${med(idle, 'p99').toFixed(2)} ms; ` +
      `durable relay p50 ${med(idleDurable, 'p50').toFixed(2)} ms, p99 ${med(idleDurable, 'p99').toFixed(2)} ms`,
  );
  console.log(
    `            p99 per round: switchyard [${lat.switchyard.map((x) => x.p99.toFixed(1)).join(', ')}]  durable relay [${lat.durable.map((x) => x.p99.toFixed(1)).join(', ')}]  ` +
      `relay [${lat.relay.map((x) => x.p99.toFixed(1)).join(', ')}]`,
  );
  const lostBy = Object.entries({
    switchyard: lat.switchyard,
    relay: lat.relay,
    'durable relay': lat.durable,
    'switchyard idle': idle,
    'durable relay idle': idleDurable,
  })
    .map(([who, runs]) => [who, runs.reduce((a, x) => a + x.lost, 0)] as const)
    .filter(([, n]) => n > 0);
  if (lostBy.length) console.log(`            WARNING: events not received within 5 s of the last send: ${lostBy.map(([who, n]) => `${who} ${n}`).join(', ')}`);

  serve.stop();
  receiver.proc.kill();
  relay.proc.kill();
  durable.proc.kill();
  rows.proc.kill();
}

if (role !== 'receiver' && role !== 'relay' && role !== 'durable-relay' && role !== 'rows-relay') await main();
