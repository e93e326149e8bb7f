/**
 * One isolate running one integration script: created with the memory limit, the guest library
 * evaluated, the host bridge installed, the script compiled as an ES module with its runtime
 * imports resolved, its top level run under sandbox.startup_time. An instance serves one
 * invocation at a time (so the isolate's CPU time is that invocation's CPU time) and is disposed
 * after any breach.
 *
 * Isolation rules kept here: the guest only ever receives copies and plain functions (Callbacks);
 * every Reference stays on this side.
 */
import ivm from 'isolated-vm';
import { guestBundle, type GuestBundle } from '../guest-bundle.ts';
import { describeLimit } from '../limits.ts';
import type { GuestScript, Limits, ScriptExports } from '../types.ts';

/** The host functions an instance routes guest calls to (the current invocation's). */
export interface InstanceHooks {
  start(op: string, id: number, arg: unknown): void;
  cancel(id: number): void;
  log(level: string, message: string): void;
  /** The isolate died or overran while running a continuation. */
  died(message: string): void;
  /** A dispatch or drain finished (see guest/bridge.ts respond). */
  respond(kind: 'dispatch' | 'drain', seq: number, value: unknown): void;
  /** A promise rejection nobody handled, reported by isolated-vm at the end of a call. */
  unhandled(message: string): void;
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
export const createIntegration = r.createIntegration, createComponent = r.createComponent, createOAuthHandler = r.createOAuthHandler,
  defaultExtractCredentials = r.defaultExtractCredentials, refreshCredentials = r.refreshCredentials, OAuthError = r.OAuthError,
  ExposableError = r.ExposableError, APIError = r.APIError;
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

function errorMessage(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

export class GuestInstance {
  readonly name: string;
  readonly version: string;
  readonly isolate: ivm.Isolate;
  private context!: ivm.Context;
  private fns!: { complete: ivm.Reference; dispatch: ivm.Reference; drain: ivm.Reference; describe: ivm.Reference; warm: ivm.Reference };
  /** Where guest calls go; replaced for every invocation. */
  hooks: InstanceHooks | null = null;
  /** Console lines printed by top-level code, handed to the first invocation's logs. */
  startupLogs: Array<{ level: string; message: string; time: number }> = [];
  /** Set when the instance was disposed on purpose (a breach); read by whoever awaited a call. */
  disposedFor: string | null = null;

  private constructor(script: GuestScript, limits: Limits) {
    this.name = script.name;
    this.version = script.version;
    this.isolate = new ivm.Isolate({
      memoryLimit: limits.memory_mb,
      onCatastrophicError: (message) => {
        // V8 lost control of an isolate: this process cannot be trusted any more. The supervisor
        // answers the pending invocations and starts a fresh worker.
        process.stderr.write(`sandbox worker: catastrophic isolate error (${message}); exiting\n`);
        process.exit(70);
      },
    });
  }

  /** Create and load. Throws LoadError when the script cannot be loaded (message says why and where). */
  static async create(script: GuestScript, limits: Limits): Promise<GuestInstance> {
    const size = Buffer.byteLength(script.code);
    if (size > limits.script_size) throw new LoadError(describeLimit('script_size', limits, size), { limit: 'script_size' });
    const bundle = await guestBundle();
    const inst = new GuestInstance(script, limits);
    const deadline = Date.now() + limits.startup_time;
    const timer = setTimeout(() => inst.dispose('startup_time'), limits.startup_time);
    try {
      await inst.load(script, bundle, deadline);
      return inst;
    } catch (e) {
      const reason = inst.disposedFor ?? (inst.isolate.isDisposed ? 'memory_mb' : null);
      inst.dispose('load failed');
      if (e instanceof LoadError) throw e;
      if (reason === 'startup_time') throw new LoadError(describeLimit('startup_time', limits), { limit: 'startup_time' });
      if (reason === 'memory_mb' || /memory limit/i.test(errorMessage(e))) throw new LoadError(describeLimit('memory_mb', limits), { limit: 'memory_mb' });
      if (/timed out/i.test(errorMessage(e))) throw new LoadError(describeLimit('startup_time', limits), { limit: 'startup_time' });
      throw new LoadError(`the script failed while loading: ${errorMessage(e)}`, { stack: guestStack((e as Error)?.stack) });
    } finally {
      clearTimeout(timer);
    }
  }

  private async load(script: GuestScript, bundle: GuestBundle, deadline: number): Promise<void> {
    const remaining = () => Math.max(1, deadline - Date.now());
    const isolate = this.isolate;
    this.context = await isolate.createContext();
    const core: ivm.Script & ivm.CachedDataResult = await isolate.compileScript(bundle.core, {
      filename: 'switchyard:guest',
      ...(useCodeCache ? (coreCache ? { cachedData: coreCache } : { produceCachedData: true }) : {}),
    });
    if (useCodeCache && !coreCache && core.cachedData) coreCache = core.cachedData;
    await core.run(this.context, { timeout: remaining() });
    core.release();

    const boot = (await this.context.global.get('__switchyardBoot', { reference: true })) as ivm.Reference;
    await this.context.global.delete('__switchyardBoot');
    const callbacks = [
      new ivm.Callback(
        (op: string, id: number, arg: unknown) => {
          if (this.hooks) this.hooks.start(String(op), Number(id), arg);
          else this.refuseOutside(Number(id));
        },
        { ignored: true },
      ),
      new ivm.Callback((id: number) => this.hooks?.cancel(Number(id)), { ignored: true }),
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
      new ivm.Callback((kind: 'dispatch' | 'drain', seq: number, value: unknown) => this.hooks?.respond(kind, Number(seq), value), { ignored: true }),
    ];
    const api = (await boot.apply(undefined, callbacks, { result: { reference: true }, timeout: remaining() })) as ivm.Reference;
    boot.release();
    const get = (k: string) => api.get(k, { reference: true }) as Promise<ivm.Reference>;
    const [complete, dispatch, drain, describe, register, warm] = await Promise.all([get('complete'), get('dispatch'), get('drain'), get('describe'), get('register'), get('warm')]);
    this.fns = { complete, dispatch, drain, describe, warm };
    api.release();

    const compile = (code: string, filename: string) => isolate.compileModule(code, { filename });
    const runtimeModule = await compile(RUNTIME_MODULE, 'switchyard:runtime');
    const jsxModule = await compile(JSX_MODULE, 'switchyard:runtime/jsx-runtime');
    let main: ivm.Module;
    try {
      main = await compile(script.code, `integration:${script.name}@${script.version}`);
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
    try {
      await main.evaluate({ timeout: remaining() });
    } catch (e) {
      if (this.disposedFor || isolate.isDisposed) throw e;
      if (/timed out/i.test(errorMessage(e))) throw e;
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
    await this.warm(remaining());
  }

  /** Run the guest library's hot path once (see guest warm()); its answer comes as dispatch #0. */
  private async warm(timeoutMs: number): Promise<void> {
    await new Promise<void>((resolve, reject) => {
      this.hooks = {
        start: (_op, id) => this.refuseOutside(id),
        cancel() {},
        log() {},
        died: (m) => reject(new Error(m)),
        unhandled() {},
        respond: (_kind, seq) => seq === 0 && resolve(),
      };
      this.call(this.fns.warm, [], timeoutMs);
    }).finally(() => {
      this.hooks = null;
    });
  }

  /** Ops started outside an invocation (from top-level code) fail at once. */
  private refuseOutside(id: number): void {
    this.complete(id, false, { name: 'TypeError', message: 'fetch, timers and other I/O are only available while handling a request, not at the top level of a script' }, 1000);
  }

  /**
   * Run a call into the guest under a time-out. A call that fails because a promise rejection was
   * left unhandled is reported as such (the guest carries on); a time-out, or the isolate dying
   * (memory), ends the invocation.
   */
  private call(fn: ivm.Reference, args: unknown[], timeoutMs: number): void {
    if (this.isolate.isDisposed) return;
    fn.apply(undefined, args, { arguments: { copy: true }, timeout: Math.max(1, Math.ceil(timeoutMs)) }).catch((e: Error) => {
      if (this.disposedFor) return; // our own breach: the invocation already knows
      const message = String(e?.message ?? e);
      if (this.isolate.isDisposed || /timed out|disposed|memory limit/i.test(message)) this.hooks?.died(message);
      else this.hooks?.unhandled(guestStack(e?.stack) ?? message);
    });
  }

  /** Hand an operation's outcome to the guest (runs its continuation under a time-out). */
  complete(id: number, ok: boolean, value: unknown, timeoutMs: number): void {
    this.call(this.fns.complete, [id, ok, value], timeoutMs);
  }

  /** Start an invocation; its answer arrives through hooks.respond('dispatch', seq, out). */
  dispatch(seq: number, input: unknown, timeoutMs: number): void {
    this.call(this.fns.dispatch, [seq, input], timeoutMs);
  }

  /** Wait for waitUntil work; the count arrives through hooks.respond('drain', seq, n). */
  drain(seq: number, timeoutMs: number): void {
    this.call(this.fns.drain, [seq], timeoutMs);
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
    if (!this.isolate.isDisposed) {
      try {
        this.isolate.dispose();
      } catch {
        // already gone
      }
    }
  }
}
