/**
 * httpRequest's contract (request.ts: the private-address guard after resolution, a wall-clock
 * deadline over connect, headers and body, a cap on the body kept, redirects never followed) sent
 * with undici's connection pools rather than node:http. Webhook deliveries go this way: it is
 * their hot path, and undici spends about 40 % less CPU a request (a throwaway client against a
 * loopback sink, 20,000 POSTs of ~1 KB, 32 at a time, medians of 5: 36-39 us against 62 for
 * httpRequest and 60 for bare http.request).
 * The sandbox's guest fetch stays on httpRequest: a guest chooses its own headers, and undici
 * refuses some that node:http sends (`transfer-encoding`, `keep-alive`, `upgrade`, `expect`:
 * tried), which would change what integrations see.
 *
 * One difference, on purpose: a kept-alive connection is never retried here. undici looks at an
 * idle connection before it reuses one, so a receiver that closed it while idle is seen and a new
 * connection is opened (as httpRequest does); what is left is a close that crosses the request on
 * the wire, which undici reports without saying whether the connection was a reused one (the
 * socket's own error), and a reset of a request the receiver may have read must not be sent again
 * at once. That attempt fails, and its delivery is retried on schedule.
 */
import type { Agent, Dispatcher } from 'undici';
import { guardedLookup, NetError } from './lookup.ts';
import { flattenHeaders, requestTarget, toNetError, urlCredentials, type HttpRequestOptions, type HttpResult } from './request.ts';

let agents: Promise<Agent[]> | undefined;
let loaded: Agent[] | undefined;

/**
 * undici's Agent, loaded at the first delivery, not at start: a process that never delivers (and
 * every start-up) pays nothing. Only the module used, not undici's index (which loads fetch,
 * WebSocket, caches and mocks as well): ~40 ms of CPU against ~100 (measured, three loads each).
 * One dispatcher per allowPrivate, as httpRequest's agents: a connection opened for a request that
 * allowed private networks must never be reused by one that does not. Their own timers are off:
 * the deadline below covers connect, headers and body.
 */
function loadAgents(): Promise<Agent[]> {
  agents ??= import('undici/lib/dispatcher/agent.js').then(
    ({ default: AgentClass }) =>
      (loaded = [false, true].map((allowPrivate) => new AgentClass({ connect: { lookup: guardedLookup(allowPrivate) }, headersTimeout: 0, bodyTimeout: 0 }))),
  );
  return agents;
}

/** undici's own codes, in the words httpRequest reports. */
function netCode(err: unknown): unknown {
  const e = err as { code?: string; message?: string };
  if (e?.code === 'UND_ERR_SOCKET') return Object.assign(new Error(e.message), { code: 'ECONNRESET', cause: err });
  if (e?.code === 'UND_ERR_CONNECT_TIMEOUT') return Object.assign(new Error(e.message), { code: 'ETIMEDOUT', cause: err });
  return err;
}

/** Where a URL's requests go, as undici takes it: its origin, its path and query, and Basic auth from credentials in it. */
interface Target {
  origin: string;
  path: string;
  authorization?: string;
}

/**
 * URLs read before, per allowPrivate (requestTarget's verdict depends on it): an endpoint's URL is
 * parsed and checked once, not at every delivery. Emptied when it holds MAX_TARGETS.
 */
const targets = [new Map<string, Target | NetError>(), new Map<string, Target | NetError>()];
const MAX_TARGETS = 1024;

function targetOf(url: string, allowPrivate: boolean): Target | NetError {
  const known = targets[allowPrivate ? 1 : 0];
  let t = known.get(url);
  if (t) return t;
  const target = requestTarget(url, allowPrivate);
  if (target instanceof NetError) t = target;
  else {
    const credentials = urlCredentials(target);
    t = { origin: target.origin, path: `${target.pathname}${target.search}` };
    if (credentials) t.authorization = `Basic ${Buffer.from(credentials).toString('base64')}`;
  }
  if (known.size >= MAX_TARGETS) known.clear();
  known.set(url, t);
  return t;
}

/**
 * The exchanges each caller's signal cuts short when it aborts: one listener per signal (the
 * sender's stop), not one added and removed per exchange.
 */
const cutters = new WeakMap<AbortSignal, Set<() => void>>();
function onAbortOf(signal: AbortSignal, cut: () => void): () => void {
  let set = cutters.get(signal);
  if (!set) {
    const fns = (set = new Set());
    cutters.set(signal, set);
    signal.addEventListener(
      'abort',
      () => {
        for (const f of [...fns]) f();
      },
      { once: true },
    );
  }
  set.add(cut);
  return () => void set.delete(cut);
}

