/**
 * The process's call watchdog (src/sandbox/host/watchdog.ts): one thread that stops inline guest
 * calls running past their deadline, in place of isolated-vm's time-out per call, and the shared
 * memory that keeps a stopped call's console lines (src/sandbox/host/last-lines.ts).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { describe, it } from 'node:test';
import ivm from 'isolated-vm';
import { LINE_RING_BYTES, lastLines } from '../src/sandbox/host/last-lines.ts';
import { CallWatchdog, WATCH_IDLE_MS, WATCH_POLL_MS, callWatchdog } from '../src/sandbox/host/watchdog.ts';
import { call, fetchScript, fixture, testSandbox } from './sandbox.helpers.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** An isolate with `run(spin)`: returns 1, or loops forever when `spin` is true. */
function spinner(): { isolate: ivm.Isolate; run: ivm.Reference } {
  const isolate = new ivm.Isolate({ memoryLimit: 16 });
  const context = isolate.createContextSync();
  const run = context.evalSync('(spin) => { if (spin) for (;;) {} return 1; }', { reference: true }) as ivm.Reference;
  return { isolate, run };
}

/** When the last `armWhenHeld` armed its call (read just before: a call's time runs from its arm). */
let armedAt = 0;

/** Arm calls until one is watched: the first call of an instance starts the loop that takes its handle. */
async function armWhenHeld(wd: CallWatchdog, id: number, ms: number): Promise<number> {
  for (let i = 0; i < 200; i++) {
    armedAt = performance.now();
    const seq = wd.arm(id, ms);
    if (seq) return seq;
    await sleep(1);
  }
  throw new Error('the watchdog never took the instance');
}

/** A program for a child process: `body` runs with `wd` (a watchdog), `run` (a call into an isolate) and `id` (its number). */
function withWatchdog(body: string): string {
  return `
    import ivm from 'isolated-vm';
    import { CallWatchdog } from ${JSON.stringify(new URL('../src/sandbox/host/watchdog.ts', import.meta.url).href)};
    const wd = new CallWatchdog();
    const isolate = new ivm.Isolate({ memoryLimit: 16 });
    const run = isolate.createContextSync().evalSync('() => 1', { reference: true });
    const id = wd.enlist(isolate);
    ${body}`;
}

