/**
 * Host side of the guest's asynchronous operations: outbound fetch (private-network policy, never
 * the server's own origin, redirects followed by hand with every hop re-checked), context.api
 * requests (only to environment.apiEndpoint's origin, with the invocation's token), and HMAC /
 * digest over plain byte copies. Every argument comes from untrusted code and is validated here.
 */
import { createHash, createHmac, timingSafeEqual, webcrypto } from 'node:crypto';
import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import { networkInterfaces } from 'node:os';
import { canonicalIP, httpRequest, isLoopbackAddress, type NetError } from '../../net/index.ts';
import { ownBytes } from '../bytes.ts';
// The answer's shape is declared once, on the guest's side of the bridge (a leaf both sides import).
import type { FetchResult } from '../guest/web/fetch-result.ts';
import type { Limits } from '../types.ts';

export class OpError extends Error {
  constructor(message: string, name = 'TypeError') {
    super(message);
    this.name = name;
  }
}

export interface FetchArg {
  method: string;
  url: string;
  headers: Array<[string, string]>;
  body: Uint8Array | null;
  redirect: 'follow' | 'error' | 'manual';
}

export interface NetPolicy {
  limits: Limits;
  allowPrivateNetworks: boolean;
  serverOrigin: string;
}

const MAX_REDIRECTS = 5;
const tokenRe = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const dropRequestHeaders = new Set(['content-length', 'connection', 'keep-alive', 'transfer-encoding', 'upgrade', 'te', 'trailer', 'proxy-connection']);

function isString(v: unknown, max: number): v is string {
  return typeof v === 'string' && v.length <= max;
}

/** Check the shape of a fetch request coming from the guest. */
export function parseFetchArg(arg: unknown, limits: Limits): FetchArg {
  const a = arg as Partial<FetchArg> | null;
  if (!a || typeof a !== 'object') throw new OpError('fetch: malformed request');
  if (!isString(a.method, 64) || !tokenRe.test(a.method)) throw new OpError('fetch: invalid method');
  if (!isString(a.url, 16 * 1024)) throw new OpError('fetch: the URL is missing or longer than 16 kB');
  if (!Array.isArray(a.headers) || a.headers.length > 256) throw new OpError('fetch: too many headers (at most 256)');
  let headerBytes = 0;
  for (const h of a.headers) {
    if (!Array.isArray(h) || h.length !== 2 || !isString(h[0], 1024) || !isString(h[1], 64 * 1024)) throw new OpError('fetch: malformed header');
    headerBytes += h[0].length + h[1].length;
  }
  if (headerBytes > 128 * 1024) throw new OpError('fetch: request headers are larger than 128 kB');
  if (a.body !== null && !(a.body instanceof Uint8Array)) throw new OpError('fetch: malformed body');
  if (a.body && a.body.byteLength > limits.subrequest_body) {
    throw new OpError(`fetch: the request body is larger than sandbox.subrequest_body = ${limits.subrequest_body} bytes`);
  }
  if (a.redirect !== 'follow' && a.redirect !== 'error' && a.redirect !== 'manual') throw new OpError('fetch: invalid redirect mode');
  return a as FetchArg;
}

function defaultPort(u: URL): string {
  return u.port || (u.protocol === 'https:' ? '443' : '80');
}

function localAddresses(): Set<string> {
  const out = new Set<string>();
  for (const list of Object.values(networkInterfaces())) for (const a of list ?? []) out.add(canonicalIP(a.address) ?? a.address);
  return out;
}

/**
 * Is this URL the server itself? Same port and a host that is the server's host, localhost, or an
 * address of this machine. The management API is reachable only through context.api.
 */
