/**
 * One receiver at the default settings: what a new user gets from `switchyard serve` with the
 * shipped defaults (webhooks.per_endpoint_concurrency 4, the default serving processes) toward one
 * endpoint on loopback that answers 200 at once.
 * Run: PATH=node_modules/.bin:$PATH node --no-node-snapshot scripts/bench/endpoint-defaults.ts
 *
 * The receiver and load generator is delivery.ts's (forked with its `receiver` role), so latency is
 * read on one clock, from the start of the ingest request to the arrival.
 * 1. Throughput: BENCH_N (10,000) single-event POST /api/v1/events over 64 keep-alive connections,
 *    timed from the first request to the N-th arrival. Goal: >= 3,000 deliveries/s.
 * 2. Latency at 1,000 events/s (open loop, BENCH_LATENCY_SECONDS, 3 s). Goal: p50 < 5 ms, p99 < 25 ms.
 * 3. Slot hold per attempt (switchyard_webhook_slot_hold_seconds from /metrics, summed over the
 *    serving processes): median and p99, read from the histogram's buckets (upper bounds), beside
 *    the HTTP exchange alone (switchyard_webhook_attempt_duration_seconds).
 * Medians of BENCH_ROUNDS (3) rounds on one server, after a round that warms it (not counted: a
 * server that has just started compiles its hot path during the first thousands of events).
 */
import { fork, type ChildProcess } from 'node:child_process';
import { ask, cpuMs, median, percentile, processTree, setting, startServe } from './common.ts';

const N = setting('BENCH_N', 10_000);
const ROUNDS = setting('BENCH_ROUNDS', 3);
const LATENCY_SECONDS = setting('BENCH_LATENCY_SECONDS', 3, false);
const GOAL_RATE = 3000;
const GOAL_P50 = 5;
const GOAL_P99 = 25;

/** The value at quantile `q` of a Prometheus histogram's cumulative buckets (the bucket's upper bound). */
function histogramQuantile(metrics: string, name: string, q: number): number {
  const buckets: Array<[number, number]> = [];
  for (const m of metrics.matchAll(new RegExp(`^${name}_bucket\\{[^}]*le="([^"]+)"[^}]*\\} (\\d+(?:\\.\\d+)?)$`, 'gm')))
    buckets.push([m[1] === '+Inf' ? Infinity : Number(m[1]), Number(m[2])]);
  if (!buckets.length) return NaN;
  buckets.sort((a, b) => a[0] - b[0]);
  const total = buckets.at(-1)![1];
  return buckets.find(([, c]) => c >= q * total)?.[0] ?? NaN;
}

