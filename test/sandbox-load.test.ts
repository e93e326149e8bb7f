/**
 * Loading a script into an isolate, and what a failed load leaves behind. A load stopped by a limit
 * (sandbox.startup_time, whichever step it was at) answers that call with the limit and is tried
 * again, after a pause that doubles for a script that keeps overrunning; a fault in the code (a
 * syntax error) is kept for the version and answered without loading again.
 *
 * The sandbox runs in the test's own process (as under `serve`), where a test can hold a step of a
 * load (loadSeam in src/sandbox/host/instance.ts) until the start-up timer has disposed the
 * isolate: what a busy machine does to a load, made certain. The seam also counts the loads.
 */
import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { loadSeam, type LoadStep } from '../src/sandbox/host/instance.ts';
import { LoadBackoff, RETRY_FIRST_MS, RETRY_MAX_MS } from '../src/sandbox/host/load-backoff.ts';
import { LoadError } from '../src/sandbox/host/instance.ts';
import { call, fetchScript, fixture, script, testSandbox } from './sandbox.helpers.ts';

/** Loads started per integration name, and the steps to hold once (until the isolate is disposed). */
function seam() {
  const loads = new Map<string, number>();
  const hold = new Map<string, LoadStep>();
  loadSeam.at = async (step, s, disposed) => {
    if (step === 'context') loads.set(s.name, (loads.get(s.name) ?? 0) + 1);
    if (hold.get(s.name) !== step) return;
    hold.delete(s.name);
    while (!disposed()) await sleep(5);
  };
  return { loads: (name: string) => loads.get(name) ?? 0, hold: (name: string, step: LoadStep) => hold.set(name, step) };
}

