/**
 * Where the guest library's time goes when it answers a hello request: its dispatch (Request built,
 * the handler, the Response read back, the outbox) run in a plain V8 context of this process, with
 * the library built unminified so that its functions keep their names, under Node's profiler.
 * isolated-vm's own profiler cannot show this: it makes one profile per activation of the isolate,
 * with one or two samples each for a call of tens of µs. What this leaves out: isolated-vm's
 * crossing (copies, the time-out, entering the isolate) and the guest heap's own size limits. Run:
 *
 *   node --no-node-snapshot scripts/bench/guest-dispatch.ts
 *
 * Settings: BENCH_DISPATCHES (default 300000), BENCH_TOP (functions listed, default 25).
 * Prints µs per dispatch (profiler on: compare runs of this script only), then the functions with
 * the most self time, a builtin's time charged to its caller, and the share of the collector.
 */
import { Session } from 'node:inspector/promises';
import vm from 'node:vm';
import { buildGuestBundle } from '../../src/sandbox/guest-bundle.ts';
import { setting } from './common.ts';

const N = setting('BENCH_DISPATCHES', 300_000);
const TOP = setting('BENCH_TOP', 25);

const bundle = await buildGuestBundle({ minify: false });
const context = vm.createContext({});
vm.runInContext(bundle.core, context, { filename: 'switchyard:guest' });
const boot = vm.runInContext('__switchyardBoot', context) as (...fns: unknown[]) => Record<string, (...a: unknown[]) => unknown>;
const guest = boot(
  () => {},
  (name: string) => bundle.extras[name],
  (n: number) => crypto.getRandomValues(new Uint8Array(n)),
  () => ({}),
);
guest.register({
  default: vm.runInContext(`globalThis[Symbol.for('switchyard.runtime')].createIntegration({ fetch: () => new Response('hello') })`, context, {
    filename: 'integration:hello@1',
  }),
});

// The input as the host sends it for a canonical request without a body (see host/invocation.ts).
const url = 'http://127.0.0.1:4000/v1/integrations/hello/installations/inst_f14dbd8b24f97380985d';
const input = JSON.stringify({
  event: { type: 'fetch', request: { method: 'GET', url, headers: [['host', '127.0.0.1:4000']] } },
  body: null,
  responseBodyLimit: 10 * 1024 * 1024,
  logLines: 256,
  canonical: true,
  toEvents: false,
});
let call = 0;
async function dispatch(seq: number): Promise<void> {
  const box = guest.dispatch(seq, input, ++call, true) as unknown[];
  // The host reads the outbox once the call's microtasks ran; here, a few turns of them.
  for (let i = 0; i < 6 && !box.length; i++) await null;
  if (!box.length) throw new Error('the hello dispatch did not answer');
}
for (let i = 0; i < 20_000; i++) await dispatch(i + 1);

const session = new Session();
session.connect();
await session.post('Profiler.enable');
await session.post('Profiler.setSamplingInterval', { interval: 100 });
await session.post('Profiler.start');
const c0 = process.threadCpuUsage();
for (let i = 0; i < N; i++) await dispatch(i + 1);
const c = process.threadCpuUsage(c0);
const { profile } = await session.post('Profiler.stop');
session.disconnect();

const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const parent = new Map<number, number>();
for (const n of profile.nodes) for (const k of n.children ?? []) parent.set(k, n.id);
const self = new Map<string, number>();
let total = 0;
for (let i = 0; i < profile.samples!.length; i++) {
  const dt = profile.timeDeltas![i + 1] ?? 0;
  let id: number | undefined = profile.samples![i];
  let f = byId.get(id)!.callFrame;
  if (f.functionName === '(idle)') continue;
  // A builtin (no file) is charged to its nearest caller with one.
  while (!f.url && id !== undefined && !f.functionName.startsWith('(')) {
    id = parent.get(id);
    if (id !== undefined) f = byId.get(id)!.callFrame;
  }
  const key = f.url ? `${f.functionName || '(anonymous)'} ${f.url.replace(/^.*\//, '')}` : f.functionName;
  self.set(key, (self.get(key) ?? 0) + dt);
  total += dt;
}
console.log(`guest dispatch of a hello request, plain V8 context, profiler on: ${((c.user + c.system) / N).toFixed(2)} µs of CPU each (${N} dispatches)`);
for (const [k, v] of [...self.entries()].sort((a, b) => b[1] - a[1]).slice(0, TOP)) console.log(`  ${((v / total) * 100).toFixed(1).padStart(5)}%  ${k}`);
