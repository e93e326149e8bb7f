/**
 * Batch ingest benchmark. Run: PATH=node_modules/.bin:$PATH node --no-node-snapshot scripts/bench/batch-ingest.ts
 *
 * `switchyard serve` as a user starts it (the real command, its default processes, a temp data dir;
 * BENCH_PROCESSES=n for another count) takes batches of BENCH_BATCH (1,000) site_view events as
 * JSON arrays on POST /api/v1/events, over real HTTP from a client in another process
 * (node:http, BENCH_CONNECTIONS keep-alive connections, one batch in flight on each), BENCH_BATCHES
 * batches per round. Bodies are built before the clock starts; every answer must be a 202 that
 * says the whole batch was stored. Measured from the first request to the last answer:
 *
 * - store only: no subscriber, the event rows alone.
 * - fan-out: each event also enqueues one webhook delivery, to a webhook installation made through
 *   the API whose URL is a receiver in this process answering 200: the deliveries go out while the
 *   batches come in, as they would for a user (a paused installation's would be stored held, unsent).
 * Counts are checked after each round in the SQLite file, opened read-only beside the server.
 *
 * Goal: 50,000 events/s stored. Medians of BENCH_ROUNDS rounds (default 5) and the ratio to the goal.
 */
import { fork } from 'node:child_process';
import http from 'node:http';
import { join } from 'node:path';
import { samplePayload } from '../../src/events/index.ts';
import { openStore } from '../../src/store/index.ts';
import { ask, median, setting, startServe } from './common.ts';

const BATCH = setting('BENCH_BATCH', 1000);
const BATCHES = setting('BENCH_BATCHES', 50);
const CONNECTIONS = setting('BENCH_CONNECTIONS', 4);
const ROUNDS = setting('BENCH_ROUNDS', 5);
const GOAL = 50_000;

// ---------------------------------------------------------------------------------------------
// Client process: on {prepare}, builds the round's bodies; on {run}, posts them and reports the time.
if (process.argv[2] === 'client') {
  let bodies: string[] = [];
  const agent = new http.Agent({ keepAlive: true, maxSockets: CONNECTIONS });
  const expected = `{"stored":${BATCH},"duplicates":0,"rejected":0,`;
  const post = (url: string, token: string, body: string) =>
    new Promise<string | undefined>((resolve) => {
      const req = http.request(
        `${url}/api/v1/events`,
        { method: 'POST', agent, headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => {
            const text = Buffer.concat(chunks).toString('utf8');
            resolve(res.statusCode === 202 && text.startsWith(expected) ? undefined : `${res.statusCode} ${text.slice(0, 300)}`);
          });
        },
      );
      req.on('error', (e) => resolve(e.message));
      req.end(body);
    });
  process.on('disconnect', () => process.exit(0));
  process.on('message', async (m: any) => {
    if (m.prepare) {
      bodies = Array.from({ length: BATCHES }, () => JSON.stringify(Array.from({ length: BATCH }, () => samplePayload('site_view'))));
      process.send!({ prepared: bodies.reduce((a, b) => a + b.length, 0) });
    }
    if (m.run) {
      const { url, token } = m.run;
      const errors: string[] = [];
      let next = 0;
      const t0 = performance.now();
      const lane = async () => {
        while (next < bodies.length) {
          const e = await post(url, token, bodies[next++]);
          if (e) errors.push(e);
        }
      };
      await Promise.all(Array.from({ length: CONNECTIONS }, lane));
      process.send!({ ms: performance.now() - t0, errors });
    }
  });
}

// ---------------------------------------------------------------------------------------------

async function main(): Promise<void> {
  const client = fork(new URL(import.meta.url).pathname, ['client'], { execArgv: ['--no-node-snapshot'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const serve = await startServe({ processes: process.env.BENCH_PROCESSES ?? 0 });
  const { url, token, dir, api } = serve;
  const stop = () => {
    serve.stop();
    client.kill();
  };
  const store = openStore(join(dir, 'data'), { readonly: true });
  const count = (table: string) => (store.sqlite!.prepare(`SELECT count(*) AS n FROM ${table}`).get() as { n: number }).n;
  let subscribers = 0;

  const perRound = BATCH * BATCHES;
  console.log(
    `batch ingest benchmark: switchyard serve (processes ${process.env.BENCH_PROCESSES ?? 'default'}), ${BATCHES} batches of ${BATCH} site_view events per round over ${CONNECTIONS} connections, ${ROUNDS} rounds, Node ${process.version}`,
  );

  async function round(): Promise<number> {
    await ask<{ prepared: number }>(client, { prepare: true }, 'prepared');
    const events0 = count('events');
    const deliveries0 = count('webhook_deliveries');
    const r = await ask<{ ms: number; errors: string[] }>(client, { run: { url, token } }, 'ms');
    if (r.errors.length) throw new Error(`${r.errors.length} batches not stored whole, e.g. ${r.errors[0]}`);
    const stored = count('events') - events0;
    if (stored !== perRound) throw new Error(`stored ${stored} events, expected ${perRound}`);
    const enqueued = count('webhook_deliveries') - deliveries0;
    if (enqueued !== perRound * subscribers) throw new Error(`enqueued ${enqueued} deliveries, expected ${perRound * subscribers}`);
    return (perRound / r.ms) * 1000;
  }

  const report = (label: string, rates: number[]) => {
    const m = median(rates);
    console.log(
      `${label.padEnd(40)} ${m.toFixed(0)} events/s stored (median; rounds [${rates.map((x) => x.toFixed(0)).join(', ')}]); ratio to the goal of ${GOAL}/s: ${(m / GOAL).toFixed(2)} (${m >= GOAL ? 'met' : 'NOT met'})`,
    );
    return m;
  };

  // Store only: nobody subscribed.
  await round(); // warm-up (JIT, sockets, SQLite pages)
  const alone: number[] = [];
  for (let i = 0; i < ROUNDS; i++) alone.push(await round());
  // Fan-out: one delivery per event, sent to a receiver here while the batches come in.
  const receiver = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => res.writeHead(200).end());
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  const hook = `http://127.0.0.1:${(receiver.address() as { port: number }).port}/hook`;
  await api('POST', '/api/v1/installations', { integration: 'webhook', configuration: { webhook_url: hook, event_types: 'site_view' } });
  subscribers = 1;
  await round();
  const fanout: number[] = [];
  for (let i = 0; i < ROUNDS; i++) fanout.push(await round());
  report('with one webhook delivery each (sent)', fanout);
  report('store only (no subscriber)', alone);

  store.close();
  receiver.close();
  receiver.closeAllConnections();
  stop();
}

if (process.argv[2] !== 'client') await main();
