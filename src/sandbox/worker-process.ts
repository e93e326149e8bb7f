/**
 * The sandbox in a worker process of its own, for tests (startServer's default) and `switchyard
 * check`; `switchyard serve` runs isolates in its serving processes instead (in-process.ts). This is
 * the server's side: it starts the worker process (see workerCommand), sends it
 * invocations over IPC (JSON: bodies travel as base64, see ipc.ts), restarts it when it dies and
 * answers that worker's pending invocations with a 503 `crash` result. A worker that does not
 * answer an invocation well past its limits is presumed wedged and killed (a last resort behind the
 * worker's own watchdog). Script code is sent once per version per worker.
 *
 * Failure policy: the sandbox never throws for a guest fault; every invocation ends with a result.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import type { Logger } from '../log/index.ts';
import { batcher, envelopeToWire, resultFromWire } from './ipc.ts';
import { failure } from './limits.ts';
import type { CheckResult, Envelope, FromWorker, GuestScript, InvocationResult, Limits, LogLine, ToWorker, WorkerSettings } from './types.ts';
import { workerCommand } from './worker-command.ts';

export interface SandboxOptions {
  limits: Limits;
  allowPrivateNetworks: boolean;
  log: Logger;
  /** The server's own origin (refused to guest fetch); a function when it is known only later. */
  serverOrigin: string | (() => string);
  /** Lines printed after the response (waitUntil work). */
  onLog?: (e: { integration: string; requestId: string; line: LogLine }) => void;
  /** Most isolates one integration may run at once (default 4). */
  concurrency?: number;
}

export interface Sandbox {
  /** Run one envelope. Never rejects for guest faults: a breach or exception gives a 5xx result with `error` set. */
  invoke(inv: { script: GuestScript; envelope: Envelope; requestId: string }): Promise<InvocationResult>;
  /** Load a script in a fresh isolate and report what it exports, or why it cannot load. */
  check(script: GuestScript): Promise<CheckResult>;
  /** Drop an integration's isolates (the next invocation loads it again). */
  unload(name: string): Promise<void>;
  /** Stop the worker; invocations already running may finish within `drainMs` first. */
  close(drainMs?: number): Promise<void>;
}

interface Pending {
  kind: 'invoke' | 'check' | 'unload';
  resolve(v: unknown): void;
  started: number;
  timer?: NodeJS.Timeout;
  /** For invoke: the message, re-sent with code on `need-code`. */
  msg?: Extract<ToWorker, { t: 'invoke' }>;
  script?: GuestScript;
}

// Extra time the worker gets past an invocation's own limits before it is presumed wedged.
const WEDGED_GRACE_MS = 5_000;

