/**
 * The public endpoints' lane: an HTTP/1.1 request to an integration's public endpoint is answered
 * from Node's request as it comes, without h3's event, router and middleware or srvx's Request and
 * Response (the hot path: about a seventh of a hello request's CPU went there, measured A/B with
 * scripts/bench/public-stages.ts's server).
 *
 * The lane takes only what it reads the same way the app would: HTTP/1.x, a method the public
 * routes take, a Host header srvx accepts as it is, and a target in origin form that srvx would
 * not normalise (no dot segment, no character it escapes). Anything else (HTTP/2, odd targets)
 * goes to the app, whose public routes run the same handler on the same PublicRequest built from
 * srvx's Request: one answer whichever way a request came.
 */
import { STATUS_CODES, type IncomingMessage, type ServerResponse } from 'node:http';
import type { TLSSocket } from 'node:tls';
import { bodyTooLarge, clientGone } from './body.ts';
import { COOKIE_PREFIX } from './origins.ts';

/** A public-endpoint request, as the integration's fetch is handed it. */
export interface PublicRequest {
  method: string;
  /** Absolute, as srvx's Request.url says it. */
  url: string;
  /** Lower-case names, in the order they came; our own cookies left out (see guestCookie). */
  headers: Array<[string, string]>;
}

/** What the integration answered, as it leaves (status, headers, body bytes or text). */
export interface PublicAnswer {
  status: number;
  headers: Array<[string, string]>;
  /** null for a status that has no body. */
  body: Uint8Array | string | null;
}

/** What the runtime module hands the lane (services.publicLane). */
export interface PublicLane {
  /** The route pattern a public request's path matches (metrics' label), or undefined when it is not one. */
  route(pathname: string): string | undefined;
  /**
   * Answer it (the handler the app's public routes run too); throws the errors the app would
   * answer. `body` reads the request's body up to a limit (413 beyond).
   */
  answer(req: PublicRequest, pathname: string, body: (limit: number) => Promise<Uint8Array> | Uint8Array): Promise<PublicAnswer>;
}

export interface LaneHooks {
  lane(): PublicLane | undefined;
  /** The app's answer to a thrown error (http/app.ts errorAnswer). */
  errorAnswer(error: unknown, method: string, url: string): Response;
  onResponse?(method: string, route: string, status: number): void;
  /** Writes a web Response to Node's (srvx's sendNodeResponse): error answers only. */
  send(res: ServerResponse, response: Response): unknown;
}

/** Any method a public endpoint is called with (the lane's, and the app's public routes'). */
export const PUBLIC_METHODS = ['GET', 'PUT', 'POST', 'DELETE', 'OPTIONS', 'HEAD', 'PATCH'] as const;
const LANE_METHODS = new Set<string>(PUBLIC_METHODS);
const PREFIX = '/v1/integrations/';

