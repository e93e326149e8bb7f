/**
 * The guest's side of the host bridge. The host hands in plain functions at boot (isolated-vm
 * Callbacks: arguments and results are copied, never referenced); this module keeps them private
 * to the runtime's closures so integration code cannot reach them through any global.
 *
 * Everything the guest has to tell the host (start or cancel an operation, a console line, the
 * answer of a dispatch or drain) goes into an outbox that the host's call into the guest returns:
 * all guest code runs inside such a call (dispatch, complete, drain), microtasks included, so the
 * outbox of a call holds everything that call caused, in order, and costs no crossing of its own.
 * A call that fails (an unhandled rejection fails a whole isolated-vm call; a time-out) leaves its
 * outbox behind for the host to take.
 *
 * Asynchronous host work (fetch, timers, digests, API calls) is two-phase: an `op` entry asks the
 * host to begin, and the host later calls `complete(id, ok, value)`. The host never completes an
 * operation that belongs to an invocation that has already ended.
 */
import { DOMException } from './web/events.ts';

export interface HostFunctions {
  /** One console line, sent at once (used while the host runs this isolate on a thread of its own). */
  log(level: string, message: string): void;
  /** Source text of a lazily loaded part of the guest library ('idna', 'encodings'). */
  load(name: string): string;
  /** Cryptographically strong random bytes. */
  random(n: number): Uint8Array;
}

/** What the guest hands back at the end of each call, in the order it happened. */
export type OutboxEntry =
  | ['op', string, number, unknown]
  | ['cancel', number]
  | ['log', string, string]
  | ['answer', 'dispatch' | 'drain', number, unknown];

let outbox: OutboxEntry[] = [];
// Console lines go into the outbox when the host runs calls synchronously (they arrive with the
// answer, in order); otherwise through the log callback, so that lines printed before a runaway
// loop still reach the host before it stops the isolate.
let logsInOutbox = true;

// Indexed stores instead of Array.prototype.push, which integration code can replace.
function post(entry: OutboxEntry): void {
  outbox[outbox.length] = entry;
}

/** A host call begins: what it causes goes into a fresh outbox, which the call returns. */
export function beginCall(inlineLogs: boolean): OutboxEntry[] {
  const box: OutboxEntry[] = [];
  outbox = box;
  logsInOutbox = inlineLogs;
  return box;
}

/** The outbox of a call that failed (its return value was lost); a new one begins. */
export function takeOutbox(): OutboxEntry[] {
  const box = outbox;
  outbox = [];
  return box;
}

/** The answer of a dispatch or drain started by the host. */
export function respond(kind: 'dispatch' | 'drain', seq: number, value: unknown): void {
  post(['answer', kind, seq, value]);
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
  post(['op', op, id, arg]);
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
  if (pending.delete(id)) post(['cancel', id]);
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
  if (logsInOutbox) post(['log', level, message]);
  else hostFns().log(level, message);
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
