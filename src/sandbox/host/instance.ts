/**
 * One isolate running one integration script: created with the memory limit, the guest library
 * evaluated, the host bridge installed, the script compiled as an ES module with its runtime
 * imports resolved, its top level run under sandbox.startup_time. An instance serves one
 * invocation at a time (so the isolate's CPU time is that invocation's CPU time) and is disposed
 * after any breach.
 *
 * Isolation rules kept here: the guest only ever receives copies and plain functions (Callbacks);
 * every Reference stays on this side.
 *
 * Calls into the guest run one of two ways. Inline: synchronously on this thread (no thread hops:
 * the fast path, several times cheaper per call), each call allowed what the invocation has left,
 * kept by the process's watchdog (watchdog.ts; isolated-vm's time-out when the watchdog cannot),
 * and since all guest code runs inside such calls (microtasks included) that deadline bounds it.
 * On isolated-vm's threads: asynchronously, with the host's CPU watchdog. An
 * inline call blocks every other integration in this process while it runs, so an integration
 * whose calls run longer than SLOW_CALL_MS, beyond a small allowance (see CallMode), is moved off
 * the inline path for a while: the slow calls of a hostile or heavy script stall the others for at
 * most STALL_BURST_MS plus one call (about twice its CPU limit at most, see Invocation.budget), and a
 * call that runs out of time moves it off at once.
 */
import { RUNTIME_EXPORTS } from '../guest/runtime/names.ts';
import ivm from 'isolated-vm';
import { guestBundle, type GuestBundle } from '../guest-bundle.ts';
import { LINE_RING_BYTES, lastLines } from './last-lines.ts';
import { callWatchdog } from './watchdog.ts';
import { describeLimit } from '../limits.ts';
import { scriptFileName, type GuestScript, type Limits, type ScriptExports } from '../types.ts';

/** The copy option of every call into a guest (one object, not two per call). */
const COPY = Object.freeze({ copy: true as const });
/** The options of an inline call the watchdog keeps the time of (no time-out of isolated-vm's own). */
const WATCHED = Object.freeze({ arguments: COPY, result: COPY });

/** The host functions an instance routes guest calls to (the current invocation's). */
export interface InstanceHooks {
  /** Whether this invocation's calls run inline (fixed for the whole invocation). */
  readonly inline: boolean;
  /** Time-out of the next call into the guest, in ms (what the invocation has left). */
  budget(): number;
  /** An inline call used this much CPU time of the host's thread (ms); `failed` when it did not return. */
  charge?(ms: number, failed: boolean): void;
  start(op: string, id: number, arg: unknown): void;
  cancel(id: number): void;
  log(level: string, message: string): void;
  /** The isolate died (V8's memory limit, or an outbox that could not be read) or a call ran out of its time-out. */
  died(why: Death, message: string): void;
  /** A dispatch or drain finished (see guest/bridge.ts respond). */
  respond(kind: 'dispatch' | 'drain', seq: number, value: unknown): void;
  /** A promise rejection nobody handled, reported by isolated-vm at the end of a call. */
  unhandled(message: string): void;
  /** The environment of invocation `seq`, when its code first reads it (throws for any other invocation). */
  environment(seq: number): unknown;
}

/**
 * Why a call into the guest ended the invocation, read from the isolate's state and the call's clock,
 * never from the error's text (the guest writes that: a script can throw "memory limit" or "timed
 * out" itself): `memory` when V8 disposed the isolate (its memory limit; our own disposals are known
 * by disposedFor), `timed-out` when the call failed after running its whole time-out, `broken` when
 * what the guest posted could not be understood.
 */
export type Death = 'memory' | 'timed-out' | 'broken';

/**
 * Whether a call into the guest that failed after `elapsed` ms ran out of its time-out of `timeout`
 * ms (isolated-vm stops it no sooner; the 1 ms is room for the two clocks' rounding).
 */
function ranOut(elapsed: number, timeout: number): boolean {
  return elapsed >= timeout - 1;
}

