/**
 * Sandbox benchmark. Run: PATH=node_modules/.bin:$PATH node --no-node-snapshot scripts/bench/sandbox.ts
 *
 * 1. HTTP throughput: one h3 server with two routes answering the same "hello" response, one
 *    plainly and one by invoking a hello `fetch` handler through the sandbox (envelope in, worker
 *    process, isolate, response out). A load process keeps CONCURRENCY keep-alive connections
 *    busy for SECONDS per route; requests/s, p50, p99 and the ratio sandbox/plain are printed.
 *    The load client is the lean one of http-load.ts (a few µs per request); BENCH_CLIENT=node
 *    uses Node's http client instead (~55 µs per request, which holds the plain route back to
 *    under half of what it serves, and so flatters the ratio).
 *    Goal: ratio >= 0.5. Then the whole product path: a real server with a hello integration
 *    installed, load on the installation's public endpoint, against the plain route again.
 * 2. The same through the API alone (no HTTP): invocations/s at the same concurrency.
 * 3. First request after a reload: unload (or a new version of the script), then one invocation;
 *    its duration, median of REPEATS.
 * Each throughput measure runs ROUNDS times, alternating routes; medians are printed.
 */
import { fork, type ChildProcess } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { H3 } from 'h3';
import { toNodeHandler } from 'h3/node';
import { FastResponse } from 'srvx';
import { defaultConfig, publicUrlOf } from '../../src/config/index.ts';
import { createLogger } from '../../src/log/index.ts';
import { createSandbox, type GuestScript } from '../../src/sandbox/index.ts';
import { startServer } from '../../src/server/server.ts';
import { median, percentile, setting, writeHelloIntegration } from './common.ts';
import { runLoad } from './http-load.ts';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const CONCURRENCY = setting('BENCH_CONCURRENCY', 32);
const SECONDS = setting('BENCH_SECONDS', 4, false);
const ROUNDS = setting('BENCH_ROUNDS', 3);
const REPEATS = setting('BENCH_REPEATS', 15);
const CLIENT = process.env.BENCH_CLIENT ?? 'lean';
if (CLIENT !== 'lean' && CLIENT !== 'node') {
  process.stderr.write(`BENCH_CLIENT=${CLIENT}: the load client is 'lean' (the default) or 'node'\n`);
  process.exit(2);
}

// ---------------------------------------------------------------------------------------------
// Load process: closed loop, CONCURRENCY requests in flight on keep-alive connections. The lean
// client (http-load.ts) by default; BENCH_CLIENT=node for Node's http client, which costs ~55 µs of
// CPU per request on this machine, more than the plain server itself.
if (process.argv[2] === 'load') {
  process.on('message', async (m: { url: string; seconds: number; concurrency: number }) => {
    process.send!(CLIENT === 'node' ? await nodeLoad(m.url, m.seconds, m.concurrency) : await runLoad(m.url, m.seconds, m.concurrency));
  });
} else await main();

// ---------------------------------------------------------------------------------------------

async function nodeLoad(url: string, seconds: number, concurrency: number): Promise<Measure> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });
  const latencies: number[] = [];
  let errors = 0;
  const end = performance.now() + seconds * 1000;
  const one = () =>
    new Promise<void>((resolve) => {
      const t0 = performance.now();
      const req = http.get(url, { agent }, (res) => {
        res.resume();
        res.on('end', () => {
          if (res.statusCode === 200) latencies.push(performance.now() - t0);
          else errors++;
          resolve();
        });
      });
      req.on('error', () => {
        errors++;
        resolve();
      });
    });
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < end) await one();
    }),
  );
  const elapsed = (performance.now() - started) / 1000;
  latencies.sort((a, b) => a - b);
  agent.destroy();
  return { rps: latencies.length / elapsed, p50: percentile(latencies, 50), p99: percentile(latencies, 99), errors };
}

interface Measure {
  rps: number;
  p50: number;
  p99: number;
  errors: number;
}

function measure(loader: ChildProcess, url: string): Promise<Measure> {
  return new Promise((resolve) => {
    loader.once('message', (m) => resolve(m as Measure));
    loader.send({ url, seconds: SECONDS, concurrency: CONCURRENCY });
  });
}

