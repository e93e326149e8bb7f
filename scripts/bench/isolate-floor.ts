/**
 * The floor under every sandbox invocation: isolated-vm alone, an empty guest function, no guest
 * library, no IPC, no HTTP, with the host's two call patterns: inline (applySync on this thread,
 * the answer copied out as the call's return value after its microtasks: the default) and apart
 * (an async apply on isolated-vm's threads answered through an ignored callback: integrations moved
 * off the inline path). Inline calls go one after another to the same warm isolate, as the host
 * runs quick invocations; the async pattern spreads 32 calls in flight over 4 isolates, like the
 * sandbox's defaults under the sandbox benchmark's load. Then one step up: a whole hello invocation
 * through the SandboxHost in this process (guest library, Request, URL, Response, limits;
 * still no IPC and no HTTP), which is what the sandbox worker spends per request before its IPC.
 * Run: PATH=node_modules/.bin:$PATH node --no-node-snapshot scripts/bench/isolate-floor.ts
 * Prints calls/s and CPU per call (median of ROUNDS rounds), and how much of the sandbox's own
 * per-invocation budget at the public-endpoint goal that floor already takes.
 */
import ivm from 'isolated-vm';
import { defaultConfig } from '../../src/config/index.ts';
import { SandboxHost } from '../../src/sandbox/host/host.ts';
import { median, setting } from './common.ts';

const ISOLATES = 4;
const IN_FLIGHT = 32;
const SECONDS = setting('BENCH_SECONDS', 3, false);
const ROUNDS = setting('BENCH_ROUNDS', 3);

interface Slot {
  fn: ivm.Reference;
  inline: ivm.Reference;
  answer: ((v: unknown) => void) | null;
  busy: boolean;
}

const slots: Slot[] = [];
for (let i = 0; i < ISOLATES; i++) {
  const isolate = new ivm.Isolate({ memoryLimit: 128 });
  const context = await isolate.createContext();
  const slot: Slot = { fn: undefined as unknown as ivm.Reference, inline: undefined as unknown as ivm.Reference, answer: null, busy: false };
  await context.global.set(
    'respond',
    new ivm.Callback(
      (v: unknown) => {
        const a = slot.answer;
        slot.answer = null;
        a?.(v);
      },
      { ignored: true },
    ),
  );
  slot.fn = (await context.eval(
    `(function (input) { Promise.resolve().then(() => respond({ status: 200, headers: [['content-type', 'text/plain']], body: new Uint8Array(13) })); })`,
    { reference: true },
  )) as ivm.Reference;
  slot.inline = (await context.eval(
    `(function (input) { const box = []; Promise.resolve().then(() => { box[0] = { status: 200, headers: [['content-type', 'text/plain']], body: new Uint8Array(13) }; }); return box; })`,
    { reference: true },
  )) as ivm.Reference;
  slots.push(slot);
}

// What the host copies in for a hello request.
const input = {
  event: {
    type: 'fetch',
    request: {
      method: 'GET',
      url: 'http://127.0.0.1:4000/world',
      headers: [
        ['host', '127.0.0.1:4000'],
        ['connection', 'keep-alive'],
      ],
    },
  },
  environment: { installation: { id: 'inst_x', configuration: {} } },
  entropy: new Uint8Array(256),
};
const waiting: Array<(s: Slot) => void> = [];
const acquire = () =>
  new Promise<Slot>((resolve) => {
    const free = slots.find((s) => !s.busy);
    if (!free) return waiting.push(resolve);
    free.busy = true;
    resolve(free);
  });
const release = (s: Slot) => {
  const next = waiting.shift();
  if (next) next(s);
  else s.busy = false;
};

async function call(): Promise<void> {
  const s = await acquire();
  await new Promise((resolve) => {
    s.answer = resolve;
    s.fn.apply(undefined, [input], { arguments: { copy: true }, timeout: 1000 }).catch(() => resolve(undefined));
  });
  release(s);
}

function callInline(): void {
  const s = slots[0];
  const box = s.inline.applySync(undefined, [input], { arguments: { copy: true }, result: { copy: true }, timeout: 1000 }) as unknown[];
  if (!box[0]) throw new Error('no answer in the outbox');
}

/**
 * ROUNDS rounds of `step` one after another (a turn of the event loop every 100): rate and CPU per
 * step. A step that finishes synchronously is not awaited (no microtask in the figure).
 */
async function sequential(step: () => void | Promise<void>): Promise<{ rates: number[]; cpu: number[] }> {
  const rates: number[] = [];
  const cpu: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    let n = 0;
    while (performance.now() - t0 < SECONDS * 1000) {
      for (let i = 0; i < 100; i++) {
        const pending = step();
        if (pending) await pending;
      }
      n += 100;
      await new Promise((r) => setImmediate(r));
    }
    const c = process.cpuUsage(c0);
    rates.push(n / ((performance.now() - t0) / 1000));
    cpu.push((c.user + c.system) / n);
  }
  return { rates, cpu };
}