describe('the call watchdog', () => {
  it('stops a call that runs past its deadline, no sooner, by disposing its isolate', async (t) => {
    const wd = new CallWatchdog();
    t.after(() => wd.rest());
    const { isolate, run } = spinner();
    const id = wd.enlist(isolate);
    const seq = await armWhenHeld(wd, id, 50);
    // From the arm, not from here: on a loaded machine this thread can be preempted in between.
    const started = armedAt;
    assert.throws(() => run.applySync(undefined, [true]), /disposed/);
    const elapsed = performance.now() - started;
    assert.equal(wd.disarm(seq), true, 'the call was not stopped by the watchdog');
    assert.equal(isolate.isDisposed, true);
    // Date.now() has whole milliseconds: the deadline can be read up to 1 ms early.
    assert.ok(elapsed >= 49, `stopped after ${elapsed.toFixed(1)} ms, before its 50 ms`);
    t.diagnostic(`stopped ${(elapsed - 50).toFixed(1)} ms past the deadline (poll ${WATCH_POLL_MS} ms)`);
  });

  it('leaves calls that end in time alone, and does not watch a nested call', async (t) => {
    const wd = new CallWatchdog();
    t.after(() => wd.rest());
    const { isolate, run } = spinner();
    const id = wd.enlist(isolate);
    for (let i = 0; i < 2_000; i++) {
      const seq = i === 0 ? await armWhenHeld(wd, id, 200) : wd.arm(id, 200);
      assert.notEqual(seq, 0, `call ${i} was not watched`);
      assert.equal(wd.arm(id, 200), 0, 'a call armed inside another is not watched');
      assert.equal(run.applySync(undefined, [false]), 1);
      assert.equal(wd.disarm(seq), false);
    }
    await sleep(300); // past the deadline of every call so far
    assert.equal(isolate.isDisposed, false);
    isolate.dispose();
  });

  it('keeps its loop running while short calls keep coming, though it seldom sees one running', async (t) => {
    const wd = new CallWatchdog();
    t.after(() => wd.rest());
    const { isolate, run } = spinner();
    const id = wd.enlist(isolate);
    wd.disarm(await armWhenHeld(wd, id, 1000));
    // Calls of a few µs, one every millisecond or so, for well past the loop's idle time.
    let unwatched = 0;
    const until = performance.now() + 3 * WATCH_IDLE_MS;
    while (performance.now() < until) {
      const seq = wd.arm(id, 1000);
      if (seq === 0) unwatched++;
      run.applySync(undefined, [false]);
      wd.disarm(seq);
      await sleep(1);
    }
    t.diagnostic(`unwatched ${unwatched} watched ${wd.watched}`);
    assert.equal(unwatched, 0, 'the loop ended and was started again while calls came');
    isolate.dispose();
  });

  it('takes an isolate enlisted while its loop runs, and stops a runaway call in it', async (t) => {
    const wd = new CallWatchdog();
    t.after(() => wd.rest());
    const first = spinner();
    const a = wd.enlist(first.isolate);
    wd.disarm(await armWhenHeld(wd, a, 1000));
    const second = spinner();
    const b = wd.enlist(second.isolate);
    const seq = await armWhenHeld(wd, b, 30);
    assert.throws(() => second.run.applySync(undefined, [true]), /disposed/);
    assert.equal(wd.disarm(seq), true);
    // The first isolate is still held and still works.
    const again = await armWhenHeld(wd, a, 1000);
    assert.equal(first.run.applySync(undefined, [false]), 1);
    assert.equal(wd.disarm(again), false);
    first.isolate.dispose();
  });

  it('lets a process exit with its own code while the loop runs', () => {
    // isolated-vm crashes a process that exits while one of its threads runs an isolate's code.
    const program = withWatchdog(`
      for (let i = 0; i < 200; i++) {
        const seq = wd.arm(id, 1000);
        run.applySync(undefined, []);
        wd.disarm(seq);
        if (seq) process.exit(70);
        await new Promise((r) => setTimeout(r, 2));
      }
      process.exit(3);
    `);
    for (let round = 0; round < 3; round++) {
      const r = spawnSync(process.execPath, ['--no-node-snapshot', '--input-type=module', '-e', program], { encoding: 'utf8', timeout: 20_000 });
      assert.equal(r.signal, null, `round ${round}: ended by ${r.signal}`);
      assert.equal(r.status, 70, r.stderr);
    }
  });

  it('ends its loop when idle, so a program that used it exits by itself', () => {
    const program = withWatchdog(`
      let watched = 0;
      for (let i = 0; i < 100 && !watched; i++) {
        const seq = wd.arm(id, 1000);
        run.applySync(undefined, []);
        wd.disarm(seq);
        if (seq) watched++;
        else await new Promise((r) => setTimeout(r, 2));
      }
      console.log(watched ? 'watched' : 'never watched');
    `);
    const r = spawnSync(process.execPath, ['--no-node-snapshot', '--input-type=module', '-e', program], { encoding: 'utf8', timeout: 20_000 });
    assert.equal(r.signal, null, 'the program did not exit by itself');
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.stdout.trim(), 'watched');
  });
});

