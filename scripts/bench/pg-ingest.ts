/**
 * Ingest on PostgreSQL, alone: what `POST /api/v1/events` stores per second on one node when no
 * delivery competes with it for the cores. Run:
 *   PATH=node_modules/.bin:$PATH node --no-node-snapshot scripts/bench/pg-ingest.ts
 *
 * A throwaway PostgreSQL 15 at its defaults (test/helpers/postgres.ts) and `switchyard serve` on it
 * as a user starts it (its default serving processes). One webhook installation subscribes to the
 * events and is paused: every event fans out to one delivery, stored `held` in the ingest
 * transaction (the event's INSERT, the delivery's INSERT that reads the installation's paused flag,
 * the commit), and nothing is sent. scripts/bench/pg-nodes.ts measures the hand-over while the
 * deliveries go out at full speed on the same two cores; this is the ingest path on its own.
 *
 * BENCH_BATCHES (100) batches of BENCH_BATCH (100) events per round, BENCH_IN_FLIGHT (2, as
 * pg-nodes.ts) requests in flight, then 8; bodies built before the clock starts; every answer must
 * be a 202. BENCH_WARMUP (20) batches first, not counted (a fresh server compiles its path and opens
 * its pool's connections during the first ones). After the rounds the store must hold every event
 * and one held delivery for each. Medians of BENCH_ROUNDS (3). Goal (issue 29): >= 10,000 events/s
 * stored. CPU per event: every switchyard process, and PostgreSQL's (its server and backends).
 */
import { readFileSync } from 'node:fs';
import http from 'node:http';
import pg from 'pg';
import { samplePayload } from '../../src/events/index.ts';
import { startPostgres } from '../../test/helpers/postgres.ts';
import { cpuMs, median, processTree, setting, startServe } from './common.ts';

const BATCH = setting('BENCH_BATCH', 100);
const BATCHES = setting('BENCH_BATCHES', 100);
const IN_FLIGHT = setting('BENCH_IN_FLIGHT', 2);
const WARMUP = setting('BENCH_WARMUP', 20);
const ROUNDS = setting('BENCH_ROUNDS', 3);
const GOAL = 10_000;

const server = await startPostgres();
const serve = await startServe({ extraYaml: `store: ${JSON.stringify(server.url)}\n` });
const rx = http.createServer((req, res) => {
  req.resume();
  req.on('end', () => res.end('ok'));
});
await new Promise<void>((r) => rx.listen(0, '127.0.0.1', () => r()));
let sent = 0;
rx.on('request', () => sent++);
try {
  const installed = await serve.api('POST', '/api/v1/installations', {
    integration: 'webhook',
    configuration: { webhook_url: `http://127.0.0.1:${(rx.address() as { port: number }).port}/`, event_types: 'site_view' },
  });
  await serve.api('POST', `/api/v1/installations/${installed.installation.id}/pause`);

  const post = async (body: string) => {
    const r = await fetch(`${serve.url}/api/v1/events`, {
      method: 'POST',
      headers: { authorization: `Bearer ${serve.token}`, 'content-type': 'application/json' },
      body,
    });
    const text = await r.text();
    if (r.status !== 202) throw new Error(`POST /api/v1/events answered ${r.status}: ${text.slice(0, 300)}`);
  };
  const bodies = (n: number) => Array.from({ length: n }, () => JSON.stringify(Array.from({ length: BATCH }, () => samplePayload('site_view'))));
  /** All of `batches` through `inFlight` lanes: events/s, and CPU ms per event of the server's processes and of PostgreSQL's. */
  const run = async (batches: string[], inFlight: number) => {
    const serverPids = () => processTree(serve.child.pid!);
    const pgPids = () => {
      try {
        return processTree(Number(readFileSync(`${server.dir}/data/postmaster.pid`, 'utf8').split('\n')[0]));
      } catch {
        return [];
      }
    };
    const cpu = (ps: number[]) => ps.reduce((s, p) => s + (cpuMs(p) ?? 0), 0);
    const s0 = cpu(serverPids());
    const p0 = cpu(pgPids());
    let next = 0;
    const t0 = performance.now();
    await Promise.all(
      Array.from({ length: inFlight }, async () => {
        while (next < batches.length) await post(batches[next++]);
      }),
    );
    const ms = performance.now() - t0;
    const events = batches.length * BATCH;
    return { rate: (events / ms) * 1000, nodeUs: ((cpu(serverPids()) - s0) / events) * 1000, pgUs: ((cpu(pgPids()) - p0) / events) * 1000 };
  };

  await run(bodies(WARMUP), IN_FLIGHT);
  const rows: Array<{ inFlight: number; rates: number[]; node: number[]; pgCpu: number[] }> = [];
  for (const inFlight of [IN_FLIGHT, 8]) {
    const row = { inFlight, rates: [] as number[], node: [] as number[], pgCpu: [] as number[] };
    for (let r = 0; r < ROUNDS; r++) {
      const m = await run(bodies(BATCHES), inFlight);
      row.rates.push(m.rate);
      row.node.push(m.nodeUs);
      row.pgCpu.push(m.pgUs);
    }
    rows.push(row);
  }

  const client = new pg.Client({ connectionString: server.url });
  await client.connect();
  const expected = (WARMUP + 2 * ROUNDS * BATCHES) * BATCH;
  const events = Number((await client.query('SELECT count(*) AS n FROM events')).rows[0].n);
  const held = Number((await client.query("SELECT count(*) AS n FROM webhook_deliveries WHERE status = 'held'")).rows[0].n);
  await client.end();
  if (events !== expected || held !== expected || sent !== 0)
    throw new Error(`the store holds ${events} events and ${held} held deliveries of ${expected}, and ${sent} were sent (none should be)`);

  console.log(
    `PostgreSQL ingest alone: switchyard serve (default processes) on ${server.version}, batches of ${BATCH} events on POST /api/v1/events, ` +
      `each fanned out to one delivery stored held (its installation paused); ${BATCHES} batches a round after ${WARMUP} not counted, medians of ${ROUNDS}, Node ${process.version}`,
  );
  for (const row of rows)
    console.log(
      `  ${row.inFlight} in flight: ${Math.round(median(row.rates))} events/s stored (rounds ${row.rates.map((x) => Math.round(x)).join(', ')}); ` +
        `CPU per event: switchyard ${median(row.node).toFixed(0)} us, PostgreSQL ${median(row.pgCpu).toFixed(0)} us (/proc, 10 ms ticks)`,
    );
  const first = median(rows[0].rates);
  console.log(
    `goal (issue 29): ${Math.round(first)} events/s with ${IN_FLIGHT} in flight / ${GOAL} = ${(first / GOAL).toFixed(2)} (goal >= 1: ${first >= GOAL ? 'met' : 'NOT met'})`,
  );
  console.log(`checked: ${events} events and ${held} held deliveries stored, none sent`);
} finally {
  rx.close();
  serve.stop();
  server.stop();
}
process.exit(0);