async function receiver(): Promise<{ proc: ChildProcess; port: number }> {
  const proc = fork(new URL('./delivery.ts', import.meta.url).pathname, ['receiver'], {
    execArgv: ['--no-node-snapshot'],
    env: { ...process.env, BENCH_N: String(N) },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const { port } = await ask<{ port: number }>(proc, undefined, 'port');
  return { proc, port };
}

/** CPU ms used so far by the processes of these trees (those alive now). */
function cpuOf(roots: number[]): Map<number, number> {
  return new Map(roots.flatMap(processTree).map((pid) => [pid, cpuMs(pid) ?? 0]));
}
const cpuSince = (before: Map<number, number>, after: Map<number, number>) => [...after].reduce((ms, [pid, v]) => ms + v - (before.get(pid) ?? 0), 0);

async function round(rx: { proc: ChildProcess; port: number }, serve: Awaited<ReturnType<typeof startServe>>) {
  const cpu0 = { serve: cpuOf([serve.child.pid!]), rx: cpuOf([rx.proc.pid!]) };
  const blast = await ask<{ ms: number; ackedMs: number; refused: number; received: number }>(rx.proc, { blast: { url: serve.url } }, 'ms');
  if (blast.refused || blast.received < N) throw new Error(`${blast.refused} ingest requests refused, ${blast.received} of ${N} delivered`);
  // The burst's CPU per delivery: less noisy than its rate on a machine shared with anything else.
  const cpu1 = { serve: cpuOf([serve.child.pid!]), rx: cpuOf([rx.proc.pid!]) };
  const metrics = await (await fetch(`${serve.url}/metrics`, { headers: { authorization: `Bearer ${serve.token}` } })).text();
  const load = await ask<{ latencies: number[]; lost: number }>(rx.proc, { load: { url: serve.url, rate: 1000, seconds: LATENCY_SECONDS } }, 'latencies');
  const sorted = load.latencies.sort((a, b) => a - b);
  return {
    rate: (N / blast.ms) * 1000,
    ingest: (N / blast.ackedMs) * 1000,
    p50: percentile(sorted, 50),
    p99: percentile(sorted, 99),
    lost: load.lost,
    cpuServe: (cpuSince(cpu0.serve, cpu1.serve) * 1000) / N,
    cpuRx: (cpuSince(cpu0.rx, cpu1.rx) * 1000) / N,
    // The histograms count from the server's start: every round so far, the warm-up's included.
    holdP50: histogramQuantile(metrics, 'switchyard_webhook_slot_hold_seconds', 0.5) * 1000,
    holdP99: histogramQuantile(metrics, 'switchyard_webhook_slot_hold_seconds', 0.99) * 1000,
    httpP50: histogramQuantile(metrics, 'switchyard_webhook_attempt_duration_seconds', 0.5) * 1000,
  };
}

async function main(): Promise<void> {
  const rx = await receiver();
  console.log(
    `one endpoint at the default settings: switchyard serve (defaults), ${N} single-event POSTs over 64 connections, then ${LATENCY_SECONDS} s at 1,000 events/s; ${ROUNDS} rounds, Node ${process.version}`,
  );
  // The defaults, but for the settings a loopback test needs (BENCH_PROCESSES=n: another count).
  const serve = await startServe({ processes: process.env.BENCH_PROCESSES ?? 0 });
  const rounds: Array<Awaited<ReturnType<typeof round>>> = [];
  try {
    await serve.api('POST', '/api/v1/installations', {
      integration: 'webhook',
      configuration: { webhook_url: `http://127.0.0.1:${rx.port}/hook`, event_types: 'site_view' },
    });
    await round(rx, serve); // warm-up, not counted
    for (let i = 0; i < ROUNDS; i++) rounds.push(await round(rx, serve));
  } finally {
    serve.stop();
  }
  const m = (k: keyof (typeof rounds)[0]) => median(rounds.map((r) => r[k]));
  const f = (x: number) => x.toFixed(2);
  const rate = m('rate');
  console.log(
    `throughput  ${Math.round(rate)} deliveries/s (goal >= ${GOAL_RATE}: ${rate >= GOAL_RATE ? 'met' : 'NOT met'}; ratio to the goal ${f(rate / GOAL_RATE)}); ingest alone ${Math.round(m('ingest'))} events/s`,
  );
  console.log(
    `latency     at 1,000/s ingest-to-receiver p50 ${f(m('p50'))} ms (goal < ${GOAL_P50}: ${m('p50') < GOAL_P50 ? 'met' : 'NOT met'}), ` +
      `p99 ${f(m('p99'))} ms (goal < ${GOAL_P99}: ${m('p99') < GOAL_P99 ? 'met' : 'NOT met'}); not arrived ${m('lost')}`,
  );
  console.log(
    `slot hold   per attempt p50 <= ${f(m('holdP50'))} ms, p99 <= ${f(m('holdP99'))} ms (bucket bounds); the HTTP exchange alone p50 <= ${f(m('httpP50'))} ms`,
  );
  console.log(
    `cpu         per delivery in the burst: switchyard (every process) ${Math.round(m('cpuServe'))} us, load generator and receiver ${Math.round(m('cpuRx'))} us (/proc, 10 ms ticks)`,
  );
  console.log(`rounds      deliveries/s [${rounds.map((r) => Math.round(r.rate)).join(', ')}]  p99 ms [${rounds.map((r) => f(r.p99)).join(', ')}]`);
  rx.proc.disconnect();
  rx.proc.kill();
}

await main();