export async function isServerItself(target: URL, serverOrigin: string): Promise<boolean> {
  let server: URL;
  try {
    server = new URL(serverOrigin);
  } catch {
    return false;
  }
  if (defaultPort(target) !== defaultPort(server)) return false;
  const host = target.hostname.replace(/^\[|\]$/g, '').toLowerCase();
  if (host === server.hostname.replace(/^\[|\]$/g, '').toLowerCase() || host === 'localhost' || host.endsWith('.localhost')) return true;
  const locals = localAddresses();
  const addresses = isIP(host)
    ? [host]
    : await lookup(host, { all: true }).then(
        (r) => r.map((x) => x.address),
        () => [] as string[],
      );
  // Compared in one canonical spelling: `[::ffff:127.0.0.1]` (which URL writes `[::ffff:7f00:1]`),
  // `0x7f.1` or `[::127.0.0.1]` are this machine as much as 127.0.0.1 is.
  return addresses.some((a) => isLoopbackAddress(a) || locals.has(canonicalIP(a) ?? a));
}

function headerRecord(pairs: Array<[string, string]>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of pairs) {
    const name = k.toLowerCase();
    if (dropRequestHeaders.has(name)) continue;
    out[name] = name in out ? `${out[name]}, ${v}` : v;
  }
  return out;
}

const statusTexts: Record<number, string> = {
  200: 'OK',
  201: 'Created',
  202: 'Accepted',
  204: 'No Content',
  301: 'Moved Permanently',
  302: 'Found',
  303: 'See Other',
  304: 'Not Modified',
  307: 'Temporary Redirect',
  308: 'Permanent Redirect',
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  405: 'Method Not Allowed',
  409: 'Conflict',
  410: 'Gone',
  413: 'Payload Too Large',
  415: 'Unsupported Media Type',
  422: 'Unprocessable Entity',
  429: 'Too Many Requests',
  500: 'Internal Server Error',
  502: 'Bad Gateway',
  503: 'Service Unavailable',
  504: 'Gateway Timeout',
};

/** Perform a guest fetch under the policy. Throws OpError with a message the guest sees. */
export async function performFetch(req: FetchArg, policy: NetPolicy, signal: AbortSignal): Promise<FetchResult> {
  const deadline = Date.now() + policy.limits.subrequest_timeout;
  let url: URL;
  try {
    url = new URL(req.url);
  } catch {
    throw new OpError(`fetch: invalid URL ${JSON.stringify(req.url)}`);
  }
  let method = req.method;
  let body = req.body;
  let headers = headerRecord(req.headers);
  for (let hop = 0; ; hop++) {
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new OpError(`fetch: only http: and https: URLs can be fetched, not ${url.protocol}`);
    if (await isServerItself(url, policy.serverOrigin)) {
      throw new OpError(`fetch: ${url.origin} is this server; integrations reach its API only through context.api`);
    }
    const remaining = deadline - Date.now();
    if (remaining <= 0) throw new OpError(`fetch: no response within sandbox.subrequest_timeout = ${policy.limits.subrequest_timeout} ms`, 'TimeoutError');
    let res;
    try {
      res = await httpRequest(url.href, {
        method,
        headers,
        body: body ?? undefined,
        timeoutMs: remaining,
        maxBodyBytes: policy.limits.subrequest_body,
        allowPrivate: policy.allowPrivateNetworks,
        signal,
      });
    } catch (e) {
      const err = e as NetError;
      if (err.code === 'ETIMEDOUT')
        throw new OpError(`fetch: no response from ${url.origin} within sandbox.subrequest_timeout = ${policy.limits.subrequest_timeout} ms`, 'TimeoutError');
      if (err.code === 'ABORT_ERR') throw new OpError('fetch: aborted', 'AbortError');
      throw new OpError(`fetch failed: ${err.message}`);
    }
    if (res.truncated)
      throw new OpError(`fetch: the response from ${url.origin} is larger than sandbox.subrequest_body = ${policy.limits.subrequest_body} bytes`);
    const location = res.headers.location;
    const isRedirect = [301, 302, 303, 307, 308].includes(res.status) && location !== undefined;
    if (isRedirect && req.redirect === 'error') throw new OpError(`fetch: ${url.href} redirected and the request's redirect mode is 'error'`);
    if (!isRedirect || req.redirect === 'manual') {
      return {
        status: res.status,
        statusText: statusTexts[res.status] ?? '',
        headers: Object.entries(res.headers).flatMap(([k, v]) =>
          k === 'set-cookie' ? v.split(/,(?=\s*[^;,=\s]+=)/).map((c) => [k, c.trim()] as [string, string]) : [[k, v] as [string, string]],
        ),
        body: ownBytes(res.body),
        url: url.href,
        redirected: hop > 0,
      };
    }
    if (hop >= MAX_REDIRECTS) throw new OpError(`fetch: more than ${MAX_REDIRECTS} redirects from ${req.url}`);
    let next: URL;
    try {
      next = new URL(location, url);
    } catch {
      throw new OpError(`fetch: ${url.href} redirected to an invalid URL ${JSON.stringify(location)}`);
    }
    // Fetch standard: 303 (and 301/302 after POST) turn into a GET without a body.
    if (res.status === 303 ? method !== 'HEAD' : (res.status === 301 || res.status === 302) && method === 'POST') {
      method = 'GET';
      body = null;
      headers = Object.fromEntries(Object.entries(headers).filter(([k]) => !k.startsWith('content-')));
    }
    // Credentials never follow a redirect to another origin.
    if (next.origin !== url.origin) delete headers.authorization;
    delete headers.host;
    url = next;
  }
}

