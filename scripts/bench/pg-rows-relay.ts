/**
 * A hand-written durable relay on PostgreSQL storing Switchyard's rows: scripts/bench/pg-nodes.ts's
 * third peer (engine `rows`), the floor the data model sets for Switchyard on PostgreSQL, as the rows
 * relay in scripts/bench/delivery.ts is on SQLite. One process, forked by the benchmark like a node:
 * - its database made by Switchyard's own migrations (every table and index);
 * - `POST /api/v1/events` (a batch, as the benchmark sends them; bearer token checked in constant
 *   time): a turn's batches stored in one statement (the `events` rows and each one's delivery,
 *   stored leased to this relay), committed before the 202s;
 * - each delivery signed with Switchyard's scheme and POSTed to the target, at most `concurrency` at
 *   once (as Switchyard's per-endpoint slots); a non-2xx answer is tried again a second later;
 * - a turn's outcomes in one statement: the deliveries' final state (lease released) and each one's
 *   attempt row (signature, the answer's first bytes), one at a time, the next turn's gathering
 *   meanwhile;
 * - at start, what the database holds undelivered goes out again.
 * What it leaves out: validation past the event's type, the per-origin queue and its claims, live
 * tails' commit order, metrics, logs, isolates. What separates it from graphile-worker is the data
 * model's cost on PostgreSQL; what separates Switchyard from it is the rest.
 *
 * Started with one argument, JSON: `{ connectionString, target, concurrency, token }`. Sends
 * `{ port }` once it listens; exits on disconnect or SIGTERM.
 */
import http from 'node:http';
import { timingSafeEqual } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { connectStore } from '../../src/store/index.ts';
import { allMigrations } from '../../src/server/migrations.ts';
import { signatureHeader } from '../../src/webhooks/signature.ts';
import { PEER_SECRET, readAnswer } from './common.ts';

interface RelayOptions {
  connectionString: string;
  target: string;
  concurrency: number;
  token: string;
}
const o = JSON.parse(process.argv[2]) as RelayOptions;
const expected = Buffer.from(`Bearer ${o.token}`);
const origin = new URL(o.target).origin;

const dir = mkdtempSync(join(tmpdir(), 'switchyard-bench-pg-relay-'));
await (await connectStore(dir, { url: o.connectionString, migrations: allMigrations() })).close();
rmSync(dir, { recursive: true, force: true });
const pool = new pg.Pool({ connectionString: o.connectionString, max: 4 });
pool.on('error', () => {});

// One statement a turn: the events, and each one's delivery stored leased to this relay.
const STORE = `WITH i AS (SELECT * FROM jsonb_to_recordset(CAST($1 AS jsonb))
      AS x(k int, id text, type text, payload text, delivery text, body text)),
    e AS (INSERT INTO events (id, type, installation_id, payload, received_at, delivery_count)
      SELECT id, type, NULL, payload, $2, 1 FROM i ORDER BY k ON CONFLICT (id) DO NOTHING)
  INSERT INTO webhook_deliveries (id, event_id, event_type, installation_id, url, origin, body, status,
      next_attempt_at, lease_until, lease_owner, created_at, updated_at)
    SELECT delivery, id, type, 'inst_relay', $3, $4, body, 'pending', $2, $2 + 30000, 'relay', $2, $2 FROM i ORDER BY k
    ON CONFLICT (event_id, installation_id) DO NOTHING
  RETURNING seq, id`;
// One statement a turn: the deliveries' next state, and each attempt numbered from it.
const RECORD = `WITH n AS (SELECT * FROM jsonb_to_recordset(CAST($1 AS jsonb))
      AS x(k int, seq bigint, status int, ok boolean, started bigint, duration double precision, signature text, excerpt text)),
    d AS (UPDATE webhook_deliveries w SET
        status = CASE WHEN n.ok THEN 'delivered' ELSE 'retrying' END, attempts = w.attempts + 1,
        next_attempt_at = CASE WHEN n.ok THEN NULL ELSE $2::bigint + 1000 END,
        lease_until = CASE WHEN n.ok THEN NULL ELSE $2::bigint + 31000 END, lease_owner = CASE WHEN n.ok THEN NULL ELSE 'relay' END,
        updated_at = $2::bigint, completed_at = CASE WHEN n.ok THEN $2::bigint END, last_status = NULLIF(n.status, 0)
      FROM n WHERE w.seq = n.seq RETURNING w.seq, w.attempts)
  INSERT INTO webhook_attempts (delivery_seq, number, manual, started_at, duration_ms, url, signature, status, outcome,
      response_excerpt, response_truncated, next_attempt_at)
    SELECT n.seq, d.attempts, 0, n.started, n.duration, $3, n.signature, NULLIF(n.status, 0),
      CASE WHEN n.ok THEN 'success' ELSE 'retry' END, n.excerpt, 0, CASE WHEN n.ok THEN NULL ELSE $2::bigint + 1000 END
    FROM n JOIN d ON d.seq = n.seq ORDER BY n.k`;

