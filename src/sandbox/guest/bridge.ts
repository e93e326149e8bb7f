/**
 * The guest's side of the host bridge. The host hands in plain functions at boot (isolated-vm
 * Callbacks: arguments and results are copied, never referenced); this module keeps them private
 * to the runtime's closures so integration code cannot reach them through any global.
 *
 * Asynchronous host work (fetch, timers, digests, API calls) is two-phase: `start(op, id, arg)`
 * asks the host to begin, and the host later calls `complete(id, ok, value)` (held by the host as a
 * reference to a guest function). The host never completes an operation that belongs to an
 * invocation that has already ended.
 */
import { DOMException } from './web/events.ts';

export interface HostFunctions {
  /** Begin an asynchronous operation; the result arrives through complete(). */
  start(op: string, id: number, arg: unknown): void;
  /** Give up an operation (a cleared timer, an aborted fetch). */
  cancel(id: number): void;
  /** One console line. */
  log(level: string, message: string): void;
  /** Source text of a lazily loaded part of the guest library ('idna', 'encodings'). */
  load(name: string): string;
  /** Cryptographically strong random bytes. */
  random(n: number): Uint8Array;
  /**
   * The outcome of a dispatch or drain started by the host. Answers travel this way rather than as
   * the call's return value because isolated-vm fails a whole call when any promise rejection is
   * left unhandled at its end: a sloppy `fetch()` without catch must not lose the response.
   */
  respond(kind: 'dispatch' | 'drain', seq: number, value: unknown): void;
}

let host: HostFunctions | undefined;
const pending = new Map<number, { resolve(v: unknown): void; reject(e: unknown): void }>();
let nextId = 1;

// Per-invocation caps on calls that cross to the host without waiting for it. They keep a guest
// from flooding the worker's event loop faster than it can answer (which would also delay the
// watchdog); the host enforces its own caps behind these.
export const MAX_OPS = 10_000;
let opsStarted = 0;
let logLines = 0;
let maxLogLines = 256;
const indirectEval = eval;

export function setHost(fns: HostFunctions): void {
  if (host) throw new Error('host bridge already set');
  host = fns;
}

export function hostFns(): HostFunctions {
  if (!host) throw new Error('the host bridge is not ready');
  return host;
}

/** Start a host operation; resolves with its value, rejects with an Error built from its failure. */
export function callHost<T>(op: string, arg: unknown, onId?: (id: number) => void): Promise<T> {
  if (++opsStarted > MAX_OPS) {
    throw new RangeError(`too many host operations in one invocation (at most ${MAX_OPS}: timers, fetches, API and crypto calls count)`);
  }
  const id = nextId++;
  const promise = new Promise<T>((resolve, reject) => pending.set(id, { resolve: resolve as (v: unknown) => void, reject }));
  onId?.(id);
  hostFns().start(op, id, arg);
  return promise;
}

/** Called by the host (through a reference it holds) when an operation finishes. */
export function complete(id: number, ok: boolean, value: unknown): void {
  const p = pending.get(id);
  if (!p) return;
  pending.delete(id);
  if (ok) p.resolve(value);
  else {
    const v = (value ?? {}) as { name?: string; message?: string };
    const err = v.name === 'AbortError' || v.name === 'TimeoutError' ? new DOMException(String(v.message), v.name) : new TypeError(String(v.message ?? 'host operation failed'));
    p.reject(err);
  }
}

/** Forget an operation without settling it (its invocation ended or it was cancelled). */
export function forget(id: number): void {
  if (pending.delete(id)) hostFns().cancel(id);
}

/** A new invocation starts: operations of the previous one will never complete. */
export function resetPending(logLimit: number): void {
  pending.clear();
  opsStarted = 0;
  logLines = 0;
  maxLogLines = logLimit;
}

/** Send one console line, unless this invocation already printed more than the host keeps. */
export function logToHost(level: string, message: string): void {
  if (++logLines > maxLogLines + 1) return;
  hostFns().log(level, message);
}

/** Evaluate a lazily loaded library part once; the host supplies trusted source text. */
const loaded = new Map<string, any>();
export function loadExtra<T>(name: string): T {
  let mod = loaded.get(name);
  if (!mod) {
    mod = indirectEval(hostFns().load(name));
    loaded.set(name, mod);
  }
  return mod as T;
}