/** Send one request. Resolves for any HTTP status (3xx included: redirects are never followed). */
export function pooledRequest(url: string, opts: HttpRequestOptions): Promise<HttpResult> {
  let target: Target | NetError;
  try {
    target = targetOf(url, opts.allowPrivate);
  } catch (e) {
    return Promise.reject(e as Error); // credentials in the URL that are not valid percent-encoding (URIError), as httpRequest rejects them
  }
  if (target instanceof NetError) return Promise.reject(target);
  if (loaded) return send(loaded[opts.allowPrivate ? 1 : 0], target, opts);
  return loadAgents().then((a) => send(a[opts.allowPrivate ? 1 : 0], target, opts));
}

/**
 * One exchange through the dispatcher's own handler interface, not undici's request(): that one
 * wraps the body in a Readable stream, an async resource and an AbortSignal's listeners, which
 * cost more than the exchange itself (a throwaway client against a loopback sink, 20,000 POSTs of
 * ~1 KB, 32 at a time, medians of 5: 19 us of CPU a request against 42 through request()).
 */
function send(dispatcher: Dispatcher, target: Target, opts: HttpRequestOptions): Promise<HttpResult> {
  const started = performance.now();
  const { origin, authorization } = target;
  const headers = authorization ? { authorization, ...opts.headers } : opts.headers;
  return new Promise<HttpResult>((resolve, reject) => {
    /** The exchange's controller once it has a connection; why it was cut short, if it was (the deadline or the caller's stop). */
    let controller: Dispatcher.DispatchController | undefined;
    let cut: NetError | undefined;
    let settled = false;
    /** Takes this exchange off its caller's signal (set once it is on it). */
    let forget: (() => void) | undefined;
    let status = 0;
    let answered: Record<string, string | string[] | undefined> | undefined;
    const chunks: Buffer[] = [];
    let size = 0;
    const settle = (err: unknown, result?: HttpResult) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      forget?.();
      if (result) resolve(result);
      else reject(err);
    };
    const result = (truncated: boolean): HttpResult => ({
      status,
      headers: flattenHeaders(answered ?? {}),
      body: Buffer.concat(chunks, size),
      truncated,
      durationMs: performance.now() - started,
    });
    // Cut short: the caller hears at once; a request still waiting for its connection is cut when it gets one.
    const cutShort = (reason: NetError) => {
      cut ??= reason;
      controller?.abort(reason);
      settle(reason);
    };
    const timer = setTimeout(() => cutShort(new NetError('ETIMEDOUT', `${origin}: no complete response within ${opts.timeoutMs} ms`)), opts.timeoutMs);
    const onAbort = () => cutShort(new NetError('ABORT_ERR', `${origin}: request aborted`));
    if (opts.signal?.aborted) return onAbort();
    if (opts.signal) forget = onAbortOf(opts.signal, onAbort);
    dispatcher.dispatch(
      { origin, path: target.path, method: opts.method as Dispatcher.HttpMethod, headers, body: opts.body },
      {
        onRequestStart(c) {
          if (cut) c.abort(cut);
          else controller = c;
        },
        onResponseStart(_c, statusCode, responseHeaders) {
          if (statusCode < 200) return; // an informational answer (100, 103): the final one follows
          status = statusCode;
          answered = responseHeaders;
        },
        onResponseData(c, chunk) {
          if (settled) return;
          const room = opts.maxBodyBytes - size;
          if (chunk.length <= room) {
            chunks.push(chunk);
            size += chunk.length;
            return;
          }
          if (room > 0) chunks.push(chunk.subarray(0, room));
          size += Math.max(room, 0);
          // The rest is not wanted: the exchange is cut, and its connection not reused.
          settle(undefined, result(true));
          c.abort(new NetError('ECONNRESET', `${origin}: response body over ${opts.maxBodyBytes} bytes, not read further`));
        },
        onResponseEnd() {
          settle(undefined, result(false));
        },
        onResponseError(_c, err) {
          if (cut) settle(cut);
          else if (status) settle(new NetError('ECONNRESET', `${origin}: connection closed before the response ended`, { cause: err }));
          else settle(toNetError(netCode(err), origin));
        },
      },
    );
  });
}