/** An inline call that ran longer than this stalls the other integrations of the process... */
export const SLOW_CALL_MS = 10;
/**
 * ...which an integration may do for this long in all (its allowance, refilled at STALL_REFILL ms
 * per ms of the clock) before it is moved off the inline path. The allowance is there for the
 * guest's own garbage collector: a mark-compact of its heap every ten thousand or so calls can
 * push one ordinary call past SLOW_CALL_MS, and that alone was moving well-behaved integrations
 * off for five minutes at a time.
 */
export const STALL_BURST_MS = 30;
const STALL_REFILL = 0.01;
/** ...for this long; then it may run inline again. */
const OFF_INLINE_MS = 5 * 60_000;

/** Whether an integration's calls run inline; shared by the instances of one pool. */
export class CallMode {
  private offUntil = 0;
  private allowance = STALL_BURST_MS;
  private allowanceAt: number;
  private readonly now: () => number;
  constructor(now: () => number = () => performance.now()) {
    this.now = now;
    this.allowanceAt = now();
  }
  inline(): boolean {
    if (this.offUntil === 0) return true;
    if (this.now() < this.offUntil) return false;
    this.offUntil = 0; // its time apart is over
    this.allowance = STALL_BURST_MS;
    return true;
  }
  /**
   * An inline call used `ms` of CPU time (`overran`: it ran out of time, or its isolate died); true
   * when that moved the integration off. A slow call that overran moves it off at once: that is no
   * accident of the collector.
   */
  charge(ms: number, overran = false): boolean {
    if (ms <= SLOW_CALL_MS) return false;
    if (overran) {
      this.moveOff();
      return true;
    }
    const now = this.now();
    this.allowance = Math.min(STALL_BURST_MS, this.allowance + (now - this.allowanceAt) * STALL_REFILL) - ms;
    this.allowanceAt = now;
    if (this.allowance >= 0) return false;
    this.moveOff();
    return true;
  }
  moveOff(): void {
    this.offUntil = this.now() + OFF_INLINE_MS;
  }
}

export class LoadError extends Error {
  /** A limit breach while loading (startup_time, memory) rather than a fault in the script. */
  readonly limit?: 'startup_time' | 'memory_mb' | 'script_size';
  constructor(message: string, opts: { limit?: LoadError['limit']; stack?: string } = {}) {
    super(message);
    this.name = 'LoadError';
    this.limit = opts.limit;
    if (opts.stack) this.stack = opts.stack;
  }
}

const RUNTIME_MODULE = `const r = globalThis[Symbol.for('switchyard.runtime')];
export const { ${RUNTIME_EXPORTS.join(', ')} } = r;
export default r;`;
const JSX_MODULE = `const r = globalThis[Symbol.for('switchyard.runtime')];
export const jsx = r.jsx, jsxs = r.jsxs, jsxDEV = r.jsxDEV, Fragment = r.Fragment;`;
const allowedImports = ['@switchyard/runtime', '@switchyard/runtime/jsx-runtime', '@switchyard/runtime/jsx-dev-runtime'];

// V8 code cache of the guest library, produced in this process from our own bundle (never from
// integration code) and only ever handed to compileScript: halves an isolate's start-up.
let coreCache: ivm.ExternalCopy<ArrayBuffer> | undefined;
const useCodeCache = process.env.SWITCHYARD_SANDBOX_CODE_CACHE !== '0';

const random = (n: unknown) => {
  const size = Math.min(Math.max(0, Math.trunc(Number(n)) || 0), 65536);
  return new Uint8Array(globalThis.crypto.getRandomValues(new Uint8Array(size)));
};

/** A guest error's stack without the host frames isolated-vm appends after its boundary marker. */
export function guestStack(stack: string | undefined): string | undefined {
  if (typeof stack !== 'string') return undefined;
  const i = stack.indexOf('(<isolated-vm boundary>)');
  return i < 0 ? stack : stack.slice(0, stack.lastIndexOf('\n', i)).trimEnd();
}