export interface ApiArg {
  method: string;
  path: string;
  body: string | null;
  /** `integration`: with the integration-wide token even when there is an installation (context.integration.api). */
  as?: 'integration';
  /** One of this invocation's tokens (an installation client made by createInstallationClient). */
  token?: string;
}

/**
 * The API tokens one invocation may send: those of its environment, and the installation tokens
 * the API minted for it (GitBook's createIntegrationInstallationToken). Guest code may name one of
 * these and nothing else, so it never spends the admin token's failed-attempt budget nor presents
 * a credential it was not given.
 */
export class InvocationTokens {
  private readonly known = new Set<string>();
  readonly installation?: string;
  readonly integration?: string;
  constructor(environment: Record<string, unknown>) {
    const t = (environment.apiTokens ?? {}) as Record<string, unknown>;
    if (typeof t.installation === 'string') this.known.add((this.installation = t.installation));
    if (typeof t.integration === 'string') this.known.add((this.integration = t.integration));
  }
  has(token: string): boolean {
    return this.known.has(token);
  }
  /** A token the API handed out during this invocation. */
  add(token: string): void {
    if (this.known.size < 1000) this.known.add(token);
  }
}

const MINTS_TOKEN = /^\/integrations\/[^/]+\/installations\/[^/]+\/tokens$/;

