/**
 * The isolates' side of the sandbox, wherever they run (a serving process: ../in-process.ts; the
 * sandbox worker process: ../worker-main.ts): one pool of instances per integration (the latest script
 * version), each instance serving one invocation at a time, at most `concurrency` per integration;
 * further invocations wait for a free one within their wall-clock budget. A script that fails to
 * load for a reason in its code keeps failing fast until a new version arrives; a load stopped by a
 * limit (start-up time, memory) answers that call with the limit and is tried again, with a pause
 * for a script that keeps overrunning (see load-backoff.ts). Reading what a version exports (check)
 * loads it too: one such load at a time per version, shared by whoever asks meanwhile, under the
 * same pause as the version's pool.
 */
import { describeLimit, failure } from '../limits.ts';
import type { CheckResult, Envelope, FromWorker, GuestScript, InvocationResult, WorkerSettings } from '../types.ts';
import { CallMode, GuestInstance, LoadError } from './instance.ts';
import { guestLibraryId } from '../guest-bundle.ts';
import { Invocation, type RunOutcome } from './invocation.ts';
import { LoadBackoff } from './load-backoff.ts';
import { callWatchdog } from './watchdog.ts';

type InvokeMessage = { name: string; version: string; code?: string; envelope: Envelope; requestId: string };

const IDLE_TTL_MS = 60_000;
// Time past sandbox.cpu_time for the calls an ended invocation left in flight to come back.
const QUIET_MARGIN_MS = 100;

class WaitTimeout extends Error {}

/** One version of one integration's script (integration names hold no `@`). */
const versionKey = (script: Pick<GuestScript, 'name' | 'version'>) => `${script.name}@${script.version}`;

class Pool {
  readonly script: GuestScript;
  private readonly host: SandboxHost;
  private idle: Array<{ inst: GuestInstance; since: number }> = [];
  private busy = 0;
  private waiters: Array<{ resolve(i: GuestInstance): void; reject(e: unknown): void; timer: NodeJS.Timeout }> = [];
  /** A fault in the code of this version: every call is answered with it, nothing is loaded again. */
  private loadError: LoadError | null = null;
  /** Loads stopped by a limit: when the next may start (shared with this version's checks). */
  private readonly backoff: LoadBackoff;
  private retired = false;
  /** Whether this integration's calls run inline (see instance.ts); kept across its instances. */
  private readonly mode: CallMode;

  constructor(script: GuestScript, host: SandboxHost, mode: CallMode) {
    this.script = script;
    this.host = host;
    this.mode = mode;
    this.backoff = host.backoffFor(script);
  }

  /**
   * The instance released last, if one is idle. Inline invocations that answer at once are over
   * before the next message of their batch is handled, so a batch runs on one warm isolate (its
   * heap in the caches) rather than on every isolate of the pool in turn: ~25 % less CPU per
   * invocation under load.
   */
  takeIdle(): GuestInstance | null {
    if (this.loadError) return null;
    const ready = this.idle.pop();
    if (!ready) return null;
    this.busy++;
    return ready.inst;
  }

  async acquire(deadline: number): Promise<GuestInstance> {
    if (this.loadError) throw this.loadError;
    const ready = this.takeIdle();
    if (ready) return ready;
    if (this.busy < this.host.settings.concurrency) {
      const refused = this.backoff.refusal();
      if (refused) throw refused;
      this.busy++;
      return this.create();
    }
    return new Promise((resolve, reject) => {
      const waiter = {
        resolve,
        reject,
        timer: setTimeout(
          () => {
            this.waiters = this.waiters.filter((w) => w !== waiter);
            reject(new WaitTimeout());
          },
          Math.max(1, deadline - Date.now()),
        ),
      };
      this.waiters.push(waiter);
    });
  }

  private async create(): Promise<GuestInstance> {
    try {
      const inst = await GuestInstance.create(this.script, this.host.settings.limits, this.mode);
      this.backoff.loaded();
      return inst;
    } catch (e) {
      this.busy--;
      // A fault in the code itself will not go away by retrying; a breach might (machine load).
      if (e instanceof LoadError && !e.limit) {
        this.loadError = e;
        for (const w of this.waiters.splice(0)) {
          clearTimeout(w.timer);
          w.reject(e);
        }
      } else {
        if (e instanceof LoadError) this.backoff.breached(e);
        this.wake();
      }
      throw e;
    }
  }

