/** Request per the Fetch standard, as a server runtime sees it (absolute URLs only, no CORS). */
import { AbortSignal, newSignal, signalAbort } from './abort.ts';
import { cloneBody, extractBody, getBody, installBodyMixin, setBody, type Body, type BodyInit } from './body.ts';
import { Headers, headersFrom, type HeadersInit } from './headers.ts';
import { slot } from './slot.ts';
import { URL } from './url.ts';

export interface RequestInit {
  method?: string;
  headers?: HeadersInit;
  body?: BodyInit | null;
  redirect?: 'follow' | 'error' | 'manual';
  signal?: AbortSignal | null;
  referrer?: string;
  referrerPolicy?: string;
  mode?: string;
  credentials?: string;
  cache?: string;
  integrity?: string;
  keepalive?: boolean;
  duplex?: string;
  window?: null;
}

const tokenRe = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const normalised = new Set(['DELETE', 'GET', 'HEAD', 'OPTIONS', 'POST', 'PUT']);
const forbiddenMethods = new Set(['CONNECT', 'TRACE', 'TRACK']);
const enums: Record<string, string[]> = {
  redirect: ['follow', 'error', 'manual'],
  mode: ['navigate', 'same-origin', 'no-cors', 'cors'],
  credentials: ['omit', 'same-origin', 'include'],
  cache: ['default', 'no-store', 'reload', 'no-cache', 'force-cache', 'only-if-cached'],
  referrerPolicy: [
    '',
    'no-referrer',
    'no-referrer-when-downgrade',
    'same-origin',
    'origin',
    'strict-origin',
    'origin-when-cross-origin',
    'strict-origin-when-cross-origin',
    'unsafe-url',
  ],
  duplex: ['half'],
};

interface State {
  method: string;
  url: string;
  headers: Headers;
  redirect: string;
  /** Made on first access unless the request follows another signal. */
  signal: AbortSignal | null;
  referrer: string;
  referrerPolicy: string;
  mode: string;
  credentials: string;
  cache: string;
  integrity: string;
  keepalive: boolean;
}
const states = slot<State>();

function enumValue(name: string, v: unknown): string {
  const s = String(v);
  if (!enums[name].includes(s)) throw new TypeError(`Failed to construct 'Request': '${s}' is not a valid value for ${name}`);
  return s;
}

function parseUrl(input: unknown): string {
  let url: URL;
  try {
    url = new URL(String(input));
  } catch {
    throw new TypeError(`Failed to construct 'Request': Invalid URL ${JSON.stringify(String(input))} (URLs must be absolute here)`);
  }
  if (url.username || url.password)
    throw new TypeError(`Failed to construct 'Request': Request cannot be constructed from a URL that includes credentials: ${url.href}`);
  return url.href;
}