// --- sending: at most `concurrency` at once, the rest waiting here in order ------------------------
const agent = new http.Agent({ keepAlive: true, maxSockets: o.concurrency });
const waiting: Array<{ seq: number; body: Buffer }> = [];
let inFlight = 0;
interface Outcome {
  k: number;
  seq: number;
  status: number;
  ok: boolean;
  started: number;
  duration: number;
  signature: string;
  excerpt: string | null;
}
let outcomes: Outcome[] = [];
let recording = false;

function sendNext(): void {
  while (inFlight < o.concurrency && waiting.length) {
    const { seq, body } = waiting.shift()!;
    inFlight++;
    send(seq, body);
  }
}
function send(seq: number, body: Buffer): void {
  const started = Date.now();
  const signature = signatureHeader([PEER_SECRET], Math.floor(started / 1000), body);
  const req = http.request(o.target, {
    method: 'POST',
    agent,
    headers: { 'content-type': 'application/json', 'content-length': body.length, 'x-platform-signature': signature },
  });
  const done = (status: number, excerpt: string | null) => {
    inFlight--;
    const ok = status >= 200 && status < 300;
    outcomes.push({ k: outcomes.length, seq, status, ok, started, duration: Date.now() - started, signature, excerpt });
    if (!ok) setTimeout(() => (waiting.push({ seq, body }), sendNext()), 1000);
    sendNext();
    // Once a turn: the first outcome schedules the record (one in progress schedules the next itself).
    if (outcomes.length === 1 && !recording) setImmediate(record);
  };
  // Like Switchyard, the answer's first bytes are kept with the attempt.
  req.on('response', (res) => readAnswer(res, done));
  req.on('error', () => done(0, null));
  req.end(body);
}
async function record(): Promise<void> {
  if (recording || !outcomes.length) return;
  recording = true;
  const turn = outcomes;
  outcomes = [];
  try {
    await pool.query(RECORD, [JSON.stringify(turn), Date.now(), o.target]);
  } catch (e) {
    // Nothing here tries again: a benchmark's relay that cannot record stops, and the run with it.
    process.stderr.write(`  rows relay: recording ${turn.length} attempts failed: ${(e as Error).message}\n`);
    process.exit(1);
  }
  recording = false;
  if (outcomes.length) setImmediate(record);
}

// --- accepting: a turn's batches in one statement, committed before the 202s ----------------------
let accepted: Array<{ events: Array<Record<string, unknown>>; res: http.ServerResponse }> = [];
let n = 0;
async function storeTurn(): Promise<void> {
  const turn = accepted;
  accepted = [];
  const now = Date.now();
  const rows: Array<{ k: number; id: string; type: string; payload: string; delivery: string; body: string }> = [];
  for (const a of turn)
    for (const event of a.events) {
      const delivery = `dlv_relay_${process.pid}_${now}_${n++}`;
      const id = String(event.eventId);
      rows.push({
        k: rows.length,
        id,
        type: String(event.type),
        payload: JSON.stringify(event),
        delivery,
        body: JSON.stringify({ ...event, eventId: delivery, sourceEventId: id, installationId: 'inst_relay' }),
      });
    }
  let stored: Array<{ seq: string; id: string }>;
  try {
    stored = (await pool.query(STORE, [JSON.stringify(rows), now, o.target, origin])).rows;
  } catch (e) {
    process.stderr.write(`  rows relay: storing ${rows.length} events failed: ${(e as Error).message}\n`);
    for (const a of turn) a.res.writeHead(503).end();
    return;
  }
  const seqOf = new Map(stored.map((r) => [r.id, Number(r.seq)]));
  for (const a of turn) a.res.writeHead(202, { 'content-type': 'application/json' }).end(`{"accepted":${a.events.length}}`);
  for (const r of rows) {
    const seq = seqOf.get(r.delivery);
    if (seq !== undefined) waiting.push({ seq, body: Buffer.from(r.body) });
  }
  sendNext();
}

const server = http.createServer((req, res) => {
  const auth = Buffer.from(req.headers.authorization ?? '');
  if (auth.length !== expected.length || !timingSafeEqual(auth, expected)) return void res.writeHead(401).end();
  if (req.method !== 'POST' || req.url !== '/api/v1/events') return void res.writeHead(404).end();
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    let parsed: unknown;
    try {
      parsed = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    } catch {
      return void res.writeHead(400).end();
    }
    const events = (Array.isArray(parsed) ? parsed : [parsed]) as Array<Record<string, unknown>>;
    if (!events.length || events.some((e) => typeof e?.type !== 'string' || typeof e.eventId !== 'string')) return void res.writeHead(400).end();
    if (!accepted.length) setImmediate(() => void storeTurn());
    accepted.push({ events, res });
  });
});

// What a previous run stored and did not deliver goes out again.
for (const r of (await pool.query(`SELECT seq, body FROM webhook_deliveries WHERE status IN ('pending', 'retrying') ORDER BY seq`)).rows)
  waiting.push({ seq: Number(r.seq), body: Buffer.from(r.body as string) });
sendNext();

const quit = () => {
  server.close();
  void pool.end().finally(() => process.exit(0));
};
process.on('disconnect', quit);
process.on('SIGTERM', quit);
server.listen(0, '127.0.0.1', () => process.send!({ port: (server.address() as AddressInfo).port }));
