/**
 * One outbound HTTP request with the limits every caller needs: a wall-clock deadline covering
 * connect, headers and body; a cap on the body kept; the SSRF guard; never following redirects.
 * Used by webhook delivery and by the sandbox's guest fetch (its host side, sandbox/host/ops.ts).
 */
import http from 'node:http';
import https from 'node:https';
import { guardedLookup, NetError, refuseLiteral } from './lookup.ts';

export interface HttpResult {
  status: number;
  /** Lower-case names; repeated headers joined with ', '. */
  headers: Record<string, string>;
  /** At most maxBodyBytes. */
  body: Buffer;
  /** True when the body was longer than maxBodyBytes (the rest was not read). */
  truncated: boolean;
  durationMs: number;
}

export interface HttpRequestOptions {
  method: string;
  headers?: Record<string, string>;
  body?: Uint8Array | string;
  timeoutMs: number;
  maxBodyBytes: number;
  allowPrivate: boolean;
  signal?: AbortSignal;
}

// Keep-alive pools, one per (protocol, allowPrivate): a socket opened for a request that allowed
// private networks must never be reused by one that does not.
const agents = {
  'http:': [false, true].map((p) => new http.Agent({ keepAlive: true, lookup: guardedLookup(p) } as http.AgentOptions)),
  'https:': [false, true].map((p) => new https.Agent({ keepAlive: true, lookup: guardedLookup(p) } as https.AgentOptions)),
};

const knownCodes = new Set([
  'ETIMEDOUT',
  'ECONNREFUSED',
  'ECONNRESET',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EPRIVATEADDR',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EPIPE',
  'ABORT_ERR',
]);

/**
 * What a socket error code means, in words. Node's own message repeats the code and the address
 * (`connect ECONNREFUSED 127.0.0.1:9000`), which the origin before it already names.
 */
const meanings: Record<string, string> = {
  ECONNREFUSED: 'connection refused',
  ECONNRESET: 'connection reset',
  ENOTFOUND: 'no such host',
  EAI_AGAIN: 'the host name could not be looked up for now',
  EHOSTUNREACH: 'host unreachable',
  ENETUNREACH: 'network unreachable',
  EPIPE: 'connection closed while sending',
  ETIMEDOUT: 'connection timed out',
};

export function toNetError(err: unknown, origin: string): NetError {
  if (err instanceof NetError) return err;
  const e = err as NodeJS.ErrnoException;
  const code = typeof e?.code === 'string' ? e.code : 'EREQUEST';
  const message = e?.message ?? String(err);
  let what: string;
  if (meanings[code]) what = `${code} (${meanings[code]})`;
  else if (knownCodes.has(code) || code.startsWith('ERR_TLS') || code.includes('CERT')) what = message.includes(code) ? message : `${code} ${message}`.trim();
  else what = message;
  return new NetError(code, `${origin}: ${what}`, { cause: err });
}

/** Answer headers as one string each: lower-case names (as both clients give them), repeated ones joined with ', '. */
export function flattenHeaders(h: Record<string, string | string[] | undefined>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(h)) if (v !== undefined) out[k] = Array.isArray(v) ? v.join(', ') : v;
  return out;
}

/**
 * The URL a request may go to: http: or https:, and not a private IP literal unless allowed (names
 * are checked after resolution, by the agents' lookup). A NetError says why not.
 */
export function requestTarget(url: string, allowPrivate: boolean): URL | NetError {
  let target: URL;
  try {
    target = new URL(url);
  } catch {
    return new NetError('EINVALIDURL', `not a valid URL: ${url}`);
  }
  if (target.protocol !== 'http:' && target.protocol !== 'https:')
    return new NetError('EINVALIDURL', `only http: and https: URLs are allowed, got ${target.protocol} in ${url}`);
  return refuseLiteral(target.hostname, allowPrivate) ?? target;
}