/** context.api: one request to the platform API with one of the invocation's tokens. */
export async function performApi(
  arg: unknown,
  environment: Record<string, unknown>,
  limits: Limits,
  signal: AbortSignal,
  tokens: InvocationTokens = new InvocationTokens(environment),
): Promise<{ status: number; body: string; contentType: string }> {
  const a = arg as Partial<ApiArg> | null;
  if (!a || typeof a !== 'object' || !isString(a.method, 16) || !['GET', 'POST', 'PUT', 'PATCH', 'DELETE'].includes(a.method)) {
    throw new OpError('context.api: method must be GET, POST, PUT, PATCH or DELETE');
  }
  if (!isString(a.path, 4096)) throw new OpError('context.api: path must be a string');
  if (a.body !== null && !isString(a.body, limits.subrequest_body)) throw new OpError('context.api: body is too large');
  const endpoint = typeof environment.apiEndpoint === 'string' ? environment.apiEndpoint : '';
  let base: URL;
  try {
    base = new URL(endpoint);
  } catch {
    throw new OpError('context.api is not available: environment.apiEndpoint is not set');
  }
  const basePath = base.pathname.replace(/\/$/, '');
  const path = a.path;
  let target: URL;
  try {
    target = path.startsWith(`${basePath}/`) && basePath ? new URL(path, base.origin) : new URL(`${basePath}/${path.replace(/^\/+/, '')}`, base.origin);
  } catch {
    throw new OpError(`context.api: invalid path ${JSON.stringify(path)}`);
  }
  // Only the API itself: same origin, under the endpoint's path (no ../ escapes, no other hosts).
  if (target.origin !== base.origin || !(target.pathname === basePath || target.pathname.startsWith(`${basePath}/`))) {
    throw new OpError(`context.api: ${JSON.stringify(path)} is outside ${endpoint}`);
  }
  let token: string | undefined;
  if (a.token !== undefined) {
    if (typeof a.token !== 'string' || !tokens.has(a.token)) throw new OpError('context.api: that token was not handed to this invocation');
    token = a.token;
  } else if (a.as === 'integration') token = tokens.integration;
  else token = tokens.installation ?? tokens.integration;
  const headers: Record<string, string> = { accept: 'application/json' };
  if (token) headers.authorization = `Bearer ${token}`;
  if (a.body !== null) headers['content-type'] = 'application/json';
  let res: Response;
  try {
    res = await fetch(target, {
      method: a.method,
      headers,
      body: a.body,
      redirect: 'manual',
      signal: AbortSignal.any([signal, AbortSignal.timeout(limits.subrequest_timeout)]),
    });
  } catch (e) {
    const err = e as Error;
    if (err.name === 'TimeoutError')
      throw new OpError(`context.api: no answer within sandbox.subrequest_timeout = ${limits.subrequest_timeout} ms`, 'TimeoutError');
    throw new OpError(`context.api: ${a.method} ${target.pathname} failed: ${(err.cause as Error)?.message ?? err.message}`);
  }
  const text = await res.text();
  if (text.length > limits.subrequest_body)
    throw new OpError(`context.api: the answer is larger than sandbox.subrequest_body = ${limits.subrequest_body} bytes`);
  // An installation token the API minted for this invocation may be used by it from now on.
  if (a.method === 'POST' && res.status === 200 && MINTS_TOKEN.test(target.pathname.slice(basePath.length))) {
    try {
      const minted = (JSON.parse(text) as { token?: unknown }).token;
      if (typeof minted === 'string' && minted.startsWith('sy_inv_')) tokens.add(minted);
    } catch {
      /* not a token answer */
    }
  }
  return { status: res.status, body: text, contentType: res.headers.get('content-type') ?? 'application/json' };
}

/**
 * A guest `fetch` to `environment.apiEndpoint` carrying one of the invocation's own tokens (an
 * integration that builds GitBook's API client itself, `new GitBookAPI({ endpoint: apiEndpoint,
 * authToken })`): performed as a context.api request with that token, so it reaches the API with
 * that token's authority and nothing more. Undefined for any other URL, or without such a token
 * (the server's own origin stays refused then). GitBook's client adds its version to the endpoint
 * (`<apiEndpoint>/v1/...`); that `/v1` is dropped.
 */
export async function fetchThroughApi(
  req: FetchArg,
  environment: Record<string, unknown>,
  limits: Limits,
  signal: AbortSignal,
  tokens: InvocationTokens,
): Promise<FetchResult | undefined> {
  const endpoint = typeof environment.apiEndpoint === 'string' ? environment.apiEndpoint : '';
  let base: URL;
  let url: URL;
  try {
    base = new URL(endpoint);
    url = new URL(req.url);
  } catch {
    return undefined;
  }
  const basePath = base.pathname.replace(/\/$/, '');
  if (url.origin !== base.origin || !(url.pathname === basePath || url.pathname.startsWith(`${basePath}/`))) return undefined;
  const auth = req.headers.find(([k]) => k.toLowerCase() === 'authorization')?.[1] ?? '';
  const token = /^Bearer\s+(\S+)$/i.exec(auth.trim())?.[1];
  if (!token || !tokens.has(token)) return undefined;
  const rest = url.pathname.slice(basePath.length).replace(/^\/v1(?=\/)/, '');
  const body = req.body?.byteLength ? new TextDecoder().decode(req.body) : null;
  const r = await performApi({ method: req.method.toUpperCase(), path: `${basePath}${rest}${url.search}`, body, token }, environment, limits, signal, tokens);
  return {
    status: r.status,
    statusText: statusTexts[r.status] ?? '',
    headers: [['content-type', r.contentType]],
    body: new TextEncoder().encode(r.body),
    url: url.href,
    redirected: false,
  };
}