/** A call that must be answered: a load that never settles would otherwise hang the test. */
async function answered<T>(p: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const never = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no answer within 15 s`)), 15_000);
  });
  try {
    return await Promise.race([p, never]);
  } finally {
    clearTimeout(timer);
  }
}

afterEach(() => {
  delete loadSeam.at;
});

describe('loading a script', () => {
  it('a load stopped by sandbox.startup_time at any step answers that call with the limit, and the next call loads again', async (t) => {
    const { loads, hold } = seam();
    const sb = testSandbox(t, { inProcess: true, limits: { startup_time: 1000 } });
    for (const step of ['context', 'library', 'compile', 'evaluate', 'warm'] as const) {
      const s = fetchScript(`return new Response('loaded');`);
      hold(s.name, step);
      const first = await answered(call(sb, s), `held at ${step}`);
      assert.equal(first.error?.kind, 'limit', `held at ${step}: ${first.error?.kind}: ${first.error?.message}`);
      assert.equal(first.error?.limit, 'startup_time');
      assert.equal(first.status, 503);
      assert.match(first.error?.message ?? '', /sandbox\.startup_time = 1000 ms/);
      const next = await answered(call(sb, s), `after ${step}`);
      assert.equal(next.status, 200, `after ${step}: ${next.error?.kind}: ${next.error?.message}`);
      assert.equal(next.text, 'loaded');
      assert.equal(loads(s.name), 2, `after ${step}: loaded again once`);
    }
  });

  it('check() of a load stopped by sandbox.startup_time says so, and names the limit', async (t) => {
    const { hold } = seam();
    const sb = testSandbox(t, { inProcess: true, limits: { startup_time: 500 } });
    const s = fetchScript(`return new Response('x');`);
    hold(s.name, 'compile');
    const checked = await sb.check(s);
    assert.equal(checked.ok, false);
    assert.match((checked as { error: string }).error, /sandbox\.startup_time = 500 ms/);
    assert.equal((checked as { limit?: string }).limit, 'startup_time');
    assert.equal((await sb.check(s)).ok, true);
  });

  it('a script that does not compile is answered as such without being loaded again, until a new version', async (t) => {
    const { loads } = seam();
    const sb = testSandbox(t, { inProcess: true });
    const broken = script(`export default {`, 'broken');
    for (let i = 0; i < 5; i++) {
      const r = await call(sb, broken);
      assert.equal(r.status, 500);
      assert.equal(r.error?.kind, 'load');
      assert.match(r.error?.message ?? '', /does not compile: .*(SyntaxError|Unexpected)/);
    }
    assert.equal(loads('broken'), 1, 'loaded once for five calls');
    const fixed = { ...fetchScript(`return new Response('fixed');`, 'broken') };
    assert.equal((await call(sb, fixed)).text, 'fixed');
    assert.equal(loads('broken'), 2);
  });

  it('a script that always overruns sandbox.startup_time is loaded again after pauses that double, not on every call', async (t) => {
    const { loads } = seam();
    const sb = testSandbox(t, { inProcess: true, limits: { startup_time: 50 } });
    const slow = fixture('slow-startup.js', 'always-slow');
    const started = performance.now();
    let calls = 0;
    let noted = 0;
    // A call every 20 ms or so for 3.5 s: a load on each would be well over a hundred.
    while (performance.now() - started < 3_500) {
      const r = await call(sb, slow);
      calls++;
      assert.equal(r.status, 503);
      assert.equal(r.error?.limit, 'startup_time', r.error?.message);
      assert.match(r.error?.message ?? '', /sandbox\.startup_time = 50 ms/);
      if (/\(\d+ loads in a row stopped by a limit; the next is tried in [\d.]+ s\)$/.test(r.error?.message ?? '')) noted++;
      await sleep(20);
    }
    const elapsed = performance.now() - started;
    // The first load, its retry at once, then one after each pause (1 s, 2 s, 4 s...).
    const bound = 2 + Math.floor(Math.log2(elapsed / RETRY_FIRST_MS + 1));
    t.diagnostic(`${loads('always-slow')} loads for ${calls} calls in ${Math.round(elapsed)} ms (at most ${bound})`);
    assert.ok(loads('always-slow') >= 2, 'the first breach is retried at once');
    assert.ok(loads('always-slow') <= bound, `${loads('always-slow')} loads for ${calls} calls in ${Math.round(elapsed)} ms`);
    assert.equal(noted, calls - loads('always-slow'), 'every call answered without a load says when the next one is');
  });
});

describe('a fault in the code, or a limit, by the isolate and the clock', () => {
  // The texts isolated-vm gives a memory limit and a time-out, thrown by the script itself.
  const imitations = [
    'Isolate is disposed: memory limit timed out',
    'Isolate was disposed during execution due to memory limit',
    'Script execution timed out.',
  ];

  it('a top level that throws the text of a limit is a fault in the code: its own message and stack, kept, not retried as a limit', async (t) => {
    const { loads } = seam();
    const sb = testSandbox(t, { inProcess: true });
    for (const [i, text] of imitations.entries()) {
      const name = `imitates-${i}`;
      const s = script(
        `import { createIntegration } from '@switchyard/runtime';
function topLevel() { throw new Error(${JSON.stringify(text)}); }
topLevel();
export default createIntegration({ fetch: async () => new Response('x') });`,
        name,
      );
      for (let n = 0; n < 3; n++) {
        const r = await answered(call(sb, s), text);
        assert.equal(r.status, 500, `${text}: ${r.error?.kind}: ${r.error?.message}`);
        assert.equal(r.error?.kind, 'load');
        assert.equal(r.error?.limit, undefined);
        assert.equal(r.error?.message, `the script threw while loading: ${text}`);
        assert.match(r.error?.stack ?? '', new RegExp(`at topLevel \\(integration:${name}@`));
      }
      assert.equal(loads(name), 1, `${text}: loaded once for three calls (a fault is kept)`);
      const checked = await sb.check({ ...s, version: `${s.version}-check` });
      assert.equal(checked.ok, false);
      assert.equal((checked as { limit?: string }).limit, undefined, text);
      assert.equal((checked as { error: string }).error, `the script threw while loading: ${text}`);
    }
  });

  it('a top level that runs out of memory or start-up time is still a limit', async (t) => {
    // Each limit on a sandbox of its own: under a loaded machine a 300 ms start-up time ran out
    // before 24 MB did (a full CI run), which is that limit working, not the memory one.
    const roomy = testSandbox(t, { inProcess: true, limits: { memory_mb: 24, startup_time: 20_000 } });
    const bomb = script(`import { createIntegration } from '@switchyard/runtime';
const a = []; while (true) a.push(new Array(1e5).fill(Math.random()));
export default createIntegration({ fetch: async () => new Response('x') });`);
    const spent = await answered(call(roomy, bomb), 'memory bomb');
    assert.equal(spent.error?.limit, 'memory_mb', spent.error?.message);
    const sb = testSandbox(t, { inProcess: true, limits: { memory_mb: 24, startup_time: 300 } });
    const slow = await answered(call(sb, fixture('slow-startup.js', 'slow-top')), 'spin');
    assert.equal(slow.error?.limit, 'startup_time', slow.error?.message);
  });
});

describe('reading what a script exports (check)', () => {
  it('concurrent checks of one version share one load', async (t) => {
    const { loads } = seam();
    const sb = testSandbox(t, { inProcess: true });
    const s = fetchScript(`return new Response('x');`, 'shared-check');
    const answers = await Promise.all(Array.from({ length: 16 }, () => answered(sb.check(s), 'check')));
    for (const a of answers) assert.deepEqual(a, answers[0]);
    assert.equal(answers[0].ok, true);
    assert.equal(loads('shared-check'), 1, '16 checks at once: one load');
  });

  it('checks of a script that always overruns sandbox.startup_time pause like its calls, and share the pause with them', async (t) => {
    const { loads } = seam();
    const sb = testSandbox(t, { inProcess: true, limits: { startup_time: 50 } });
    const slow = fixture('slow-startup.js', 'slow-check');
    const started = performance.now();
    let checks = 0;
    // Sixteen at once (as many handler runs as a process runs together), every 20 ms or so, for 2.5 s.
    while (performance.now() - started < 2_500) {
      const answers = await Promise.all(Array.from({ length: 16 }, () => sb.check(slow)));
      checks += answers.length;
      for (const a of answers) {
        assert.equal(a.ok, false);
        assert.equal((a as { limit?: string }).limit, 'startup_time', (a as { error?: string }).error);
      }
      await sleep(20);
    }
    const elapsed = performance.now() - started;
    const bound = 2 + Math.floor(Math.log2(elapsed / RETRY_FIRST_MS + 1));
    t.diagnostic(`${loads('slow-check')} loads for ${checks} checks in ${Math.round(elapsed)} ms (at most ${bound})`);
    assert.ok(loads('slow-check') >= 2, 'the first breach is retried at once');
    assert.ok(loads('slow-check') <= bound, `${loads('slow-check')} loads for ${checks} checks`);
    // The pause is the version's, whoever asks: a call now is answered without a load.
    const before = loads('slow-check');
    const r = await call(sb, slow);
    assert.equal(r.error?.limit, 'startup_time');
    assert.match(r.error?.message ?? '', /loads in a row stopped by a limit; the next is tried in [\d.]+ s\)$/);
    assert.equal(loads('slow-check'), before, 'no load during the pause');
  });
});

describe('the pause between loads stopped by a limit', () => {
  const breach = new LoadError('its load (compile and top-level code) did not finish within sandbox.startup_time = 1000 ms; the script was not loaded', {
    limit: 'startup_time',
  });
  function clocked() {
    let now = 5_000;
    return { backoff: new LoadBackoff(() => now), advance: (ms: number) => (now += ms) };
  }

  it('retries the first breach at once, then pauses 1 s, 2 s, 4 s... up to 30 s', () => {
    const { backoff, advance } = clocked();
    assert.equal(backoff.refusal(), null);
    backoff.breached(breach);
    assert.equal(backoff.refusal(), null, 'a one-off breach costs one call');
    const pauses: number[] = [];
    for (let i = 0; i < 8; i++) {
      backoff.breached(breach);
      let waited = 0;
      while (backoff.refusal()) {
        advance(250);
        waited += 250;
      }
      pauses.push(waited);
    }
    assert.deepEqual(pauses, [1000, 2000, 4000, 8000, 16000, RETRY_MAX_MS, RETRY_MAX_MS, RETRY_MAX_MS]);
  });

  it('answers with the limit it breached, saying when the next load is', () => {
    const { backoff, advance } = clocked();
    backoff.breached(breach);
    backoff.breached(breach);
    advance(400);
    const refusal = backoff.refusal();
    assert.ok(refusal instanceof LoadError);
    assert.equal(refusal.limit, 'startup_time');
    assert.equal(refusal.message, `${breach.message} (2 loads in a row stopped by a limit; the next is tried in 0.6 s)`);
  });

  it('a breach of a load that began before the pause does not lengthen it; a load that succeeds ends it', () => {
    const { backoff, advance } = clocked();
    backoff.breached(breach);
    backoff.breached(breach);
    advance(500);
    backoff.breached(breach); // a second isolate, loading at the same time
    advance(500);
    assert.equal(backoff.refusal(), null, 'still the 1 s pause');
    backoff.loaded();
    backoff.breached(breach);
    assert.equal(backoff.refusal(), null, 'counted from one again');
  });
});
