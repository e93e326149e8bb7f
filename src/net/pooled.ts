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

type RequestFn = (this: Dispatcher, opts: Dispatcher.RequestOptions) => Promise<Dispatcher.ResponseData>;
let undici: Promise<{ agents: Agent[]; request: RequestFn }> | undefined;

/**
 * undici, loaded at the first delivery, not at start: a process that never delivers (and every
 * start-up) pays nothing. Only the two modules used, not undici's index (which loads fetch,
 * WebSocket, caches and mocks as well): ~40 ms of CPU against ~100 (measured, three loads each).
 * One dispatcher per allowPrivate, as httpRequest's agents: a connection opened for a request that
 * allowed private networks must never be reused by one that does not. Their own timers are off:
 * the deadline below covers connect, headers and body.
 */
function loadUndici() {
  undici ??= Promise.all([import('undici/lib/dispatcher/agent.js'), import('undici/lib/api/api-request.js')]).then(([agent, api]) => {
    const AgentClass = agent.default;
    return {
      agents: [false, true].map((allowPrivate) => new AgentClass({ connect: { lookup: guardedLookup(allowPrivate) }, headersTimeout: 0, bodyTimeout: 0 })),
      request: api.default,
    };
  });
  return undici;
}

/** undici's own codes, in the words httpRequest reports. */
function netCode(err: unknown): unknown {
  const e = err as { code?: string; message?: string };
  if (e?.code === 'UND_ERR_SOCKET') return Object.assign(new Error(e.message), { code: 'ECONNRESET', cause: err });
  if (e?.code === 'UND_ERR_CONNECT_TIMEOUT') return Object.assign(new Error(e.message), { code: 'ETIMEDOUT', cause: err });
  return err;
}

/** Send one request. Resolves for any HTTP status (3xx included: redirects are never followed). */
export function pooledRequest(url: string, opts: HttpRequestOptions): Promise<HttpResult> {
  const target = requestTarget(url, opts.allowPrivate);
  if (target instanceof NetError) return Promise.reject(target);
  return send(target, opts);
}

async function send(target: URL, opts: HttpRequestOptions): Promise<HttpResult> {
  const started = performance.now();
  const origin = target.origin;
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(new NetError('ETIMEDOUT', `${origin}: no complete response within ${opts.timeoutMs} ms`)), opts.timeoutMs);
  const onAbort = () => controller.abort(new NetError('ABORT_ERR', `${origin}: request aborted`));
  if (opts.signal?.aborted) onAbort();
  else opts.signal?.addEventListener('abort', onAbort, { once: true });
  const credentials = urlCredentials(target);
  const headers = credentials ? { authorization: `Basic ${Buffer.from(credentials).toString('base64')}`, ...opts.headers } : opts.headers;
  let res: Dispatcher.ResponseData | undefined;
  try {
    const { agents, request } = await loadUndici();
    res = await request.call(agents[opts.allowPrivate ? 1 : 0], {
      origin,
      path: `${target.pathname}${target.search}`,
      method: opts.method as Dispatcher.HttpMethod,
      headers,
      body: opts.body,
      signal: controller.signal,
    });
    const chunks: Buffer[] = [];
    let size = 0;
    let truncated = false;
    for await (const chunk of res.body as AsyncIterable<Buffer>) {
      const room = opts.maxBodyBytes - size;
      if (chunk.length > room) {
        if (room > 0) chunks.push(chunk.subarray(0, room));
        size += Math.max(room, 0);
        truncated = true;
        break; // the rest is not wanted: leaving the loop destroys the body, and the connection is not reused
      }
      chunks.push(chunk);
      size += chunk.length;
    }
    return {
      status: res.statusCode,
      headers: flattenHeaders(res.headers),
      body: Buffer.concat(chunks, size),
      truncated,
      durationMs: performance.now() - started,
    };
  } catch (err) {
    // The deadline or the caller's stop: their reason, whatever undici made of it.
    const reason = controller.signal.aborted ? controller.signal.reason : undefined;
    if (reason instanceof NetError) throw reason;
    if (res) throw new NetError('ECONNRESET', `${origin}: connection closed before the response ended`, { cause: err });
    throw toNetError(netCode(err), origin);
  } finally {
    clearTimeout(timer);
    opts.signal?.removeEventListener('abort', onAbort);
  }
}