describe('an inline call stopped by the watchdog', () => {
  it('ends the invocation on its limit, keeps the lines it printed, and the next call is served', async (t) => {
    const sb = testSandbox(t, { inProcess: true, limits: { cpu_time: 100, wall_time: 1500 } });
    const hello = fetchScript("return new Response('hi');");
    assert.equal((await call(sb, hello)).text, 'hi');
    const before = callWatchdog().stopped;
    const r = await call(sb, fixture('infinite-loop.js'));
    assert.equal(callWatchdog().stopped, before + 1, 'the watchdog did not stop the loop');
    assert.equal(r.status, 503);
    assert.equal(r.error?.limit, 'cpu_time', r.error?.message);
    assert.equal(r.logs[0]?.message, 'spinning', JSON.stringify(r.logs));
    assert.equal((await call(sb, hello)).text, 'hi');
  });

  it('keeps as much of a long run of lines as its memory holds, in order', async (t) => {
    const sb = testSandbox(t, { inProcess: true, limits: { cpu_time: 100, wall_time: 1500, log_lines: 100 } });
    const chatty = fetchScript("for (let i = 0; i < 40; i++) console.log(i + ':' + 'x'.repeat(1000)); for (;;) {}");
    const before = callWatchdog().stopped;
    const r = await call(sb, chatty);
    assert.equal(callWatchdog().stopped, before + 1);
    const lines = r.logs.filter((l) => /^\d+:x/.test(l.message));
    const room = LINE_RING_BYTES / 2;
    assert.ok(lines.length >= 7 && lines.length < 40, `${lines.length} lines kept`);
    lines.forEach((l, i) => assert.ok(l.message.startsWith(`${i}:`), l.message.slice(0, 10)));
    assert.ok(lines.reduce((n, l) => n + l.message.length, 0) < room);
  });
});

describe('the shared line memory', () => {
  it('is out of reach of integration code that redefines what the runtime might read', async (t) => {
    const sb = testSandbox(t, { inProcess: true });
    const probe = fetchScript(`
      const found = [];
      const keep = (v) => { if (v && typeof v === 'object' && Object.prototype.toString.call(v) === '[object SharedArrayBuffer]') found.push(v); };
      const typed = Object.getPrototypeOf(Uint16Array.prototype);
      const bufferOf = Object.getOwnPropertyDescriptor(typed, 'buffer').get;
      for (const name of ['length', 'buffer', 'byteLength', 'byteOffset']) {
        const d = Object.getOwnPropertyDescriptor(typed, name);
        Object.defineProperty(typed, name, { configurable: true, get() { try { keep(bufferOf.call(this)); } catch {} return d.get.call(this); } });
      }
      const min = Math.min;
      Math.min = (...a) => { a.forEach(keep); return min(...a); };
      console.log('a line');
      console.log('another line');
      return Response.json({ found: found.length, global: typeof SharedArrayBuffer });
    `);
    const r = await call(sb, probe);
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(r.json(), { found: 0, global: 'undefined' });
    assert.deepEqual(
      r.logs.map((l) => l.message),
      ['a line', 'another line'],
    );
  });

  it('reads back what the guest wrote, and never more than the memory holds whatever it holds', () => {
    const shared = new SharedArrayBuffer(LINE_RING_BYTES);
    const ring = new Uint16Array(shared, 4);
    let at = 0;
    for (const [level, message] of [
      ['log', 'héllo ☃'],
      ['error', ''],
    ]) {
      ring[at++] = level.length;
      for (const c of level) ring[at++] = c.charCodeAt(0);
      ring[at++] = message.length;
      ring[at++] = 0;
      for (let i = 0; i < message.length; i++) ring[at++] = message.charCodeAt(i);
    }
    new Int32Array(shared, 0, 1)[0] = at;
    assert.deepEqual(lastLines(shared), [
      ['log', 'log', 'héllo ☃'],
      ['log', 'error', ''],
    ]);
    // Whatever a hostile guest leaves there: lengths past the end, negative counts, noise.
    const bytes = new Uint8Array(shared);
    for (let round = 0; round < 200; round++) {
      for (let i = 0; i < bytes.length; i++) bytes[i] = (Math.random() * 256) | 0;
      if (round % 3 === 0) new Int32Array(shared, 0, 1)[0] = -5;
      const lines = lastLines(shared);
      const chars = lines.reduce((n, [, level, message]) => n + level.length + message.length, 0);
      assert.ok(chars <= ring.length, `${chars} characters read from ${ring.length}`);
    }
  });
});
