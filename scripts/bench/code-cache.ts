/**
 * Does V8's code cache pay at start-up? Run:
 *
 *   node_modules/.bin/node --no-node-snapshot scripts/bench/code-cache.ts
 *
 * What a new isolate compiles is the guest library (Web APIs and the runtime library, ~210 kB of
 * JavaScript, evaluated in every isolate) and the integration's own module. isolated-vm accepts
 * `cachedData` on compileScript only (not on compileModule), so only the guest library can use
 * it; instance.ts already produces that cache in each process from our own bundle and hands it to
 * every later compile. The question here is whether keeping it on disk would pay: it would save
 * the difference below once per serving process (its first isolate), never per integration.
 *
 * Printed: medians of BENCH_ROUNDS (default 20) compiles of the guest library in fresh isolates,
 * without and with the cache, and the whole first load of a hello integration (isolate, context,
 * library, module, warm-up) in a process whose cache is cold and then warm.
 */
import ivm from 'isolated-vm';
import { defaultConfig } from '../../src/config/index.ts';
import { guestBundle } from '../../src/sandbox/guest-bundle.ts';
import { SandboxHost } from '../../src/sandbox/host/host.ts';
import { median, setting } from './common.ts';

const ROUNDS = setting('BENCH_ROUNDS', 20);
const bundle = await guestBundle();

async function compile(cachedData?: ivm.ExternalCopy<ArrayBuffer>): Promise<{ ms: number; cache?: ivm.ExternalCopy<ArrayBuffer>; rejected?: boolean }> {
  const isolate = new ivm.Isolate({ memoryLimit: 128 });
  try {
    const t = performance.now();
    const script = (await isolate.compileScript(bundle.core, {
      filename: 'switchyard:guest',
      ...(cachedData ? { cachedData } : { produceCachedData: true }),
    })) as ivm.Script & ivm.CachedDataResult & { cachedDataRejected?: boolean };
    return { ms: performance.now() - t, cache: script.cachedData, rejected: script.cachedDataRejected };
  } finally {
    isolate.dispose();
  }
}

const first = await compile();
const cold: number[] = [];
const warm: number[] = [];
for (let i = 0; i < ROUNDS; i++) {
  cold.push((await compile()).ms);
  const w = await compile(first.cache);
  if (w.rejected) throw new Error('V8 rejected its own cache');
  warm.push(w.ms);
}
console.log(
  `guest library: ${(bundle.core.length / 1024).toFixed(0)} kB of JavaScript, code cache ${((first.cache?.copy().byteLength ?? 0) / 1024).toFixed(0)} kB`,
);
console.log(
  `compile without the cache: median ${median(cold).toFixed(2)} ms; with it: ${median(warm).toFixed(2)} ms; saved ${(median(cold) - median(warm)).toFixed(2)} ms per compile`,
);

// The first load of an integration in this process (the library's cache produced by it) and the next ones.
const host = new SandboxHost({ limits: defaultConfig().sandbox, allowPrivateNetworks: false, serverOrigin: 'http://127.0.0.1:1', concurrency: 4 }, () => {});
const code = "import { createIntegration } from '@switchyard/runtime';\nexport default createIntegration({ fetch: async () => new Response('hello') });\n";
const loads: number[] = [];
for (let i = 0; i <= ROUNDS; i++) {
  const name = `hello-${i}`;
  const t = performance.now();
  const r = await host.invoke({
    name,
    version: '0123456789abcdef',
    code,
    envelope: { event: { type: 'fetch', request: { method: 'GET', url: 'http://127.0.0.1:1/', headers: [] } }, environment: {} },
    requestId: 'r',
  });
  if (r === 'need-code' || r.status !== 200) throw new Error('the hello integration did not answer 200');
  loads.push(performance.now() - t);
  host.unload(name);
}
host.close();
console.log(
  `first invocation of an integration (new isolate): the process's first ${loads[0].toFixed(1)} ms (produces the cache), later ones median ${median(loads.slice(1)).toFixed(1)} ms (use it)`,
);
console.log(
  `a cache kept on disk would save ~${(median(cold) - median(warm)).toFixed(1)} ms once per serving process, on its first isolate; integrations' own modules cannot use one (isolated-vm's compileModule takes no cachedData)`,
);