// biome-ignore lint/suspicious/noUnsafeDeclarationMerging: the interface at the end types the Body mixin installBodyMixin adds
export class Request {
  constructor(input: Request | string | URL, init: RequestInit = {}) {
    if (arguments.length === 0) throw new TypeError("Failed to construct 'Request': 1 argument required");
    if (init !== undefined && init !== null && typeof init !== 'object') throw new TypeError("Failed to construct 'Request': init must be an object");
    init ??= {};
    const from = input instanceof Request ? states.get(input)! : null;
    const s: State = from
      ? { ...from, headers: from.headers }
      : {
          method: 'GET',
          url: parseUrl(input),
          headers: new Headers(),
          redirect: 'follow',
          signal: null,
          referrer: 'about:client',
          referrerPolicy: '',
          mode: 'cors',
          credentials: 'same-origin',
          cache: 'default',
          integrity: '',
          keepalive: false,
        };
    if (init.window !== undefined && init.window !== null) throw new TypeError("Failed to construct 'Request': 'window' can only be null");
    if (init.mode !== undefined) {
      s.mode = enumValue('mode', init.mode);
      if (s.mode === 'navigate') throw new TypeError("Failed to construct 'Request': cannot construct a Request with a RequestInit whose mode is 'navigate'");
    }
    if (init.referrer !== undefined) {
      const r = String(init.referrer);
      if (r === '') s.referrer = 'no-referrer';
      else {
        try {
          s.referrer = new URL(r).href;
        } catch {
          throw new TypeError(`Failed to construct 'Request': invalid referrer ${JSON.stringify(r)}`);
        }
      }
    }
    if (init.referrerPolicy !== undefined) s.referrerPolicy = enumValue('referrerPolicy', init.referrerPolicy);
    if (init.credentials !== undefined) s.credentials = enumValue('credentials', init.credentials);
    if (init.cache !== undefined) s.cache = enumValue('cache', init.cache);
    if (s.cache === 'only-if-cached' && s.mode !== 'same-origin')
      throw new TypeError("Failed to construct 'Request': 'only-if-cached' can be set only with 'same-origin' mode");
    if (init.redirect !== undefined) s.redirect = enumValue('redirect', init.redirect);
    if (init.integrity !== undefined) s.integrity = String(init.integrity);
    if (init.keepalive !== undefined) s.keepalive = !!init.keepalive;
    if (init.duplex !== undefined) enumValue('duplex', init.duplex);
    if (init.method !== undefined) {
      const m = String(init.method);
      if (!tokenRe.test(m)) throw new TypeError(`Failed to construct 'Request': '${m}' is not a valid HTTP method`);
      const upper = m.toUpperCase();
      if (forbiddenMethods.has(upper)) throw new TypeError(`Failed to construct 'Request': '${m}' HTTP method is unsupported`);
      s.method = normalised.has(upper) ? upper : m;
    }
    // The request's signal follows init.signal, else the input request's signal.
    const follow = init.signal !== undefined ? init.signal : from?.signal;
    s.signal = null;
    if (follow !== undefined && follow !== null) {
      if (!(follow instanceof AbortSignal)) throw new TypeError("Failed to construct 'Request': member signal is not of type AbortSignal");
      const signal = newSignal();
      if (follow.aborted) signalAbort(signal, follow.reason);
      else follow.addEventListener('abort', () => signalAbort(signal, follow.reason), { once: true });
      s.signal = signal;
    }
    s.headers = new Headers(init.headers !== undefined ? init.headers : from ? from.headers : undefined);
    const inputBody = input instanceof Request ? getBody(input) : null;
    if ((init.body !== undefined && init.body !== null) || inputBody) {
      if (s.method === 'GET' || s.method === 'HEAD') throw new TypeError("Failed to construct 'Request': Request with GET/HEAD method cannot have body.");
    }
    if (init.body !== undefined && init.body !== null) {
      const ex = extractBody(init.body);
      if (ex.contentType && !s.headers.has('content-type')) s.headers.set('content-type', ex.contentType);
      setBody(this, ex.body);
    } else if (inputBody && init.body === undefined) {
      if (inputBody.used || (inputBody.stream?.locked ?? false))
        throw new TypeError("Failed to construct 'Request': Cannot construct a Request with a Request object that has already been used.");
      setBody(this, { ...inputBody });
      inputBody.used = true; // the body moves to the new request
    } else setBody(this, null);
    states.set(this, s);
  }
  get method(): string {
    return states.get(this)!.method;
  }
  get url(): string {
    return states.get(this)!.url;
  }
  get headers(): Headers {
    return states.get(this)!.headers;
  }
  get redirect(): string {
    return states.get(this)!.redirect;
  }
  get signal(): AbortSignal {
    const s = states.get(this)!;
    s.signal ??= newSignal();
    return s.signal;
  }
  get destination(): string {
    return '';
  }
  get referrer(): string {
    const r = states.get(this)!.referrer;
    return r === 'no-referrer' ? '' : r;
  }
  get referrerPolicy(): string {
    return states.get(this)!.referrerPolicy;
  }
  get mode(): string {
    return states.get(this)!.mode;
  }
  get credentials(): string {
    return states.get(this)!.credentials;
  }
  get cache(): string {
    return states.get(this)!.cache;
  }
  get integrity(): string {
    return states.get(this)!.integrity;
  }
  get keepalive(): boolean {
    return states.get(this)!.keepalive;
  }
  get isReloadNavigation(): boolean {
    return false;
  }
  get isHistoryNavigation(): boolean {
    return false;
  }
  get duplex(): string {
    return 'half';
  }
  clone(): Request {
    const s = states.get(this)!;
    const body = cloneBody(this);
    const copy = new Request(s.url, {
      method: s.method,
      headers: s.headers,
      redirect: s.redirect as 'follow',
      signal: this.signal,
      cache: s.cache,
      credentials: s.credentials,
      mode: s.mode === 'navigate' ? 'same-origin' : s.mode,
      referrerPolicy: s.referrerPolicy,
      integrity: s.integrity,
      keepalive: s.keepalive,
    });
    states.get(copy)!.referrer = s.referrer;
    states.get(copy)!.mode = s.mode;
    setBody(copy, body);
    return copy;
  }
  get [Symbol.toStringTag](): string {
    return 'Request';
  }
}
installBodyMixin(Request.prototype);
// The mixin's members, as the class's type (installBodyMixin adds them to the prototype above).
export interface Request extends Body {}

/**
 * Internal: the incoming request of a fetch event, from values the host already validated (a URL
 * in canonical form, lower-case header names from Node's HTTP parser). Skips re-parsing.
 */
export function incomingRequest(url: string, method: string, headers: Array<[string, string]>, body: Uint8Array | null): Request {
  const r = Object.create(Request.prototype) as Request;
  states.set(r, {
    method,
    url,
    headers: headersFrom(headers),
    redirect: 'follow',
    signal: null,
    referrer: 'about:client',
    referrerPolicy: '',
    mode: 'cors',
    credentials: 'same-origin',
    cache: 'default',
    integrity: '',
    keepalive: false,
  });
  setBody(r, body ? { bytes: body, stream: null, used: false } : null);
  return r;
}