  /**
   * An invocation is over: once the calls it left on their way into the isolate are back (see
   * GuestInstance.whenQuiet), reuse its instance, or replace it for whoever waits. Those calls run
   * code of an invocation that has ended, with no watchdog of its own any more: an instance not
   * quiet within the CPU limit (plus a margin for the queue) is disposed.
   */
  release(inst: GuestInstance, onStuck?: (message: string) => void): void {
    if (inst.quiet) return this.releaseNow(inst);
    const limit = this.host.settings.limits.cpu_time + QUIET_MARGIN_MS;
    const timer = setTimeout(() => {
      inst.dispose('busy after its invocation');
      onStuck?.(
        `the integration's code was still running ${limit} ms after its invocation ended (code left behind by the response, not in waitUntil); its isolate was disposed`,
      );
    }, limit);
    inst.whenQuiet(() => {
      clearTimeout(timer);
      this.releaseNow(inst);
    });
  }

  private releaseNow(inst: GuestInstance): void {
    if (this.retired || inst.disposed) {
      inst.dispose('retired');
      this.busy--;
      this.wake();
      return;
    }
    const next = this.waiters.shift();
    if (next) {
      clearTimeout(next.timer);
      next.resolve(inst);
      return;
    }
    this.busy--;
    this.idle.push({ inst, since: Date.now() });
  }

  private wake(): void {
    if (this.retired || this.loadError) return;
    while (this.waiters.length && this.busy < this.host.settings.concurrency) {
      const w = this.waiters.shift()!;
      clearTimeout(w.timer);
      // No load now: answered with the limit, as a call that came now would be.
      const refused = this.backoff.refusal();
      if (refused) {
        w.reject(refused);
        continue;
      }
      this.busy++;
      this.create().then(w.resolve, w.reject);
    }
  }

  /** Dispose idle instances unused for a while, keeping one warm. */
  sweep(now: number): void {
    const keep = this.idle.slice(-1);
    for (const x of this.idle.slice(0, -1)) {
      if (now - x.since > IDLE_TTL_MS) x.inst.dispose('idle');
      else keep.unshift(x);
    }
    this.idle = keep;
  }

  /** The call mode, handed on to the next version of the script (a new version is no reason to trust it inline again). */
  get callMode(): CallMode {
    return this.mode;
  }

  retire(): void {
    this.retired = true;
    for (const x of this.idle.splice(0)) x.inst.dispose('retired');
    for (const w of this.waiters.splice(0)) {
      clearTimeout(w.timer);
      w.reject(new LoadError(`integration ${this.script.name} was unloaded`));
    }
  }
}

export class SandboxHost {
  settings: WorkerSettings;
  /** Called as an invocation's guest code is about to run (its isolate ready): the crash record's "who ran last". */
  onDispatch?: (name: string) => void;
  private readonly send: (msg: FromWorker) => void;
  private readonly pools = new Map<string, Pool>();
  /** Per script version: loads stopped by a limit, shared by its pool and its checks (see backoffFor). */
  private readonly backoffs = new Map<string, LoadBackoff>();
  /** Per script version: the check under way, which whoever asks meanwhile shares. */
  private readonly checks = new Map<string, Promise<CheckResult>>();
  private readonly sweeper: NodeJS.Timeout;

  constructor(settings: WorkerSettings, send: (msg: FromWorker) => void) {
    this.settings = settings;
    this.send = send;
    this.sweeper = setInterval(() => {
      const now = Date.now();
      for (const p of this.pools.values()) p.sweep(now);
    }, 15_000);
    this.sweeper.unref();
  }

  /** The pool for this version; `null` when the code is needed and was not sent. */
  private poolFor(name: string, version: string, code: string | undefined): Pool | null {
    const current = this.pools.get(name);
    if (current && current.script.version === version) return current;
    if (code === undefined) return null;
    if (current) this.retire(current);
    const pool = new Pool({ name, version, code }, this, current?.callMode ?? new CallMode());
    this.pools.set(name, pool);
    return pool;
  }

  /**
   * Run one invocation: synchronously when an instance is idle and the handler answers at once
   * (see Pool.takeIdle), otherwise through a promise.
   */
  invoke(msg: InvokeMessage): InvocationResult | 'need-code' | Promise<InvocationResult | 'need-code'> {
    const started = performance.now();
    const limits = this.settings.limits;
    const pool = this.poolFor(msg.name, msg.version, msg.code);
    if (!pool) return 'need-code';
    const bodySize = msg.envelope.fetchBody?.byteLength ?? 0;
    if (bodySize > limits.request_body) {
      return failure({ kind: 'limit', limit: 'request_body', message: describeLimit('request_body', limits, bodySize) }, { durationMs: 0, status: 413 });
    }
    const ready = pool.takeIdle();
    if (ready) return this.runOn(pool, ready, msg, started);
    return pool.acquire(Date.now() + limits.wall_time).then(
      (inst) => this.runOn(pool, inst, msg, started),
      (e) => {
        const durationMs = performance.now() - started;
        if (e instanceof WaitTimeout) {
          return failure(
            {
              kind: 'limit',
              limit: 'wall_time',
              message: `${describeLimit('wall_time', limits)} (all ${this.settings.concurrency} isolates of this integration stayed busy)`,
            },
            { durationMs },
          );
        }
        const le = e as LoadError;
        if (le.limit) return failure({ kind: 'limit', limit: le.limit, message: le.message }, { durationMs });
        return failure({ kind: 'load', message: le.message, stack: le.stack }, { durationMs });
      },
    );
  }