// srvx (FastURL, NodeRequestURL) builds the URL from these as they are unless they match: the lane
// leaves those to it. A dot segment (plain or escaped), a backslash and what the URL parser escapes.
const PATH_NORMALISED = /(?:^|\/)(?:\.|\.\.|%2e|%2e\.|\.%2e|%2e%2e)(?:\/|$)|[\\^#"<>{}`\x00-\x20\x7f-\uffff]/i;
const SEARCH_NORMALISED = /[#"'<>\x00-\x20\x7f-\uffff]/;
// The Host srvx keeps (any other becomes "_invalid_" there).
const HOST = /^(\[(?:[A-Fa-f0-9:.]+)\]|(?:[A-Za-z0-9_-]+\.)*[A-Za-z0-9_-]+|(?:\d{1,3}\.){3}\d{1,3})(:\d{1,5})?$/;

/** The Cookie header a guest sees: none of ours (the console's session above all). */
export function guestCookie(value: string): string | undefined {
  if (!value.includes(COOKIE_PREFIX)) return value;
  const kept = value
    .split(';')
    .map((p) => p.trim())
    .filter(
      (p) =>
        p &&
        !p
          .slice(0, Math.max(0, p.indexOf('=')))
          .trim()
          .startsWith(COOKIE_PREFIX),
    );
  return kept.length ? kept.join('; ') : undefined;
}

/**
 * A header list for a guest from a flat name, value, name, value… list: names in lower case, our
 * cookies left out. Several Cookie lines are one, joined with "; " as Node and the app's Headers
 * join them (a guest's Headers would join them with ", ", which no cookie parser splits).
 */
function guestHeaders(flat: string[]): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  let cookies: string | undefined;
  let at = -1;
  for (let i = 0; i < flat.length; i += 2) {
    const name = flat[i].toLowerCase();
    if (name !== 'cookie') out.push([name, flat[i + 1]]);
    else if (cookies === undefined) {
      cookies = flat[i + 1];
      at = out.length;
    } else cookies = `${cookies}; ${flat[i + 1]}`;
  }
  const kept = cookies === undefined ? undefined : guestCookie(cookies);
  if (kept !== undefined) out.splice(at, 0, ['cookie', kept]);
  return out;
}

/** A header's value as Headers.get gives it (repeated ones joined), or null. */
export function headerOf(req: PublicRequest, name: string): string | null {
  let value: string | null = null;
  for (const [k, v] of req.headers) if (k === name) value = value === null ? v : `${value}, ${v}`;
  return value;
}

/** The app's way in (h3's event.req, srvx's Request): the same PublicRequest the lane builds. */
export function publicRequestOf(req: Request): PublicRequest {
  const flat: string[] = [];
  req.headers.forEach((v, k) => flat.push(k, v));
  return { method: req.method, url: req.url, headers: guestHeaders(flat) };
}

/**
 * Node's handler with the lane in front of `next` (the app's): what the lane does not take, or
 * takes while no lane is attached (the runtime module not started), goes to `next` untouched.
 */
export function withPublicLane(next: (req: IncomingMessage, res: ServerResponse) => unknown, hooks: LaneHooks) {
  return function handle(req: IncomingMessage, res: ServerResponse): unknown {
    const target = req.url;
    if (req.httpVersionMajor !== 1 || !target?.startsWith(PREFIX) || !LANE_METHODS.has(req.method!)) return next(req, res);
    const lane = hooks.lane();
    const host = req.headers.host;
    if (!lane || !host || !HOST.test(host)) return next(req, res);
    const q = target.indexOf('?');
    const pathname = q === -1 ? target : target.slice(0, q);
    if (PATH_NORMALISED.test(pathname) || (q !== -1 && SEARCH_NORMALISED.test(target.slice(q)))) return next(req, res);
    const route = lane.route(pathname);
    if (!route) return next(req, res);
    const url = `${(req.socket as TLSSocket).encrypted ? 'https:' : 'http:'}//${host}${target}`;
    return serve(lane, hooks, req, res, { method: req.method!, url, headers: guestHeaders(req.rawHeaders) }, pathname, route);
  };
}

async function serve(lane: PublicLane, hooks: LaneHooks, req: IncomingMessage, res: ServerResponse, request: PublicRequest, pathname: string, route: string) {
  try {
    let answer: PublicAnswer | undefined;
    let failed: Response | undefined;
    try {
      answer = await lane.answer(request, pathname, (limit) => readBody(req, limit));
    } catch (e) {
      failed = hooks.errorAnswer(e, request.method, request.url);
    }
    // Counted as the app counts, before the write (whose end never comes for a client gone).
    hooks.onResponse?.(request.method, route, answer ? answer.status : failed!.status);
    if (res.destroyed) return;
    if (answer) write(res, answer);
    else void Promise.resolve(hooks.send(res, failed!)).catch(() => res.destroy());
  } catch {
    // Nothing of the above should throw; if it did, the connection goes rather than the process.
    res.destroy();
  }
}

/** The answer in one write where Node can (head and body), as srvx writes a FastResponse. */
function write(res: ServerResponse, a: PublicAnswer): void {
  const flat: string[] = [];
  let type = false;
  let length = false;
  for (const [k, v] of a.headers) {
    const name = k.toLowerCase();
    if (name === 'content-type') type = true;
    else if (name === 'content-length') length = true;
    flat.push(name, v);
  }
  if (typeof a.body === 'string') {
    if (!type) flat.push('content-type', 'text/plain; charset=UTF-8');
    if (!length) flat.push('content-length', String(Buffer.byteLength(a.body)));
  } else if (a.body && !length) flat.push('content-length', String(a.body.byteLength));
  res.writeHead(a.status, STATUS_CODES[a.status] ?? '', flat);
  if (a.body === null) res.end();
  else res.end(a.body);
}

const EMPTY = new Uint8Array();

/** The body up to `limit` bytes, whatever Content-Length claims (the rule of http/body.ts's readBodyLimited). */
function readBody(req: IncomingMessage, limit: number): Promise<Uint8Array> | Uint8Array {
  const length = req.headers['content-length'];
  const declared = Number(length ?? NaN);
  if (Number.isFinite(declared) && declared > limit) throw bodyTooLarge(limit);
  // Neither header: a request without a body (RFC 9112 6.3), the usual public GET.
  if (req.headers['transfer-encoding'] === undefined && (length === undefined || declared === 0)) return EMPTY;
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const done = (e: unknown, body?: Uint8Array) => {
      req.off('data', data).off('end', end).off('error', closed).off('close', closed);
      if (e) reject(e);
      else resolve(body!);
    };
    // Past the limit the rest is left unread: the 413 closes the connection (its Connection: close).
    const data = (chunk: Buffer) => {
      size += chunk.byteLength;
      if (size > limit) done(bodyTooLarge(limit));
      else chunks.push(chunk);
    };
    const end = () => done(undefined, chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, size));
    // The client went (ECONNRESET and the like): its error, not the store's (see clientGone).
    const closed = () => done(clientGone());
    req.on('data', data).on('end', end).on('error', closed).on('close', closed);
  });
}
