/**
 * Entry of the guest library: evaluated once in every new isolate context, before any integration
 * code. It installs the Web APIs as globals, hides the host bridge, and leaves exactly one boot
 * function for the host, which removes it again before integration code runs.
 */
import { beginCall, complete, respond, setHost, setLineRing, takeOutbox, type HostFunctions } from './bridge.ts';
import { AbortController, AbortSignal } from './web/abort.ts';
import { atob, btoa } from './web/base64.ts';
import { Blob, File } from './web/blob.ts';
import { console } from './web/console.ts';
import { CryptoKey, crypto } from './web/crypto.ts';
import { TextDecoder, TextEncoder } from './web/encoding.ts';
import { DOMException, Event, EventTarget } from './web/events.ts';
import { fetch } from './web/fetch.ts';
import { FormData } from './web/formdata.ts';
import { Headers } from './web/headers.ts';
import { Request } from './web/request.ts';
import { Response } from './web/response.ts';
import { streamsLib } from './web/streams.ts';
import { structuredClone } from './web/structured-clone.ts';
import { clearInterval, clearTimeout, queueMicrotask, setInterval, setTimeout } from './web/timers.ts';
import { URL, URLSearchParams } from './web/url.ts';
import { describe, dispatch, drain, register, warm, type DispatchInput } from './runtime/dispatch.ts';
import * as runtime from './runtime/index.ts';

const g = globalThis as any;
// Taken before any integration code runs (it could replace the global).
const parseJSON = JSON.parse;

function define(name: string, value: unknown): void {
  Object.defineProperty(g, name, { value, writable: true, configurable: true, enumerable: false });
}

function defineLazy(name: string, get: () => unknown): void {
  Object.defineProperty(g, name, {
    get() {
      const value = get();
      define(name, value);
      return value;
    },
    set(value) {
      define(name, value);
    },
    configurable: true,
    enumerable: false,
  });
}

const timeOrigin = Date.now();

const globals: Record<string, unknown> = {
  self: globalThis,
  console,
  fetch,
  Request,
  Response,
  Headers,
  URL,
  URLSearchParams,
  FormData,
  Blob,
  File,
  TextEncoder,
  TextDecoder,
  atob,
  btoa,
  crypto,
  CryptoKey,
  setTimeout,
  clearTimeout,
  setInterval,
  clearInterval,
  queueMicrotask,
  structuredClone,
  AbortController,
  AbortSignal,
  Event,
  EventTarget,
  DOMException,
  navigator: Object.freeze({ userAgent: 'Switchyard' }),
  performance: Object.freeze({ timeOrigin, now: () => Date.now() - timeOrigin }),
};
for (const [name, value] of Object.entries(globals)) define(name, value);
for (const name of [
  'ReadableStream',
  'WritableStream',
  'TransformStream',
  'ByteLengthQueuingStrategy',
  'CountQueuingStrategy',
  'ReadableStreamDefaultReader',
  'ReadableStreamBYOBReader',
  'WritableStreamDefaultWriter',
  'ReadableByteStreamController',
  'ReadableStreamDefaultController',
  'TransformStreamDefaultController',
  'WritableStreamDefaultController',
  'ReadableStreamBYOBRequest',
]) {
  defineLazy(name, () => (streamsLib() as any)[name]);
}

// Things a guest could use to block the isolate's thread beyond the host's reach, or to allocate
// memory outside the heap limit: no WebAssembly (its memory is not counted), no shared memory.
delete g.WebAssembly;
delete g.SharedArrayBuffer;
if (g.Atomics) {
  delete g.Atomics.wait;
  delete g.Atomics.waitAsync;
}

Object.defineProperty(g, Symbol.for('switchyard.runtime'), { value: Object.freeze({ ...runtime }), enumerable: false });

/**
 * The host calls this once with its bridge functions; it answers the functions the host keeps
 * (as references on its side) to drive invocations. Each of dispatch, complete, drain and warm
 * returns the outbox of that call (see bridge.ts); `inlineLogs` says whether console lines go
 * there too (the host runs the call on its own thread) or through the log callback. `lines` is
 * memory shared with the host for the current call's console lines (see bridge.ts setLineRing).
 */
function boot(
  log: HostFunctions['log'],
  load: HostFunctions['load'],
  random: HostFunctions['random'],
  environment: HostFunctions['environment'],
  lines: SharedArrayBuffer,
) {
  setHost({ log, load, random, environment });
  setLineRing(lines);
  const failed = (seq: number) => () =>
    respond('dispatch', seq, {
      status: 500,
      headers: [],
      body: new Uint8Array(0),
      error: { message: "the integration's failure could not be described" },
      waitUntil: 0,
    });
  return {
    register,
    describe,
    take: takeOutbox,
    warm(call: number, inlineLogs: boolean) {
      const box = beginCall(call, inlineLogs);
      warm().then(
        () => respond('dispatch', 0, null),
        () => respond('dispatch', 0, null),
      );
      return box;
    },
    dispatch(seq: number, input: DispatchInput | string, call: number, inlineLogs: boolean) {
      const box = beginCall(call, inlineLogs);
      // A plain request comes as JSON text (see the host's Invocation.run).
      const given: DispatchInput = typeof input === 'string' ? parseJSON(input) : input;
      // dispatch() turns every throw into an answer; should describing one throw as well, still answer.
      dispatch(given, seq).then((out) => respond('dispatch', seq, out), failed(seq));
      return box;
    },
    complete(id: number, ok: boolean, value: unknown, call: number, inlineLogs: boolean) {
      const box = beginCall(call, inlineLogs);
      complete(id, ok, value);
      return box;
    },
    drain(seq: number, call: number, inlineLogs: boolean) {
      const box = beginCall(call, inlineLogs);
      drain().then((n) => respond('drain', seq, n));
      return box;
    },
  };
}
define('__switchyardBoot', boot);