for (let i = 0; i < 2000; i++) await call(); // warm-up
for (let i = 0; i < 2000; i++) callInline();
const { rates: inlineRates, cpu: inlineCpu } = await sequential(callInline);
const rates: number[] = [];
const cpu: number[] = [];
for (let round = 0; round < ROUNDS; round++) {
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  const end = t0 + SECONDS * 1000;
  let n = 0;
  await Promise.all(
    Array.from({ length: IN_FLIGHT }, async () => {
      while (performance.now() < end) {
        await call();
        n++;
      }
    }),
  );
  const c = process.cpuUsage(c0);
  rates.push(n / ((performance.now() - t0) / 1000));
  cpu.push((c.user + c.system) / n);
}
// A hello invocation through the sandbox host, with an environment of the size the runtime builds.
const host = new SandboxHost({ limits: defaultConfig().sandbox, allowPrivateNetworks: false, serverOrigin: 'http://127.0.0.1:1', concurrency: 4 }, () => {});
const publicEndpoint = 'http://127.0.0.1:4000/v1/integrations/hello/installations/inst_f14dbd8b24f97380985d';
const invoke = {
  name: 'hello',
  version: '1',
  code: `import { createIntegration } from '@switchyard/runtime';
export default createIntegration({ async fetch(request) { return new Response('Hello, ' + new URL(request.url).pathname.split('/').pop() + '!', { headers: { 'content-type': 'text/plain;charset=UTF-8' } }); } });`,
  requestId: 'req_bench',
  envelope: {
    event: {
      type: 'fetch',
      request: {
        method: 'GET',
        url: `${publicEndpoint}/world`,
        headers: [
          ['accept', '*/*'],
          ['connection', 'keep-alive'],
          ['host', '127.0.0.1:4000'],
        ],
      },
    },
    environment: {
      apiEndpoint: 'http://127.0.0.1:4000/api/v1',
      apiTokens: { installation: 'sy_inv_aW5zdF9mMTRkYmQ4YjI0Zjk3MzgwOTg1ZC4xNzk1NTUxNDI3.4nXRS-lDJSKz6BeonhDaMq81Duv2mFKlZ4_lrZwn8ww' },
      integration: {
        name: 'hello',
        title: 'Hello',
        description: 'Says hello',
        visibility: 'private',
        scopes: [],
        version: '1',
        urls: { publicEndpoint: 'http://127.0.0.1:4000/v1/integrations/hello' },
      },
      secrets: {},
      installation: {
        id: 'inst_f14dbd8b24f97380985d',
        target: 'organization',
        space_selection: 'all',
        status: 'active',
        configuration: {},
        externalIds: [],
        urls: { publicEndpoint },
      },
    },
  },
};
// As the host does: an invocation answered during its dispatch comes back synchronously.
function invokeHello(): void | Promise<void> {
  const check = (result: Awaited<ReturnType<SandboxHost['invoke']>>) => {
    if (result === 'need-code' || result.status !== 200) throw new Error(`the hello invocation failed: ${JSON.stringify(result)}`);
  };
  const outcome = host.invoke(invoke);
  return outcome instanceof Promise ? outcome.then(check) : check(outcome);
}
for (let i = 0; i < 2000; i++) await invokeHello(); // warm-up (the first one loads the isolate)
const { rates: hostRates, cpu: hostCpu } = await sequential(invokeHello);
host.close();

// At the goal (public endpoint >= 0.5 of a plain h3 handler, which serves ~50,000 req/s on 2 cores
// under the sandbox benchmark's lean load client), a request may cost at most ~2 cores / 25,000
// req/s = ~80 us of CPU in all processes together.
const BUDGET_US = 2e6 / 25_000;
console.log(`isolated-vm floor: ${ISOLATES} isolates, ${ROUNDS} rounds of ${SECONDS}s (medians)`);
console.log(
  `  inline (the default):            ${median(inlineRates).toFixed(0).padStart(7)} calls/s, ${median(inlineCpu).toFixed(1).padStart(5)} us CPU per call, share of the ~${BUDGET_US.toFixed(0)} us per-request budget at the public-endpoint goal: ${(median(inlineCpu) / BUDGET_US).toFixed(2)}`,
);
console.log(
  `  apart, ${IN_FLIGHT} in flight (moved off): ${median(rates).toFixed(0).padStart(7)} calls/s, ${median(cpu).toFixed(1).padStart(5)} us CPU per call, share: ${(median(cpu) / BUDGET_US).toFixed(2)}`,
);
console.log(
  `  a hello invocation, sandbox host: ${median(hostRates).toFixed(0).padStart(7)} invocations/s, ${median(hostCpu).toFixed(1).padStart(5)} us CPU each, share: ${(median(hostCpu) / BUDGET_US).toFixed(2)}`,
);
process.exit(0);