/** A real server with a hello integration installed; its public endpoint URL. */
async function publicEndpointRoute(): Promise<{ url: string; close(): Promise<void> }> {
  const dir = mkdtempSync(join(tmpdir(), 'switchyard-bench-'));
  writeHelloIntegration(
    join(dir, 'integrations'),
    'hello',
    `async fetch(request) { return new Response('Hello, ' + new URL(request.url).pathname.split('/').pop() + '!', { headers: { 'content-type': 'text/plain;charset=UTF-8' } }); }`,
  );
  const base = defaultConfig();
  const config = {
    ...base,
    data_dir: join(dir, 'data'),
    integrations_dir: join(dir, 'integrations'),
    admin_token: 'bench-admin-token',
    server: { ...base.server, port: 0 },
    log: { ...base.log, level: 'warn' as const },
    source: null,
    publicUrl: '',
  };
  config.publicUrl = publicUrlOf(config);
  const running = await startServer(config, { log: createLogger({ level: 'warn' }) });
  const res = await fetch(`${running.url}/api/v1/installations`, {
    method: 'POST',
    headers: { authorization: 'Bearer bench-admin-token', 'content-type': 'application/json' },
    body: JSON.stringify({ integration: 'hello' }),
  });
  const { installation } = (await res.json()) as { installation: { urls: { publicEndpoint: string } } };
  const url = `${installation.urls.publicEndpoint}/world`;
  for (let i = 0; i < 200; i++) await fetch(url).then((r) => r.text());
  return {
    url,
    async close() {
      await running.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

async function main(): Promise<void> {
  const limits = defaultConfig().sandbox;
  const sandbox = createSandbox({ limits, allowPrivateNetworks: false, log: createLogger({ level: 'warn' }), serverOrigin: 'http://127.0.0.1:1' });
  const hello: GuestScript = {
    name: 'hello',
    version: '1',
    code: `import { createIntegration } from '@switchyard/runtime';
export default createIntegration({
  async fetch(request) {
    return new Response('Hello, ' + new URL(request.url).pathname.slice(1) + '!', { headers: { 'content-type': 'text/plain;charset=UTF-8' } });
  },
});`,
  };

  let n = 0;
  let failures = 0;
  const app = new H3();
  // The plain handler does the same work as the guest: parse the URL, build the same response. It
  // answers with srvx's FastResponse, as the server's public endpoints do (a standard Response is
  // read back through a body stream by the Node adapter, which made the plain route slower).
  app.get(
    '/plain',
    (event) => new FastResponse(`Hello, ${new URL(event.req.url).pathname.slice(1)}!`, { headers: { 'content-type': 'text/plain;charset=UTF-8' } }),
  );
  app.get('/sandbox', async (event) => {
    const req = event.req;
    const r = await sandbox.invoke({
      script: hello,
      envelope: { event: { type: 'fetch', request: { method: req.method, url: req.url, headers: [...req.headers] } }, environment: {} },
      requestId: `b${++n}`,
    });
    if (r.error && failures++ < 5) console.log(`  (a sandboxed request failed: ${r.status} ${r.error.kind} ${r.error.message})`);
    return new FastResponse(r.body, { status: r.status, headers: r.headers });
  });
  const server = http.createServer({ keepAliveTimeout: 30_000 }, toNodeHandler(app));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const loader = fork(new URL(import.meta.url).pathname, ['load'], { execArgv: ['--no-node-snapshot'] });

  // Warm up both paths (JIT, the worker, the isolate).
  for (let i = 0; i < 200; i++) await fetch(`${base}/sandbox`).then((r) => r.text());
  await measure(loader, `${base}/plain`);
  await measure(loader, `${base}/sandbox`);

  console.log(
    `HTTP: ${CONCURRENCY} concurrent keep-alive requests, ${SECONDS}s per round, ${ROUNDS} rounds (medians), ${CLIENT === 'node' ? "Node's http client" : 'lean load client'}`,
  );
  const plain: Measure[] = [];
  const boxed: Measure[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    plain.push(await measure(loader, `${base}/plain`));
    boxed.push(await measure(loader, `${base}/sandbox`));
  }
  const row = (name: string, ms: Measure[]) =>
    console.log(
      `  ${name.padEnd(26)} ${median(ms.map((m) => m.rps))
        .toFixed(0)
        .padStart(
          7,
        )} req/s   p50 ${median(ms.map((m) => m.p50)).toFixed(2)} ms   p99 ${median(ms.map((m) => m.p99)).toFixed(2)} ms${ms.some((m) => m.errors) ? `   errors ${ms.reduce((a, m) => a + m.errors, 0)}` : ''}`,
    );
  row('plain h3 handler', plain);
  row('hello through the sandbox', boxed);
  const ratio = median(boxed.map((m) => m.rps)) / median(plain.map((m) => m.rps));
  console.log(`  ratio sandbox/plain        ${ratio.toFixed(3)}   (goal >= 0.5: ${ratio >= 0.5 ? 'met' : 'NOT met'})`);

  // The whole product path: an installation's public endpoint on a real server (registry,
  // installations, envelope, invocation recorded in SQLite), against the same plain route.
  const full = await publicEndpointRoute();
  const viaEndpoint: Measure[] = [];
  const plainAgain: Measure[] = [];
  await measure(loader, full.url);
  for (let round = 0; round < ROUNDS; round++) {
    plainAgain.push(await measure(loader, `${base}/plain`));
    viaEndpoint.push(await measure(loader, full.url));
  }
  console.log(`Public endpoint of an installation (switchyard serve, same load):`);
  row('plain h3 handler', plainAgain);
  row('installation public endpoint', viaEndpoint);
  const fullRatio = median(viaEndpoint.map((m) => m.rps)) / median(plainAgain.map((m) => m.rps));
  console.log(`  ratio endpoint/plain       ${fullRatio.toFixed(3)}   (goal >= 0.5: ${fullRatio >= 0.5 ? 'met' : 'NOT met'})`);
  await full.close();
  loader.kill();
  server.close();

  // API only: invocations per second at the same concurrency, no HTTP around it.
  const apiRuns: number[] = [];
  const apiLat: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    let count = 0;
    const end = performance.now() + SECONDS * 1000;
    const started = performance.now();
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (performance.now() < end) {
          const t0 = performance.now();
          await sandbox.invoke({
            script: hello,
            envelope: { event: { type: 'fetch', request: { method: 'GET', url: 'https://x.test/api', headers: [] } }, environment: {} },
            requestId: `a${++n}`,
          });
          apiLat.push(performance.now() - t0);
          count++;
        }
      }),
    );
    apiRuns.push(count / ((performance.now() - started) / 1000));
  }
  apiLat.sort((a, b) => a - b);
  console.log(
    `API only (sandbox.invoke, ${CONCURRENCY} in flight): ${median(apiRuns).toFixed(0)} invocations/s   p50 ${percentile(apiLat, 50).toFixed(2)} ms   p99 ${percentile(apiLat, 99).toFixed(2)} ms`,
  );

  // First request after a reload.
  const envelope = { event: { type: 'fetch', request: { method: 'GET', url: 'https://x.test/cold', headers: [] } }, environment: {} };
  const afterUnload: number[] = [];
  const afterNewVersion: number[] = [];
  const warm: number[] = [];
  for (let i = 0; i < REPEATS; i++) {
    await sandbox.unload('hello');
    let t0 = performance.now();
    await sandbox.invoke({ script: hello, envelope, requestId: `c${i}` });
    afterUnload.push(performance.now() - t0);
    t0 = performance.now();
    await sandbox.invoke({ script: hello, envelope, requestId: `w${i}` });
    warm.push(performance.now() - t0);
    const next = { ...hello, version: `v${i + 2}`, code: `${hello.code}\n// v${i + 2}` };
    t0 = performance.now();
    await sandbox.invoke({ script: next, envelope, requestId: `v${i}` });
    afterNewVersion.push(performance.now() - t0);
    hello.version = next.version;
    hello.code = next.code;
  }
  console.log(`First request after a reload (median of ${REPEATS}, from the caller):`);
  console.log(`  after unload()              ${median(afterUnload).toFixed(1)} ms`);
  console.log(`  after a new script version  ${median(afterNewVersion).toFixed(1)} ms`);
  console.log(`  warm request, for scale     ${median(warm).toFixed(2)} ms`);
  await sandbox.close();
}