/** Whether a load's start-up time (its deadline on performance.now()) has run out. */
function pastDeadline(deadline: number): boolean {
  return performance.now() >= deadline - 1;
}

function errorMessage(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

/** The steps of a load, in order (see GuestInstance.load). */
export type LoadStep = 'context' | 'library' | 'compile' | 'evaluate' | 'warm';

/**
 * For tests only: awaited at the start of each step of a load, with the start-up time running.
 * A test holds a step until the start-up timer has disposed the isolate (`disposed()`), as a busy
 * machine can slow any step past sandbox.startup_time. Unset, a step costs a property read.
 */
export const loadSeam: { at?: (step: LoadStep, script: GuestScript, disposed: () => boolean) => Promise<void> } = {};

let catastropheListener: ((integration: string) => void) | undefined;

/** Called with the integration's name just before a catastrophic isolate error ends this process. */
export function onCatastrophe(fn: (integration: string) => void): void {
  catastropheListener = fn;
}

export class GuestInstance {
  readonly name: string;
  readonly version: string;
  readonly isolate: ivm.Isolate;
  private context!: ivm.Context;
  private fns!: { complete: ivm.Reference; dispatch: ivm.Reference; drain: ivm.Reference; describe: ivm.Reference; warm: ivm.Reference; take: ivm.Reference };
  readonly mode: CallMode;
  // Inline calls that a call's outcome starts (a completion of a synchronous op) wait here and run
  // after it, instead of recursing.
  private readonly inlineQueue: Array<() => void> = [];
  private inlineRunning = false;
  /** Calls made into this isolate, numbering them (see guest/bridge.ts takeOutbox). */
  private calls = 0;
  /** Calls on isolated-vm's threads not yet back, and who waits for there to be none (see whenQuiet). */
  private inFlight = 0;
  private quietWaiters: Array<() => void> = [];
  /** Where guest calls go; replaced for every invocation. */
  hooks: InstanceHooks | null = null;
  /** Console lines printed by top-level code, handed to the first invocation's logs. */
  startupLogs: Array<{ level: string; message: string; time: number }> = [];
  /** Set when the instance was disposed on purpose (a breach); read by whoever awaited a call. */
  disposedFor: string | null = null;
  /** The current inline call's console lines, shared with the guest (see last-lines.ts). */
  private readonly lines = new SharedArrayBuffer(LINE_RING_BYTES);
  /** This isolate's number with the process's watchdog (see watchdog.ts). */
  private readonly watchId: number;

  private constructor(script: GuestScript, limits: Limits, mode: CallMode) {
    this.mode = mode;
    this.name = script.name;
    this.version = script.version;
    this.isolate = new ivm.Isolate({
      memoryLimit: limits.memory_mb,
      onCatastrophicError: (message) => {
        // V8 lost control of an isolate: this process cannot be trusted any more. The server's side
        // (worker-process.ts) answers the pending invocations and starts a fresh worker (in a serving
        // process: the process supervisor replaces the process).
        process.stderr.write(`sandbox: catastrophic isolate error in integration ${script.name} (${message}); exiting\n`);
        catastropheListener?.(script.name);
        process.exit(70);
      },
    });
    this.watchId = callWatchdog().enlist(this.isolate);
  }

  /** Create and load. Throws LoadError when the script cannot be loaded (message says why and where). */
  static async create(script: GuestScript, limits: Limits, mode = new CallMode()): Promise<GuestInstance> {
    const size = Buffer.byteLength(script.code);
    if (size > limits.script_size) throw new LoadError(describeLimit('script_size', limits, size), { limit: 'script_size' });
    const bundle = await guestBundle();
    const inst = new GuestInstance(script, limits, mode);
    const deadline = performance.now() + limits.startup_time;
    // The start-up timer ends the load itself rather than leave it to the step it lands in: once the
    // isolate is disposed, a step fails with "Isolate is disposed" (a compile would then read as a
    // fault in the script, kept for good) or never settles (a call into a disposed isolate is not made).
    let timer: NodeJS.Timeout | undefined;
    const overdue = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        reject(new LoadError(describeLimit('startup_time', limits), { limit: 'startup_time' }));
        inst.dispose('startup_time');
      }, limits.startup_time);
    });
    const loading = inst.load(script, bundle, deadline);
    loading.catch(() => {}); // past the start-up time its outcome is no news
    try {
      await Promise.race([loading, overdue]);
      return inst;
    } catch (e) {
      // A limit by the isolate's state and the clock, whatever the step reported (the script can
      // throw any text): disposed by us (start-up time) or by V8 (memory), or a step that ran out
      // of the start-up time it was given.
      const reason = inst.disposedFor ?? (inst.isolate.isDisposed ? 'memory_mb' : pastDeadline(deadline) ? 'startup_time' : null);
      inst.dispose('load failed');
      if (reason === 'startup_time') throw new LoadError(describeLimit('startup_time', limits), { limit: 'startup_time' });
      if (reason === 'memory_mb') throw new LoadError(describeLimit('memory_mb', limits), { limit: 'memory_mb' });
      if (e instanceof LoadError) throw e;
      throw new LoadError(`the script failed while loading: ${errorMessage(e)}`, { stack: guestStack((e as Error)?.stack) });
    } finally {
      clearTimeout(timer);
    }
  }

  private async load(script: GuestScript, bundle: GuestBundle, deadline: number): Promise<void> {
    const remaining = () => Math.max(1, Math.ceil(deadline - performance.now()));
    const isolate = this.isolate;
    const step = (name: LoadStep) => loadSeam.at?.(name, script, () => isolate.isDisposed);
    await step('context');
    this.context = await isolate.createContext();
    const core: ivm.Script & ivm.CachedDataResult = await isolate.compileScript(bundle.core, {
      filename: 'switchyard:guest',
      ...(useCodeCache ? (coreCache ? { cachedData: coreCache } : { produceCachedData: true }) : {}),
    });
    if (useCodeCache && !coreCache && core.cachedData) coreCache = core.cachedData;
    await core.run(this.context, { timeout: remaining() });
    core.release();

    await step('library');
    const boot = (await this.context.global.get('__switchyardBoot', { reference: true })) as ivm.Reference;
    await this.context.global.delete('__switchyardBoot');
    const callbacks = [
      new ivm.Callback(
        (level: string, message: string) => {
          if (this.hooks) this.hooks.log(String(level), String(message));
          else if (this.startupLogs.length < 64) this.startupLogs.push({ level: String(level), message: String(message).slice(0, 16_384), time: Date.now() });
        },
        { ignored: true },
      ),
      new ivm.Callback((name: string) => {
        const src = bundle.extras[String(name)];
        if (typeof src !== 'string') throw new Error(`unknown library part ${String(name)}`);
        return src;
      }),
      new ivm.Callback(random),
      // Copied in on first read, and only for the invocation running now (see Invocation.environment).
      new ivm.Callback((seq: number) => {
        if (!this.hooks) throw new Error('the environment is only available while handling a request');
        return this.hooks.environment(Number(seq));
      }),
      new ivm.ExternalCopy(this.lines).copyInto({ release: true }),
    ];
    const api = (await boot.apply(undefined, callbacks, { result: { reference: true }, timeout: remaining() })) as ivm.Reference;
    boot.release();
    const get = (k: string) => api.get(k, { reference: true }) as Promise<ivm.Reference>;
    const [complete, dispatch, drain, describe, register, warm, take] = await Promise.all([
      get('complete'),
      get('dispatch'),
      get('drain'),
      get('describe'),
      get('register'),
      get('warm'),
      get('take'),
    ]);
    this.fns = { complete, dispatch, drain, describe, warm, take };
    api.release();

    const compile = (code: string, filename: string) => isolate.compileModule(code, { filename });
    const runtimeModule = await compile(RUNTIME_MODULE, 'switchyard:runtime');
    const jsxModule = await compile(JSX_MODULE, 'switchyard:runtime/jsx-runtime');
    let main: ivm.Module;
    await step('compile');
    try {
      main = await compile(script.code, scriptFileName(script));
    } catch (e) {
      throw new LoadError(`the script does not compile: ${errorMessage(e)}`, { stack: guestStack((e as Error)?.stack) });
    }
    const bad = main.dependencySpecifiers.filter((s) => !allowedImports.includes(s));
    if (bad.length) {
      throw new LoadError(
        `the script imports ${bad.map((b) => `"${b}"`).join(', ')}; only '@switchyard/runtime' and '@switchyard/runtime/jsx-runtime' can be imported (bundle any other dependency into the script; Node built-ins are not available)`,
      );
    }
    await main.instantiate(this.context, (spec) => (spec === '@switchyard/runtime' ? runtimeModule : jsxModule));
    await step('evaluate');
    try {
      await main.evaluate({ timeout: remaining() });
    } catch (e) {
      if (this.disposedFor || isolate.isDisposed || pastDeadline(deadline)) throw e; // a limit (see create)
      throw new LoadError(`the script threw while loading: ${errorMessage(e)}`, { stack: guestStack((e as Error)?.stack) });
    }
    try {
      await register.apply(undefined, [main.namespace.derefInto()], { timeout: remaining() });
    } catch (e) {
      if (this.disposedFor || isolate.isDisposed) throw e;
      throw new LoadError(errorMessage(e));
    } finally {
      register.release();
    }
    // Operations the top level started (a timer, a fetch) are refused: there is no request yet.
    this.deliver(await take.apply(undefined, [0], { result: { copy: true }, timeout: remaining() }), false);
    await step('warm');
    await this.warm(remaining());
  }

  /** Run the guest library's hot path once (see guest warm()); its answer comes as dispatch #0. */
  private async warm(timeoutMs: number): Promise<void> {
    await new Promise<void>((resolve, reject) => {
      this.hooks = {
        inline: false,
        budget: () => timeoutMs,
        start: (_op, id) => this.refuseOutside(id),
        cancel() {},
        log() {},
        died: (_why, m) => reject(new Error(m)),
        unhandled() {},
        respond: (_kind, seq) => seq === 0 && resolve(),
        environment() {
          throw new Error('the environment is only available while handling a request');
        },
      };
      this.call(this.fns.warm, []);
    }).finally(() => {
      this.hooks = null;
    });
  }

  /** Ops started outside an invocation (from top-level code) fail at once. */
  private refuseOutside(id: number): void {
    this.call(this.fns.complete, [
      id,
      false,
      { name: 'TypeError', message: 'fetch, timers and other I/O are only available while handling a request, not at the top level of a script' },
    ]);
  }

  /**
   * Run a call into the guest under the invocation's time-out, inline or on isolated-vm's threads
   * (see the top of this file), and hand what the guest posted (its outbox) to the hooks. A call
   * that fails because a promise rejection was left unhandled is reported as such (the guest
   * carries on); a time-out, or the isolate dying (memory), ends the invocation.
   */
  private call(fn: ivm.Reference, args: unknown[]): void {
    if (this.isolate.isDisposed) return;
    const n = ++this.calls;
    const inline = this.hooks?.inline ?? false;
    if (!inline) {
      const timeout = Math.max(1, Math.ceil(this.hooks?.budget() ?? 1000));
      const started = performance.now();
      this.inFlight++;
      fn.apply(undefined, [...args, n, false], { arguments: COPY, result: COPY, timeout })
        .then(
          (box) => this.deliver(box, false),
          (e: Error) => this.failed(e, this.failureOf(started, timeout), false, n),
        )
        .finally(() => this.landed());
      return;
    }
    this.inlineQueue.push(() => this.callInline(fn, args, n));
    if (this.inlineRunning) return;
    this.inlineRunning = true;
    try {
      while (this.inlineQueue.length) {
        try {
          this.inlineQueue.shift()!();
        } catch (e) {
          // A host fault while handling a call's outcome: this instance cannot be trusted to be in step.
          this.inlineQueue.length = 0;
          this.broken(e);
        }
      }
    } finally {
      this.inlineRunning = false;
    }
  }

  private callInline(fn: ivm.Reference, args: unknown[], n: number): void {
    if (this.isolate.isDisposed || !this.hooks) return;
    const hooks = this.hooks;
    const timeout = Math.max(1, Math.ceil(hooks.budget()));
    const cpu0 = process.threadCpuUsage();
    const started = performance.now();
    // The watchdog keeps the call's time; when it cannot, isolated-vm's own time-out does.
    const watchdog = callWatchdog();
    const watched = watchdog.arm(this.watchId, timeout);
    let box: unknown;
    let error: unknown;
    let threw = false;
    try {
      box = fn.applySync(undefined, [...args, n, true], watched ? WATCHED : { arguments: COPY, result: COPY, timeout });
    } catch (e) {
      error = e;
      threw = true;
    }
    // Stopped by the watchdog: past its time, even if it came back meanwhile (its isolate is gone).
    if (watchdog.disarm(watched)) {
      this.charged(hooks, cpu0, true, true);
      this.failed(threw ? (error as Error) : new Error('the call ran out of time'), 'timed-out', true, n);
      return;
    }
    if (threw) {
      // A rejection left unhandled also fails the call; only running out of time (or the isolate
      // dying) counts as an overrun for the call mode.
      const failure = this.failureOf(started, timeout);
      this.charged(hooks, cpu0, true, failure !== 'unhandled');
      this.failed(error as Error, failure, true, n);
      return;
    }
    this.charged(hooks, cpu0, false, false);
    this.deliver(box, false);
  }

  /**
   * What an inline call used of this thread's CPU time (preemption does not count) goes to the
   * invocation, and to the integration's stall allowance (see CallMode).
   */
  private charged(hooks: InstanceHooks, cpu0: NodeJS.CpuUsage, failed: boolean, overran: boolean): void {
    const used = process.threadCpuUsage(cpu0);
    const ms = (used.user + used.system) / 1000;
    this.mode.charge(ms, overran);
    hooks.charge?.(ms, failed);
  }

  /**
   * Why a call into the guest that started at `started` failed: the isolate died, the call ran out
   * of its time-out, or else a rejection was left unhandled (see Death: never by the error's text).
   */
  private failureOf(started: number, timeout: number): 'died' | 'timed-out' | 'unhandled' {
    if (this.isolate.isDisposed) return 'died';
    return ranOut(performance.now() - started, timeout) ? 'timed-out' : 'unhandled';
  }

  private failed(e: Error, failure: 'died' | 'timed-out' | 'unhandled', inline: boolean, n: number): void {
    if (this.disposedFor) return; // our own breach: the invocation already knows
    const message = String(e?.message ?? e);
    if (failure === 'died') {
      // Not disposed by us (disposedFor): V8 did, at its memory limit.
      this.hooks?.died('memory', message);
      return;
    }
    // The call's outbox was lost with its return value; what it holds is still in the guest. After
    // a time-out only its console lines are wanted (the invocation is over: no op starts); after an
    // unhandled rejection, everything (an answer of sloppy code among it).
    const timedOut = failure === 'timed-out';
    const after = () => {
      if (timedOut) this.hooks?.died('timed-out', message);
      else this.hooks?.unhandled(guestStack(e?.stack) ?? message);
    };
    const opts = { arguments: { copy: true as const }, result: { copy: true as const }, timeout: 100 };
    if (inline) {
      let box: unknown;
      try {
        box = this.fns.take.applySync(undefined, [n], opts);
      } catch {
        // Disposed (the watchdog stops a call so): what is left are the lines it shared as it went.
        if (timedOut) box = lastLines(this.lines);
      }
      this.deliver(box, timedOut);
      after();
    } else {
      this.inFlight++;
      this.fns.take
        .apply(undefined, [n], opts)
        .then(
          (box) => this.deliver(box, timedOut),
          () => {},
        )
        .then(after)
        .finally(() => this.landed());
    }
  }

  /**
   * Route what the guest posted during a call (see guest/bridge.ts OutboxEntry). It comes from code
   * next to untrusted code: every field is checked for its type, and anything malformed ends the
   * invocation and the instance rather than reaching the host's logic.
   */
  private deliver(box: unknown, logsOnly: boolean): void {
    if (!Array.isArray(box)) return;
    try {
      for (const entry of box as unknown[]) {
        if (!Array.isArray(entry)) throw new TypeError('an outbox entry is not an array');
        const hooks = this.hooks;
        const [kind, a, b, c] = entry as unknown[];
        if (kind === 'log') {
          if (typeof a !== 'string' || typeof b !== 'string') throw new TypeError('malformed console line');
          hooks?.log(a, b);
          continue;
        }
        if (logsOnly) continue;
        if (kind === 'op') {
          if (typeof a !== 'string' || typeof b !== 'number') throw new TypeError('malformed operation');
          if (hooks) hooks.start(a, b, c);
          else this.refuseOutside(b);
        } else if (kind === 'cancel') {
          if (typeof a !== 'number') throw new TypeError('malformed cancellation');
          hooks?.cancel(a);
        } else if (kind === 'answer') {
          if ((a !== 'dispatch' && a !== 'drain') || typeof b !== 'number') throw new TypeError('malformed answer');
          hooks?.respond(a, b, c);
        } else throw new TypeError('unknown outbox entry');
      }
    } catch (e) {
      this.broken(e);
    }
  }

  /** What the guest posted could not be understood: end the invocation and the instance. */
  private broken(e: unknown): void {
    const hooks = this.hooks;
    this.dispose('malformed outbox');
    hooks?.died('broken', `malformed outbox: ${(e as Error)?.message ?? String(e)}`);
  }

  /**
   * Run `then` once no call made on isolated-vm's threads is still on its way (at once when none
   * is: always so inline). Off the inline path an invocation can answer while completions of its
   * operations are already queued for the isolate; the code they run, after the answer, must meet
   * that invocation's hooks (which ignore it), not the next invocation's: its console lines, its
   * operations and its CPU time would otherwise land in another invocation, perhaps of another
   * installation.
   */
  whenQuiet(then: () => void): void {
    if (this.inFlight === 0) then();
    else this.quietWaiters.push(then);
  }

  get quiet(): boolean {
    return this.inFlight === 0;
  }

  private landed(): void {
    if (--this.inFlight > 0) return;
    for (const then of this.quietWaiters.splice(0)) then();
  }

  /** Hand an operation's outcome to the guest (runs its continuation). */
  complete(id: number, ok: boolean, value: unknown): void {
    this.call(this.fns.complete, [id, ok, value]);
  }

  /** Start an invocation; its answer arrives through hooks.respond('dispatch', seq, out). */
  dispatch(seq: number, input: unknown): void {
    this.call(this.fns.dispatch, [seq, input]);
  }

  /** Wait for waitUntil work; the count arrives through hooks.respond('drain', seq, n). */
  drain(seq: number): void {
    this.call(this.fns.drain, [seq]);
  }

  async describe(): Promise<ScriptExports> {
    return (await this.fns.describe.apply(undefined, [], { result: { copy: true }, timeout: 1000 })) as ScriptExports;
  }

  /** CPU time the isolate has used, in ms. */
  cpuMs(): number {
    return this.isolate.isDisposed ? 0 : Number(this.isolate.cpuTime) / 1e6;
  }

  get disposed(): boolean {
    return this.isolate.isDisposed;
  }

  dispose(reason: string): void {
    this.disposedFor ??= reason;
    callWatchdog().forget(this.watchId);
    if (!this.isolate.isDisposed) {
      try {
        this.isolate.dispose();
      } catch {
        // already gone
      }
    }
  }
}