/** Credentials in the URL (https://user:pw@host/) go as Basic auth, as curl and browsers send them. */
export function urlCredentials(target: URL): string | undefined {
  return target.username || target.password ? `${decodeURIComponent(target.username)}:${decodeURIComponent(target.password)}` : undefined;
}

/** Send one request. Resolves for any HTTP status (3xx included: redirects are never followed). */
export function httpRequest(url: string, opts: HttpRequestOptions): Promise<HttpResult> {
  const target = requestTarget(url, opts.allowPrivate);
  if (target instanceof NetError) return Promise.reject(target);
  return attempt(target, opts, true);
}

function attempt(target: URL, opts: HttpRequestOptions, mayRetryStale: boolean): Promise<HttpResult> {
  // Nothing is sent on a signal already aborted. (A request destroyed before it had a socket never
  // said so: its promise stayed pending past its own deadline, found by net.test.ts.)
  if (opts.signal?.aborted) return Promise.reject(new NetError('ABORT_ERR', `${target.origin}: request aborted`));
  const started = performance.now();
  const protocol = target.protocol as 'http:' | 'https:';
  const body = typeof opts.body === 'string' ? Buffer.from(opts.body) : opts.body;
  const headers: Record<string, string | number> = { ...opts.headers };
  if (body) headers['content-length'] = body.byteLength;
  const hostname = target.hostname.startsWith('[') ? target.hostname.slice(1, -1) : target.hostname;

  return new Promise<HttpResult>((resolve, reject) => {
    let settled = false;
    let gotResponse = false;
    const done = (err: unknown, result?: HttpResult) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      opts.signal?.removeEventListener('abort', onAbort);
      if (err) {
        // A keep-alive socket the server closed while idle fails at once with ECONNRESET before
        // any byte of answer: the request never reached the application, so one fresh try is safe.
        const code = (err as NodeJS.ErrnoException).code;
        if (mayRetryStale && !gotResponse && req.reusedSocket && (code === 'ECONNRESET' || code === 'EPIPE')) {
          attempt(target, opts, false).then(resolve, reject);
          return;
        }
        reject(toNetError(err, target.origin));
      } else resolve(result!);
    };
    const mod = protocol === 'https:' ? https : http;
    const req = mod.request({
      protocol,
      hostname,
      port: target.port || undefined,
      path: `${target.pathname}${target.search}`,
      method: opts.method,
      headers,
      auth: urlCredentials(target),
      agent: agents[protocol][opts.allowPrivate ? 1 : 0],
    });
    const timer = setTimeout(() => {
      req.destroy(new NetError('ETIMEDOUT', `${target.origin}: no complete response within ${opts.timeoutMs} ms`));
    }, opts.timeoutMs);
    const onAbort = () => req.destroy(new NetError('ABORT_ERR', `${target.origin}: request aborted`));
    opts.signal?.addEventListener('abort', onAbort, { once: true });

    req.on('error', (err) => done(err));
    req.on('response', (res) => {
      gotResponse = true;
      const chunks: Buffer[] = [];
      let size = 0;
      let truncated = false;
      const finish = () =>
        done(null, {
          status: res.statusCode ?? 0,
          headers: flattenHeaders(res.headers),
          body: Buffer.concat(chunks, size),
          truncated,
          durationMs: performance.now() - started,
        });
      res.on('data', (chunk: Buffer) => {
        if (truncated) return;
        const room = opts.maxBodyBytes - size;
        if (chunk.length > room) {
          if (room > 0) chunks.push(chunk.subarray(0, room));
          size += Math.max(room, 0);
          truncated = true;
          finish();
          res.destroy(); // the rest is not wanted; the socket is not reused
          return;
        }
        chunks.push(chunk);
        size += chunk.length;
      });
      res.on('end', finish);
      res.on('error', (err) => done(err));
      res.on('close', () => {
        if (!res.complete && !truncated) done(new NetError('ECONNRESET', `${target.origin}: connection closed before the response ended`));
      });
    });
    req.end(body);
  });
}
