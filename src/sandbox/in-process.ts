/**
 * The sandbox run in the serving process itself: the process that takes a request runs its isolate,
 * with no IPC hop (see docs/architecture.md, Processes). Same interface as the worker-process
 * sandbox (worker-process.ts), so the runtime does not know which one it has.
 *
 * What this trades: an isolate that takes V8 down takes this process with it. That is acceptable
 * only under the process supervisor (src/process/), which replaces a dead serving process and parks
 * the integration that keeps killing them; `hooks` tells it who was running. (`serve --processes 1`
 * runs it with no supervisor, giving that up for a debugger or a profiler.)
 */
import { batchPerTurn } from '../lib/batch.ts';
import { failure } from './limits.ts';
import type { Sandbox, SandboxOptions } from './worker-process.ts';
import type { CheckResult, Envelope, FromWorker, GuestScript, InvocationResult, WorkerSettings } from './types.ts';
import { onCatastrophe } from './host/instance.ts';
import { SandboxHost } from './host/host.ts';
import { requireSnapshotOff } from './node-snapshot.ts';

/** What the process supervisor learns from the sandbox (all optional: a lone process has no supervisor). */
export interface SandboxHooks {
  /** An invocation of `name` starts / ends (the crash record: who was running when the process died). */
  started?(name: string, version: string): void;
  ended?(name: string): void;
  /**
   * Its guest code is about to run. An invocation can start well before that (its isolate created
   * and its script loaded on first use, asynchronously), while other invocations start and end.
   */
  dispatching?(name: string): void;
  /** This integration is known to have broken the process, which exits right after. */
  culprit?(name: string): void;
  /** Refuse invocations of a parked integration: the reason, or undefined to run it. */
  parked?(name: string, version: string): string | undefined;
}

export type InProcessOptions = SandboxOptions & { hooks?: SandboxHooks };

// Extra time past an invocation's own limits before it is presumed wedged (as in worker-process.ts).
const WEDGED_GRACE_MS = 5_000;

export function createInProcessSandbox(opts: InProcessOptions): Sandbox {
  requireSnapshotOff();
  const { log, hooks = {} } = opts;
  const origin = () => (typeof opts.serverOrigin === 'function' ? opts.serverOrigin() : opts.serverOrigin);
  const settings = (): WorkerSettings => ({
    limits: opts.limits,
    allowPrivateNetworks: opts.allowPrivateNetworks,
    serverOrigin: origin(),
    concurrency: opts.concurrency ?? 4,
  });
  const onMessage = (msg: FromWorker) => {
    if (msg.t !== 'log') return;
    try {
      opts.onLog?.({ integration: msg.integration, requestId: msg.requestId, line: msg.line });
    } catch (e) {
      log.warn('sandbox onLog listener failed', { error: (e as Error).message });
    }
  };
  const host = new SandboxHost(settings(), onMessage);
  host.onDispatch = (name) => hooks.dispatching?.(name);
  let closed = false;
  let pending = 0;
  onCatastrophe((name) => hooks.culprit?.(name));

  const budget = opts.limits.startup_time + opts.limits.wall_time + WEDGED_GRACE_MS;

  function refreshOrigin(): void {
    const o = origin();
    if (o !== host.settings.serverOrigin) host.settings = { ...host.settings, serverOrigin: o };
  }

  /** One invocation, run now: its result, or a promise of it for one that waits (a fetch, a timer). */
  function run(script: GuestScript, envelope: Envelope, requestId: string): InvocationResult | Promise<InvocationResult> {
    hooks.started?.(script.name, script.version);
    const done = (r: InvocationResult | 'need-code'): InvocationResult => {
      pending--;
      hooks.ended?.(script.name);
      // The code is always at hand here, so the host never asks for it.
      return r === 'need-code' ? failure({ kind: 'load', message: 'the script was not loaded' }, { durationMs: 0 }) : r;
    };
    let outcome: ReturnType<SandboxHost['invoke']>;
    try {
      outcome = host.invoke({ name: script.name, version: script.version, code: script.code, envelope, requestId });
    } catch (e) {
      done('need-code');
      throw e;
    }
    if (!(outcome instanceof Promise)) return done(outcome);
    // The isolate's own watchdog failed if nothing came back well past every limit: this process
    // can no longer be trusted to run guests. Name the integration and let the supervisor replace
    // the process.
    const timer = setTimeout(() => {
      if (!hooks.culprit) {
        log.error('an invocation did not end well past its limits (one-process mode: the process keeps serving)', {
          integration: script.name,
          after_ms: budget,
        });
        return;
      }
      log.error('an invocation did not end well past its limits; the serving process exits', { integration: script.name, after_ms: budget });
      hooks.culprit(script.name);
      process.exit(70);
    }, budget);
    timer.unref();
    return outcome.then((r) => {
      clearTimeout(timer);
      return done(r);
    });
  }

  // Invocations are run in batches, once per turn of the event loop, rather than as each request
  // is parsed: a batch runs back to back on one warm isolate (see host.ts, takeIdle) with the
  // guest's heap in the CPU's caches. Measured on one core, hello public endpoint under wrk:
  // ~5,000 req/s one by one, ~11,000 batched (the old worker process, batching over IPC: ~9,400).
  const runs = batchPerTurn<() => void>((batch) => {
    for (const f of batch) f();
  });

  return {
    invoke({ script, envelope, requestId }) {
      if (closed) return Promise.resolve(failure({ kind: 'crash', message: 'the sandbox is closing' }, { durationMs: 0 }));
      const parked = hooks.parked?.(script.name, script.version);
      if (parked) return Promise.resolve(failure({ kind: 'crash', message: parked }, { durationMs: 0, status: 503 }));
      refreshOrigin();
      pending++;
      return new Promise<InvocationResult>((resolve, reject) => {
        runs.push(() => {
          try {
            resolve(run(script, envelope, requestId));
          } catch (e) {
            reject(e);
          }
        });
      });
    },
    check(script): Promise<CheckResult> {
      return host.check(script);
    },
    async unload(name) {
      host.unload(name);
    },
    async close(drainMs = 0) {
      if (closed) return;
      closed = true;
      const deadline = Date.now() + drainMs;
      while (pending && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
      host.close();
    },
  };
}