const hashes: Record<string, string> = { 'SHA-1': 'sha1', 'SHA-256': 'sha256', 'SHA-384': 'sha384', 'SHA-512': 'sha512' };

function bytesArg(v: unknown, what: string, max = 64 * 1024 * 1024): Uint8Array {
  if (!(v instanceof Uint8Array) || v.byteLength > max) throw new OpError(`${what} must be bytes`);
  return v;
}

function hashArg(v: unknown): string {
  const h = typeof v === 'string' ? hashes[v] : undefined;
  if (!h) throw new OpError('unsupported hash', 'NotSupportedError');
  return h;
}

/**
 * Data past this many bytes is hashed on libuv's threads (webcrypto's jobs), not the event loop's:
 * a guest asking for digests of tens of MB would otherwise hold the loop for every other request
 * (a second reader's repro: 164-220 ms of stalls an invocation, charged to no call).
 */
const OFF_LOOP_BYTES = 256 * 1024;
/**
 * At most this many of those at once in the process, the rest waiting their turn in order: libuv's
 * pool has four threads, and DNS lookups (every fetch and webhook to a host name) and file reads
 * share them; a guest queuing large digests must not take them all.
 */
const OFF_LOOP_AT_ONCE = 2;
let offLoopRunning = 0;
const offLoopWaiting: Array<() => void> = [];

/** Off-loop hashes running now (for tests). */
export function offLoopHashes(): number {
  return offLoopRunning;
}

async function offLoop<T>(work: () => Promise<T>): Promise<T> {
  if (offLoopRunning >= OFF_LOOP_AT_ONCE) await new Promise<void>((r) => offLoopWaiting.push(r));
  else offLoopRunning++;
  try {
    return await work();
  } finally {
    // The slot passes straight to the next in line (the count stays), or is given up.
    const next = offLoopWaiting.shift();
    if (next) next();
    else offLoopRunning--;
  }
}

/** crypto.subtle work: digest, HMAC sign, HMAC verify (constant-time); a promise for large data (see OFF_LOOP_BYTES). */
export function performCrypto(op: string, arg: unknown): Uint8Array | boolean | Promise<Uint8Array | boolean> {
  const a = (arg ?? {}) as Record<string, unknown>;
  const hash = hashArg(a.hash);
  const data = bytesArg(a.data, 'data');
  if (op === 'digest')
    return data.byteLength > OFF_LOOP_BYTES
      ? offLoop(() => webcrypto.subtle.digest(a.hash as string, data)).then((d) => new Uint8Array(d))
      : new Uint8Array(createHash(hash).update(data).digest());
  const key = bytesArg(a.key, 'key', 1024 * 1024);
  const verify = (mac: Uint8Array) => {
    if (op === 'hmac') return mac;
    const signature = bytesArg(a.signature, 'signature', 1024);
    return signature.byteLength === mac.byteLength && timingSafeEqual(signature, mac);
  };
  // (webcrypto refuses an empty HMAC key, which Node's createHmac takes: those stay here.)
  if (data.byteLength > OFF_LOOP_BYTES && key.byteLength > 0)
    return offLoop(async () => {
      const k = await webcrypto.subtle.importKey('raw', key, { name: 'HMAC', hash: a.hash as string }, false, ['sign']);
      return webcrypto.subtle.sign('HMAC', k, data);
    }).then((mac) => verify(new Uint8Array(mac)));
  return verify(new Uint8Array(createHmac(hash, key).update(data).digest()));
}
