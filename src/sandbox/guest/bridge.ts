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
 * outbox behind for the host to take, by the call's number.
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
  /**
   * The environment of invocation `seq` (the dispatch's sequence number), copied in when its code
   * first reads it: most public requests are answered without, and the copy was a sixth of the call.
   * Throws once that invocation is over.
   */
  environment(seq: number): Record<string, unknown>;
}

/** What the guest hands back at the end of each call, in the order it happened. */
export type OutboxEntry = ['op', string, number, unknown] | ['cancel', number] | ['log', string, string] | ['answer', 'dispatch' | 'drain', number, unknown];

let outbox: OutboxEntry[] = [];
let outboxBytes = 0;
// Console lines go into the outbox when the host runs calls synchronously (they arrive with the
// answer, in order); otherwise through the log callback, so that lines printed before a runaway
// loop still reach the host before it stops the isolate.
let logsInOutbox = true;
// Outboxes of recent calls by the host's call number: a call that fails (an unhandled rejection)
// loses its return value, and on isolated-vm's threads the next call may already have begun.
const recent = new Map<number, OutboxEntry[]>();
const RECENT_CALLS = 4;

// Captured before any integration code runs. Entries are defined, never assigned: an assignment
// would run a setter that integration code can put on Array.prototype and hand it the outbox.
const defineProperty = Object.defineProperty;
const mapGet = Map.prototype.get,
  mapSet = Map.prototype.set,
  mapDelete = Map.prototype.delete,
  mapKeys = Map.prototype.keys;
const iteratorNext = Object.getPrototypeOf(new Map().keys()).next;
const isView = ArrayBuffer.isView;
const charCodeAt = String.prototype.charCodeAt;
const mathMin = Math.min;
// What top-level code posts while the script loads is call 0 (the host takes it once loaded).
mapSet.call(recent, 0, outbox);

/**
 * Most bytes one call may hand the host: everything in an outbox is copied at once when the call
 * ends, outside the isolate's heap limit, so a guest must not queue more than the host should hold.
 */
export const MAX_OUTBOX_BYTES = 32 * 1024 * 1024;

/** Rough size of what crosses: strings and bytes, a few levels deep (op arguments are shallow). */
function sizeOf(v: unknown, depth: number): number {
  if (typeof v === 'string') return v.length;
  if (!v || typeof v !== 'object' || depth > 3) return 8;
  if (isView(v)) return (v as ArrayBufferView).byteLength;
  let n = 8;
  for (const k in v as object) n += k.length + sizeOf((v as Record<string, unknown>)[k], depth + 1);
  return n;
}

function post(entry: OutboxEntry, counted = true): void {
  const size = counted ? sizeOf(entry, 0) : 0;
  if (outboxBytes + size > MAX_OUTBOX_BYTES) {
    throw new RangeError(
      `too much for the host in one go: more than ${MAX_OUTBOX_BYTES / 1024 / 1024} MB of requests, bodies and log lines queued before the code awaited anything`,
    );
  }
  outboxBytes += size;
  defineProperty(outbox, outbox.length, { value: entry, writable: true, enumerable: true, configurable: true });
}

// The console lines of the current inline call, also written to memory the host shares (see
// host/last-lines.ts): when the host stops a runaway call by disposing the isolate, the outbox goes
// with it, and these are what the host still has of the lines printed before the loop.
// Nothing here may reach the buffer through a property integration code can redefine (a typed
// array's length or buffer getter, Math.min as integration code sees it): the buffer would hand it shared memory and the
// SharedArrayBuffer constructor this runtime removes. Its length is read once, at boot.
let lineRing: Uint16Array | undefined;
let lineRingUsed: Int32Array | undefined;
let lineRingLength = 0;

/** The memory the host reads the current call's console lines from (given once, at boot). */
export function setLineRing(shared: SharedArrayBuffer): void {
  if (lineRing) throw new Error('line ring already set');
  lineRingUsed = new Int32Array(shared, 0, 1);
  lineRing = new Uint16Array(shared, 4);
  lineRingLength = (shared.byteLength - 4) >> 1;
}

/** Append one line as [level length, level, message length (two halves), message], as far as it fits. */
function ringWrite(level: string, message: string): void {
  const ring = lineRing!;
  let at = lineRingUsed![0];
  if (at < 0 || at + 3 + level.length >= lineRingLength) return;
  ring[at++] = level.length;
  for (let i = 0; i < level.length; i++) ring[at++] = charCodeAt.call(level, i);
  const room = lineRingLength - at - 2;
  const n = mathMin(message.length, room);
  ring[at++] = n & 0xffff;
  ring[at++] = n >>> 16;
  for (let i = 0; i < n; i++) ring[at++] = charCodeAt.call(message, i);
  lineRingUsed![0] = at;
}

/** A host call (number `call`) begins: what it causes goes into a fresh outbox, which the call returns. */
export function beginCall(call: number, inlineLogs: boolean): OutboxEntry[] {
  const box: OutboxEntry[] = [];
  outbox = box;
  outboxBytes = 0;
  logsInOutbox = inlineLogs;
  if (lineRingUsed) lineRingUsed[0] = 0;
  mapSet.call(recent, call, box);
  if (recent.size > RECENT_CALLS) mapDelete.call(recent, iteratorNext.call(mapKeys.call(recent)).value);
  return box;
}

/** The outbox of call number `call`, whose return value was lost (it failed). */
export function takeOutbox(call: number): OutboxEntry[] {
  const box = mapGet.call(recent, call) as OutboxEntry[] | undefined;
  mapDelete.call(recent, call);
  return box ?? [];
}

/** The answer of a dispatch or drain started by the host. */
export function respond(kind: 'dispatch' | 'drain', seq: number, value: unknown): void {
  // Not counted: an answer's body is bounded by sandbox.response_body already.
  post(['answer', kind, seq, value], false);
}

let host: HostFunctions | undefined;
const pending = new Map<number, { resolve(v: unknown): void; reject(e: unknown): void }>();
let nextId = 1;

// Per-invocation caps on calls that cross to the host without waiting for it. They keep a guest
// from flooding the host's event loop faster than it can answer (which would also delay the
// watchdog); the host enforces its own caps behind these.
export const MAX_OPS = 10_000;
let opsStarted = 0;
let logLines = 0;
let maxLogLines = 256;
// biome-ignore lint/security/noGlobalEval: the guest evaluates code the host hands it, in the isolate's global scope
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
    const err =
      v.name === 'AbortError' || v.name === 'TimeoutError'
        ? new DOMException(String(v.message), v.name)
        : new TypeError(String(v.message ?? 'host operation failed'));
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
  if (logsInOutbox) {
    post(['log', level, message]);
    if (lineRing) ringWrite(level, message);
  } else hostFns().log(level, message);
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
