/**
 * Batch ingest benchmark. Run: PATH=node_modules/.bin:$PATH node --no-node-snapshot scripts/bench/batch-ingest.ts
 *
 * A real server (startServer on a temp data dir) takes batches of BENCH_BATCH (1,000) site_view
 * events as JSON arrays on POST /api/v1/events, over real HTTP from a client in another process
 * (node:http, BENCH_CONNECTIONS keep-alive connections, one batch in flight on each), BENCH_BATCHES
 * batches per round. Bodies are built before the clock starts; every answer must be a 202 that
 * says the whole batch was stored. Measured from the first request to the last answer:
 *
 * - fan-out: each event also enqueues one webhook delivery (to an installation kept paused, so the
 *   deliveries are stored and held, not sent: sending is the delivery benchmark's business).
 * - store only: no subscriber, the event rows alone.
 *
 * Goal: 50,000 events/s stored. Medians of BENCH_ROUNDS rounds (default 5) and the ratio to the goal.
 */
import { fork, type ChildProcess } from 'node:child_process';
import http from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { defaultConfig, publicUrlOf, type LoadedConfig } from '../../src/config/index.ts';
import { startServer } from '../../src/http/server.ts';
import { createLogger } from '../../src/log/index.ts';
import type { Module } from '../../src/services.ts';
import { eventsModule, samplePayload } from '../../src/events/index.ts';
import { webhooksModule, type WebhooksService } from '../../src/webhooks/index.ts';
import type { Db } from '../../src/store/index.ts';
import { median, setting } from './common.ts';

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

function ask<T>(child: ChildProcess, msg: unknown, key: string): Promise<T> {
  return new Promise((resolve) => {
    const on = (m: any) => {
      if (key in m) {
        child.off('message', on);
        resolve(m as T);
      }
    };
    child.on('message', on);
    child.send(msg as any);
  });
}

async function main(): Promise<void> {
  const client = fork(new URL(import.meta.url).pathname, ['client'], { execArgv: ['--no-node-snapshot'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const dir = mkdtempSync(join(tmpdir(), 'switchyard-bench-'));
  const base = defaultConfig();
  const config: LoadedConfig = {
    ...base,
    data_dir: join(dir, 'data'),
    integrations_dir: join(dir, 'integrations'),
    admin_token: 'bench-token-0123456789',
    server: { ...base.server, port: 0 },
    log: { ...base.log, level: 'error' },
    webhooks: { ...base.webhooks, allow_private_networks: true },
    source: null,
    publicUrl: '',
  };
  config.publicUrl = publicUrlOf(config);
  const subs: Array<{ installationId: string; url: string }> = [];
  const subscriptions: Module = { name: 'bench-subscriptions', start: (s) => void (s.subscriptions = { forEventType: () => subs }) };
  const server = await startServer(config, { log: createLogger({ level: 'error', format: 'json' }), modules: [webhooksModule, subscriptions, eventsModule] });
  const webhooks = server.services.webhooks as WebhooksService;
  const db = server.services.store.db as Db;
  webhooks.createSecret('inst_bench');
  webhooks.pauseInstallation('inst_bench');
  const count = (table: string) => (db.prepare(`SELECT count(*) AS n FROM ${table}`).get() as { n: number }).n;

  const perRound = BATCH * BATCHES;
  console.log(
    `batch ingest benchmark: ${BATCHES} batches of ${BATCH} site_view events per round over ${CONNECTIONS} connections, ${ROUNDS} rounds, Node ${process.version}`,
  );

  async function round(): Promise<number> {
    const { prepared } = await ask<{ prepared: number }>(client, { prepare: true }, 'prepared');
    const events0 = count('events');
    const deliveries0 = count('webhook_deliveries');
    const r = await ask<{ ms: number; errors: string[] }>(client, { run: { url: server.url, token: server.services.adminToken } }, 'ms');
    if (r.errors.length) throw new Error(`${r.errors.length} batches not stored whole, e.g. ${r.errors[0]}`);
    const stored = count('events') - events0;
    if (stored !== perRound) throw new Error(`stored ${stored} events, expected ${perRound}`);
    const enqueued = count('webhook_deliveries') - deliveries0;
    if (enqueued !== perRound * subs.length) throw new Error(`enqueued ${enqueued} deliveries, expected ${perRound * subs.length}`);
    void prepared;
    return (perRound / r.ms) * 1000;
  }

  const report = (label: string, rates: number[]) => {
    const m = median(rates);
    console.log(
      `${label.padEnd(40)} ${m.toFixed(0)} events/s stored (median; rounds [${rates.map((x) => x.toFixed(0)).join(', ')}]); ratio to the goal of ${GOAL}/s: ${(m / GOAL).toFixed(2)} (${m >= GOAL ? 'met' : 'NOT met'})`,
    );
    return m;
  };

  // Fan-out: one delivery per event, held for the paused installation.
  subs.push({ installationId: 'inst_bench', url: 'http://127.0.0.1:9/hook' });
  await round(); // warm-up (JIT, sockets, SQLite pages)
  const fanout: number[] = [];
  for (let i = 0; i < ROUNDS; i++) fanout.push(await round());
  // Store only: nobody subscribed.
  subs.length = 0;
  await round();
  const alone: number[] = [];
  for (let i = 0; i < ROUNDS; i++) alone.push(await round());
  report('with one webhook delivery enqueued each', fanout);
  report('store only (no subscriber)', alone);

  await server.close();
  client.kill();
  rmSync(dir, { recursive: true, force: true });
}

if (process.argv[2] !== 'client') await main();