export function createWorkerProcessSandbox(opts: SandboxOptions): Sandbox {
  const log = opts.log;
  const settings = (): WorkerSettings => ({
    limits: opts.limits,
    allowPrivateNetworks: opts.allowPrivateNetworks,
    serverOrigin: typeof opts.serverOrigin === 'function' ? opts.serverOrigin() : opts.serverOrigin,
    concurrency: opts.concurrency ?? 4,
  });

  let child: ChildProcess | null = null;
  let post: ((msg: ToWorker) => void) | null = null;
  let sentSettings: string | null = null;
  let closed = false;
  let nextId = 1;
  const pending = new Map<number, Pending>();
  /** Script versions the current worker has the code of. */
  const loaded = new Map<string, string>();
  const recentStarts: number[] = [];

  function start(): ChildProcess {
    const { command, args } = workerCommand();
    const now = Date.now();
    recentStarts.push(now);
    while (recentStarts.length && now - recentStarts[0] > 60_000) recentStarts.shift();
    const proc = spawn(command, args, { stdio: ['ignore', 'inherit', 'pipe', 'ipc'], serialization: 'json' });
    let stderr = '';
    proc.stderr!.on('data', (d: Buffer) => {
      stderr = (stderr + d.toString()).slice(-4000);
    });
    proc.on('message', (batch: FromWorker[]) => {
      for (const msg of batch) onMessage(proc, msg);
    });
    // After close() the channel may already be gone (EPIPE on the last write): not an error then.
    proc.on('error', (e) => {
      if (!closed) log.error('sandbox worker process error', { error: e.message });
    });
    proc.on('exit', (code, signal) => {
      if (child === proc) {
        child = null;
        post = null;
        loaded.clear();
        sentSettings = null;
      }
      const lost = [...pending.entries()];
      if (!closed) {
        log.error('sandbox worker exited; pending invocations answered 503, a new worker starts on demand', {
          code,
          signal,
          pending: lost.length,
          stderr: stderr.trim().split('\n').slice(-5).join('\n') || undefined,
        });
      }
      for (const [id, p] of lost)
        settle(
          id,
          p,
          crashValue(p, closed ? 'the sandbox is closing' : `the sandbox worker process exited (${signal ?? `code ${code}`}) while this invocation ran`),
        );
    });
    return proc;
  }

  function crashValue(p: Pending, message: string): unknown {
    if (p.kind === 'invoke') return failure({ kind: 'crash', message }, { durationMs: performance.now() - p.started });
    if (p.kind === 'check') return { ok: false, error: message } satisfies CheckResult;
    return undefined;
  }

  function settle(id: number, p: Pending, value: unknown): void {
    if (pending.get(id) !== p) return;
    pending.delete(id);
    clearTimeout(p.timer);
    holdOpen();
    p.resolve(value);
  }

  /** The worker keeps this process alive only while something waits for it. */
  function holdOpen(): void {
    const busy = pending.size > 0;
    const proc = child;
    if (!proc) return;
    if (busy) {
      proc.ref();
      (proc.channel as { ref?: () => void } | undefined)?.ref?.();
    } else {
      proc.unref();
      (proc.channel as { unref?: () => void } | undefined)?.unref?.();
    }
  }

  function worker(): ChildProcess {
    if (closed) throw new Error('the sandbox is closed');
    if (!child) {
      const now = Date.now();
      if (recentStarts.filter((t) => now - t < 60_000).length >= 10) {
        throw new Error('the sandbox worker exited 10 times within a minute; it is not restarted until that calms down');
      }
      const proc = start();
      child = proc;
      post = batcher<ToWorker>(
        (batch, onError) => {
          if (proc.connected) proc.send(batch, (err: Error | null) => err && onError(err));
          else onError(new Error('the worker is not connected'));
        },
        (batch, err) => {
          for (const msg of batch) {
            const p = 'id' in msg ? pending.get(msg.id) : undefined;
            if (p && 'id' in msg) settle(msg.id, p, crashValue(p, `could not reach the sandbox worker: ${err.message}`));
          }
        },
        (msg) => (msg.t === 'invoke' ? (msg.envelope.fetchBody?.length ?? 0) + (msg.code?.length ?? 0) : msg.t === 'check' ? msg.script.code.length : 0),
      );
    }
    // Settings change rarely (the server's origin is known only once it listens): compare cheaply.
    const origin = typeof opts.serverOrigin === 'function' ? opts.serverOrigin() : opts.serverOrigin;
    if (origin !== sentSettings) {
      post!({ t: 'settings', settings: { ...settings(), serverOrigin: origin } });
      sentSettings = origin;
    }
    return child;
  }

  function onMessage(proc: ChildProcess, msg: FromWorker): void {
    switch (msg.t) {
      case 'ready':
        return;
      case 'log':
        try {
          opts.onLog?.({ integration: msg.integration, requestId: msg.requestId, line: msg.line });
        } catch (e) {
          log.warn('sandbox onLog listener failed', { error: (e as Error).message });
        }
        return;
      case 'need-code': {
        const p = pending.get(msg.id);
        if (!p?.msg || !p.script) return;
        p.msg = { ...p.msg, code: p.script.code };
        loaded.set(p.script.name, p.script.version);
        post?.(p.msg);
        return;
      }
      case 'result':
      case 'checked':
      case 'unloaded': {
        const p = pending.get(msg.id);
        if (!p) return;
        if (msg.t === 'result') settle(msg.id, p, resultFromWire(msg.result));
        else settle(msg.id, p, msg.t === 'unloaded' ? undefined : msg.result);
        return;
      }
    }
  }

  /** A worker that stays silent far past every limit is stuck beyond its own watchdog: kill it. */
  function wedgedAfter(p: Pending, ms: number, proc: ChildProcess): void {
    p.timer = setTimeout(() => {
      log.error('sandbox worker did not answer in time; killing it', { after_ms: ms });
      proc.kill('SIGKILL');
    }, ms);
    p.timer.unref?.();
  }

  function request<T>(kind: Pending['kind'], build: (id: number) => ToWorker, extra: Partial<Pending> = {}, wedgedMs?: number): Promise<T> {
    return new Promise<T>((resolve) => {
      const id = nextId++;
      const p: Pending = { kind, resolve: resolve as (v: unknown) => void, started: performance.now(), ...extra };
      let proc: ChildProcess;
      try {
        proc = worker();
      } catch (e) {
        resolve(crashValue(p, (e as Error).message) as T);
        return;
      }
      pending.set(id, p);
      holdOpen();
      const msg = build(id);
      if (msg.t === 'invoke') p.msg = msg;
      if (wedgedMs) wedgedAfter(p, wedgedMs, proc);
      post!(msg);
    });
  }

  // The worker starts on first use (the registry's check() of each integration at boot, or the
  // first invocation), so a server or a CLI command that never runs guest code never pays for it.

  const limits = opts.limits;
  const invokeBudget = () => limits.startup_time + limits.wall_time + WEDGED_GRACE_MS;

  return {
    invoke({ script, envelope, requestId }) {
      const sendCode = loaded.get(script.name) !== script.version;
      return request<InvocationResult>(
        'invoke',
        (id) => {
          if (sendCode) loaded.set(script.name, script.version);
          return {
            t: 'invoke',
            id,
            name: script.name,
            version: script.version,
            code: sendCode ? script.code : undefined,
            envelope: envelopeToWire(envelope),
            requestId,
          };
        },
        { script },
        invokeBudget(),
      );
    },
    check(script) {
      return request<CheckResult>('check', (id) => ({ t: 'check', id, script }), {}, limits.startup_time + WEDGED_GRACE_MS);
    },
    async unload(name) {
      loaded.delete(name);
      if (!child) return;
      await request<void>('unload', (id) => ({ t: 'unload', id, name }), {}, WEDGED_GRACE_MS);
    },
    async close(drainMs = 0) {
      if (closed) return;
      closed = true;
      // Invocations already running (e.g. an event handler started just before shutdown) may
      // finish within the bound; new ones are refused from here on.
      const deadline = Date.now() + drainMs;
      while (pending.size && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
      const proc = child;
      if (!proc) return;
      const exited = new Promise<void>((r) => proc.once('exit', () => r()));
      if (proc.connected) proc.send([{ t: 'close' }] satisfies ToWorker[]);
      const timer = setTimeout(() => proc.kill('SIGKILL'), 2_000);
      await exited;
      clearTimeout(timer);
    },
  };
}