  private runOn(pool: Pool, inst: GuestInstance, msg: InvokeMessage, started: number): InvocationResult | Promise<InvocationResult> {
    const invocation = new Invocation(inst, msg.envelope, this.settings, (line) =>
      this.send({ t: 'log', integration: msg.name, requestId: msg.requestId, line }),
    );
    const finished = (outcome: RunOutcome): InvocationResult => {
      // Over already: the instance is free for the next message of the batch.
      const onStuck = (message: string) => invocation.lateLine('error', message);
      if (outcome.over) pool.release(inst, onStuck);
      else outcome.done.then(() => pool.release(inst, onStuck));
      return { ...outcome.result, durationMs: performance.now() - started };
    };
    this.onDispatch?.(msg.name);
    const outcome = invocation.run();
    return outcome instanceof Promise ? outcome.then(finished) : finished(outcome);
  }

  /**
   * The back-off of this script version's loads (created on first use): its pool and its checks
   * share it, so a version that keeps overrunning a limit costs no load during a pause, whoever asks.
   */
  backoffFor(script: GuestScript): LoadBackoff {
    const key = versionKey(script);
    let backoff = this.backoffs.get(key);
    if (!backoff) this.backoffs.set(key, (backoff = new LoadBackoff()));
    return backoff;
  }

  /**
   * What a script exports, read by loading it in an isolate of its own. One check per version at a
   * time: callers that ask while it runs (every handler run of a version not read yet) share its
   * answer. A load stopped by a limit counts in the version's back-off; during its pause the answer
   * is that limit, at once.
   */
  check(script: GuestScript): Promise<CheckResult> {
    const key = versionKey(script);
    const running = this.checks.get(key);
    if (running) return running;
    const checking = this.load(script).finally(() => {
      this.checks.delete(key);
      // Kept while it pauses, or while a pool of this version holds it.
      if (this.backoffs.get(key)?.clear && this.pools.get(script.name)?.script.version !== script.version) this.backoffs.delete(key);
    });
    this.checks.set(key, checking);
    return checking;
  }

  private async load(script: GuestScript): Promise<CheckResult> {
    const backoff = this.backoffFor(script);
    const refused = backoff.refusal();
    if (refused) return { ok: false, error: refused.message, limit: refused.limit };
    let inst: GuestInstance | undefined;
    try {
      inst = await GuestInstance.create(script, this.settings.limits);
      backoff.loaded();
      const exp = (await inst.describe()) as unknown as Partial<Record<string, unknown>> | undefined;
      // From the guest library, next to untrusted code: keep only well-formed names.
      const names = (v: unknown) => (Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : []);
      const unsupported = (Array.isArray(exp?.unsupported) ? exp.unsupported : [])
        .filter((u): u is { handler: string; reason: string } => typeof u?.handler === 'string' && typeof u?.reason === 'string')
        .map((u) => ({ handler: u.handler, reason: u.reason }));
      return {
        ok: true,
        exports: { fetch: exp?.fetch === true, components: names(exp?.components), events: names(exp?.events), ...(unsupported.length ? { unsupported } : {}) },
        library: await guestLibraryId(),
      };
    } catch (e) {
      const limit = e instanceof LoadError ? e.limit : undefined;
      if (limit) backoff.breached(e as LoadError);
      return { ok: false, error: e instanceof Error ? e.message : String(e), ...(limit ? { limit } : {}) };
    } finally {
      inst?.dispose('checked');
    }
  }

  unload(name: string): void {
    const pool = this.pools.get(name);
    if (pool) this.retire(pool);
    this.pools.delete(name);
    // Back-offs of versions only ever checked go with the integration too.
    for (const key of this.backoffs.keys()) if (key.startsWith(`${name}@`) && !this.checks.has(key)) this.backoffs.delete(key);
  }

  private retire(pool: Pool): void {
    pool.retire();
    const key = versionKey(pool.script);
    if (!this.checks.has(key)) this.backoffs.delete(key);
  }

  close(): void {
    clearInterval(this.sweeper);
    for (const name of [...this.pools.keys()]) this.unload(name);
    callWatchdog().rest();
  }
}
