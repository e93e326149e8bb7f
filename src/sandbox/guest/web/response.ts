/** Response per the Fetch standard, including Response.json / redirect / error. */
import { cloneBody, extractBody, getBody, installBodyMixin, setBody, type Body, type BodyInit } from './body.ts';
import { Headers, headerList, setGuard, type HeadersInit } from './headers.ts';
import { slot } from './slot.ts';
import { URL } from './url.ts';

export interface ResponseInit {
  status?: number;
  statusText?: string;
  headers?: HeadersInit;
}

interface State {
  type: 'default' | 'basic' | 'error';
  status: number;
  statusText: string;
  headers: Headers;
  url: string;
  redirected: boolean;
}
const states = slot<State>();
const nullBodyStatus = new Set([101, 103, 204, 205, 304]);
const redirectStatus = new Set([301, 302, 303, 307, 308]);

function initialise(r: Response, init: ResponseInit | undefined, body: ReturnType<typeof extractBody> | null): void {
  if (init !== undefined && init !== null && typeof init !== 'object') throw new TypeError("Failed to construct 'Response': init must be an object");
  const status = init?.status === undefined ? 200 : Number(init.status);
  if (!Number.isInteger(status) || status < 200 || status > 599)
    throw new RangeError(`Failed to construct 'Response': The status provided (${init?.status}) is outside the range [200, 599].`);
  const statusText = init?.statusText === undefined ? '' : String(init.statusText);
  if (!/^[\t\x20-\x7e\x80-\xff]*$/.test(statusText)) throw new TypeError("Failed to construct 'Response': Invalid statusText");
  const headers = new Headers(init?.headers);
  states.set(r, { type: 'default', status, statusText, headers, url: '', redirected: false });
  if (body?.body) {
    if (nullBodyStatus.has(status)) throw new TypeError(`Failed to construct 'Response': Response with null body status (${status}) cannot have body`);
    if (body.contentType && !headers.has('content-type')) headers.set('content-type', body.contentType);
  }
  setBody(r, body?.body ?? null);
}

// biome-ignore lint/suspicious/noUnsafeDeclarationMerging: the interface at the end types the Body mixin installBodyMixin adds
export class Response {
  constructor(body: BodyInit | null = null, init: ResponseInit = {}) {
    initialise(this, init, body === null || body === undefined ? null : extractBody(body));
  }
  static error(): Response {
    const r = new Response(null, { status: 200 });
    const s = states.get(r)!;
    s.type = 'error';
    s.status = 0;
    setGuard(s.headers, 'immutable');
    return r;
  }
  static redirect(url: string | URL, status = 302): Response {
    let parsed: string;
    try {
      parsed = new URL(String(url)).href;
    } catch {
      throw new TypeError(`Failed to execute 'redirect' on 'Response': Invalid URL ${JSON.stringify(String(url))}`);
    }
    if (!redirectStatus.has(Number(status))) throw new RangeError(`Failed to execute 'redirect' on 'Response': Invalid status code ${status}`);
    const r = new Response(null, { status: Number(status), headers: { location: parsed } });
    setGuard(states.get(r)!.headers, 'immutable');
    return r;
  }
  static json(data: unknown, init: ResponseInit = {}): Response {
    const text = JSON.stringify(data);
    if (text === undefined) throw new TypeError("Failed to execute 'json' on 'Response': the data is not JSON-serialisable");
    const r = Object.create(Response.prototype) as Response;
    const ex = extractBody(text);
    ex.contentType = 'application/json';
    initialise(r, init, ex);
    return r;
  }
  get type(): string {
    return states.get(this)!.type;
  }
  get url(): string {
    return states.get(this)!.url;
  }
  get redirected(): boolean {
    return states.get(this)!.redirected;
  }
  get status(): number {
    return states.get(this)!.status;
  }
  get ok(): boolean {
    const s = states.get(this)!.status;
    return s >= 200 && s <= 299;
  }
  get statusText(): string {
    return states.get(this)!.statusText;
  }
  get headers(): Headers {
    return states.get(this)!.headers;
  }
  clone(): Response {
    const body = cloneBody(this);
    const s = states.get(this)!;
    const copy = Object.create(Response.prototype) as Response;
    states.set(copy, { ...s, headers: new Headers(s.headers) });
    if (s.type !== 'default') setGuard(states.get(copy)!.headers, 'immutable');
    setBody(copy, body);
    return copy;
  }
  get [Symbol.toStringTag](): string {
    return 'Response';
  }
}
installBodyMixin(Response.prototype);
// The mixin's members, as the class's type (installBodyMixin adds them to the prototype above).
export interface Response extends Body {}

/** Internal: a response received by fetch (any status the host saw, immutable headers, url). */
export function fetchedResponse(r: {
  status: number;
  statusText: string;
  headers: Array<[string, string]>;
  body: Uint8Array;
  url: string;
  redirected: boolean;
}): Response {
  const res = Object.create(Response.prototype) as Response;
  const headers = new Headers(r.headers);
  setGuard(headers, 'immutable');
  states.set(res, { type: 'basic', status: r.status, statusText: r.statusText, headers, url: r.url, redirected: r.redirected });
  setBody(res, nullBodyStatus.has(r.status) && r.body.byteLength === 0 ? null : { bytes: r.body, stream: null, used: false });
  return res;
}

/** Internal: status, headers and body bytes of a response an integration returned. */
export function responseParts(r: Response): { status: number; headers: Array<[string, string]>; body: ReturnType<typeof getBody> } {
  const s = states.get(r);
  if (!s) throw new TypeError('not a Response');
  return { status: s.status, headers: headerList(s.headers), body: getBody(r) };
}
