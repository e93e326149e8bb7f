/**
 * Durable delivery through the HTTP API, against a hand-written relay, in the same run.
 * Run: PATH=node_modules/.bin:$PATH node --no-node-snapshot scripts/bench/delivery.ts
 *
 * Three processes besides this one, all on the same machine, none pinned:
 * - `switchyard serve` as a user starts it (its default serving processes; BENCH_PROCESSES=n for
 *   another count) with a webhook installation made through the API whose URL is the receiver;
 * - the relay: a plain Node HTTP server written here, the least a sender could do over the same two
 *   hops: it checks the bearer token, parses the event, signs the body with the same scheme and
 *   POSTs it to the receiver, then answers 202. Nothing is stored: a crash loses what is in flight;
 * - the receiver, which answers every POST at once with 200 and is also the load generator, so
 *   that latency is measured on one clock (from the start of the ingest request to the arrival).
 *
 * 1. Throughput: BENCH_N single-event POST /api/v1/events over BENCH_CONNECTIONS (64) keep-alive
 *    connections, closed loop, timed from the first request to the N-th arrival at the receiver.
 *    webhooks.per_endpoint_concurrency is raised to BENCH_PER_ENDPOINT (default: the connections),
 *    and the relay keeps to the same bound of POSTs in flight to the receiver, so at the product's
 *    default (BENCH_PER_ENDPOINT=4) both senders are held to four at once.
 *    Goal: Switchyard >= 0.8x the relay.
 * 2. Latency at 1,000 events/s (open loop, BENCH_LATENCY_SECONDS long): ingest-to-receiver p99.
 *    Goal: p99 < 25 ms. Also the relay's figure in the same run, and an idle pace (20/s).
 * Rounds alternate between the two senders; medians of BENCH_ROUNDS (5) are printed.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { timingSafeEqual } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { samplePayload } from '../../src/events/index.ts';
import { signatureHeader } from '../../src/webhooks/signature.ts';
import { ask, median, percentile, setting, startServe } from './common.ts';

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
  const secret = 'whsec_' + Buffer.alloc(24, 7).toString('base64');
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
          'x-platform-signature': signatureHeader([secret], Math.floor(Date.now() / 1000), body),
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
      const req = http.request(`${url}/api/v1/events`, { method: 'POST', agent, headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' } }, (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      });
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
  const hook = `http://127.0.0.1:${receiver.port}/hook`;
  relay.proc.send({ target: hook });
  // The relay has as many POSTs in flight to the receiver as it has clients (64); the product's
  // default per-endpoint cap (4, politeness toward one receiver) would measure that cap, not the engine.
  const perEndpoint = setting('BENCH_PER_ENDPOINT', CONNECTIONS);
  const serve = await startServe({ processes: process.env.BENCH_PROCESSES ?? 0, webhooks: { per_endpoint_concurrency: perEndpoint, concurrency: Math.max(32, perEndpoint) } });
  if (serve.token !== TOKEN) throw new Error('the benchmark and startServe disagree on the admin token');
  await serve.api('POST', '/api/v1/installations', { integration: 'webhook', configuration: { webhook_url: hook, event_types: 'site_view' } });
  const senders = { switchyard: serve.url, relay: `http://127.0.0.1:${relay.port}` };
  type Sender = keyof typeof senders;

  console.log(
    `durable delivery benchmark: switchyard serve (processes ${process.env.BENCH_PROCESSES ?? 'default'}, webhooks.per_endpoint_concurrency ${perEndpoint}) vs a hand-written relay; ` +
      `${N} single-event POSTs over ${CONNECTIONS} connections per round, ${ROUNDS} rounds, Node ${process.version}`,
  );

  const blast = async (s: Sender) => {
    const r = await ask<{ ms: number; ackedMs: number; refused: number; received: number }>(receiver.proc, { blast: { url: senders[s] } }, 'ms');
    if (r.refused || r.received < N) throw new Error(`${s}: ${r.refused} ingest requests refused, ${r.received} of ${N} delivered`);
    return { rate: (N / r.ms) * 1000, ackRate: (N / r.ackedMs) * 1000 };
  };
  const load = async (s: Sender, rate: number, seconds: number) => {
    const r = await ask<{ latencies: number[]; lost: number }>(receiver.proc, { load: { url: senders[s], rate, seconds } }, 'latencies');
    const sorted = r.latencies.sort((a, b) => a - b);
    return { p50: percentile(sorted, 50), p99: percentile(sorted, 99), lost: r.lost };
  };

  // --- 1. throughput --------------------------------------------------------------------------
  await blast('relay'); // warm-up (JIT, sockets, SQLite pages)
  await blast('switchyard');
  const rates: Record<Sender, number[]> = { switchyard: [], relay: [] };
  const acks: number[] = [];
  for (let i = 0; i < ROUNDS; i++) {
    rates.relay.push((await blast('relay')).rate);
    const r = await blast('switchyard');
    rates.switchyard.push(r.rate);
    acks.push(r.ackRate);
  }
  const ratio = median(rates.switchyard) / median(rates.relay);
  console.log(
    `throughput  switchyard ${median(rates.switchyard).toFixed(0)} events/s delivered, relay ${median(rates.relay).toFixed(0)}/s: ratio ${ratio.toFixed(2)} ` +
      `(goal >= ${GOAL_RATIO}: ${ratio >= GOAL_RATIO ? 'met' : 'NOT met'})`,
  );
  console.log(`            switchyard ingest alone (all 202s answered, stored) ${median(acks).toFixed(0)} events/s`);
  console.log(`            rounds switchyard [${rates.switchyard.map((x) => x.toFixed(0)).join(', ')}]  relay [${rates.relay.map((x) => x.toFixed(0)).join(', ')}]`);

  // --- 2. latency -------------------------------------------------------------------------------
  await load('switchyard', 200, 1); // warm-up
  type Lat = Awaited<ReturnType<typeof load>>;
  const lat: Record<Sender, Lat[]> = { switchyard: [], relay: [] };
  const idle: Lat[] = [];
  for (let i = 0; i < ROUNDS; i++) {
    lat.relay.push(await load('relay', RATE, LATENCY_SECONDS));
    lat.switchyard.push(await load('switchyard', RATE, LATENCY_SECONDS));
    idle.push(await load('switchyard', 20, 2));
  }
  const med = (xs: Lat[], k: 'p50' | 'p99') => median(xs.map((x) => x[k]));
  const p99 = med(lat.switchyard, 'p99');
  console.log(
    `latency     ingest-to-receiver at ${RATE}/s: switchyard p50 ${med(lat.switchyard, 'p50').toFixed(2)} ms, p99 ${p99.toFixed(2)} ms ` +
      `(goal p99 < ${GOAL_P99} ms: ${p99 < GOAL_P99 ? 'met' : 'NOT met'}; ratio to the goal ${(p99 / GOAL_P99).toFixed(2)}); relay p50 ${med(lat.relay, 'p50').toFixed(2)} ms, p99 ${med(lat.relay, 'p99').toFixed(2)} ms`,
  );
  console.log(`            switchyard idle (20/s): p50 ${med(idle, 'p50').toFixed(2)} ms, p99 ${med(idle, 'p99').toFixed(2)} ms`);
  console.log(`            p99 per round: switchyard [${lat.switchyard.map((x) => x.p99.toFixed(1)).join(', ')}]  relay [${lat.relay.map((x) => x.p99.toFixed(1)).join(', ')}]`);
  const lost = [...lat.switchyard, ...lat.relay, ...idle].reduce((a, x) => a + x.lost, 0);
  if (lost) console.log(`            WARNING: ${lost} events not received within 5 s of the last send`);

  serve.stop();
  receiver.proc.kill();
  relay.proc.kill();
}

if (role !== 'receiver' && role !== 'relay') await main();
