/**
 * Dispatch of one envelope by event type (spec 4.1): `fetch` -> the definition's fetch handler with
 * a standard Request rebuilt from event.request and the raw body; `ui_render` -> the component with
 * that componentId (404 when none); any other type, and a `ui_render` the platform sends as an
 * event (`toEvents`), -> the events map (200 "OK"; 406 when no handler). Errors: ExposableError -> its status with `{ error: message }`; anything else -> 500
 * `{"error":"Internal server error"}` with the stack reported to the host only.
 */
import { hostFns, resetPending } from '../bridge.ts';
import { console } from '../web/console.ts';
import { addEntropy } from '../web/crypto.ts';
import { consume, consumeText } from '../web/body.ts';
import { utf8Encode } from '../web/encoding.ts';
import { Request, incomingRequest } from '../web/request.ts';
import { Response, responseParts } from '../web/response.ts';
import { resetTimers } from '../web/timers.ts';
import { URL } from '../web/url.ts';
import { createAPIClient } from './api.ts';
import { ExposableError } from './errors.ts';
import {
  integrationContext,
  UNSUPPORTED_EVENTS,
  UNSUPPORTED_HANDLERS,
  type ComponentDefinition,
  type Handler,
  type IntegrationDefinition,
} from './integration.ts';

export interface DispatchInput {
  event: { type: string; [k: string]: any };
  /** Absent when the host hands it over on first read (see HostFunctions.environment). */
  environment?: Record<string, unknown>;
  body: Uint8Array | null;
  /** Random bytes for crypto (absent inline: then they come from the host when needed). */
  entropy?: Uint8Array;
  responseBodyLimit: number;
  logLines: number;
  /** The host checked event.request: canonical absolute URL, valid lower-case headers, token method. */
  canonical: boolean;
  /** To the `events` handlers whatever the type (the platform's `ui_render` event, not a render). */
  toEvents?: boolean;
}

export interface DispatchOutput {
  status: number;
  headers: Array<[string, string]>;
  /** A string when the Response was made from one (cheaper to copy out), bytes otherwise. */
  body: Uint8Array | string;
  error?: { message: string; stack?: string };
  /** Set when the response body went past the limit: the host answers with a limit breach. */
  limit?: string;
  waitUntil: number;
}

let definition: IntegrationDefinition | null = null;
let waitUntils: Promise<unknown>[] = [];

/** Called once by the host with the integration module's namespace. */
export function register(namespace: Record<string, unknown>): void {
  const def = (namespace?.default ?? null) as IntegrationDefinition | null;
  if (!def || typeof def !== 'object') {
    throw new TypeError('the script has no default export: end it with `export default createIntegration({ fetch, components, events })`');
  }
  if (def.fetch !== undefined && typeof def.fetch !== 'function') throw new TypeError("the default export's `fetch` is not a function");
  definition = def;
}

export function describe(): { fetch: boolean; components: string[]; events: string[]; unsupported: Array<{ handler: string; reason: string }> } {
  const d = definition!;
  return {
    fetch: typeof d.fetch === 'function',
    components: (d.components ?? []).map((c) => String(c.componentId)),
    events: Object.keys(d.events ?? {}),
    unsupported: (Array.isArray(d.unsupported) ? d.unsupported : []).map((handler) => ({
      handler: String(handler),
      reason: ownValue(UNSUPPORTED_HANDLERS, handler) ?? '',
    })),
  };
}

function makeContext(given: Record<string, unknown> | undefined, seq: number) {
  // context.api acts as the installation (else the integration); context.integration.api always as
  // the integration, as GitBook's runtime has them. Each is made on first use: a client is dozens
  // of objects, and most invocations (a public request answered at once) never touch one. So is
  // the environment when the host did not send it: asked of the host once, on first read.
  let api: ReturnType<typeof createAPIClient> | undefined;
  let integration: ReturnType<typeof integrationContext> | undefined;
  let environment = given;
  const env = () => (environment ??= hostFns().environment(seq));
  return {
    get environment() {
      return env();
    },
    set environment(v) {
      environment = v;
    },
    get api() {
      return (api ??= createAPIClient({ environment: env() }));
    },
    set api(v) {
      api = v;
    },
    get integration() {
      return (integration ??= integrationContext(createAPIClient({ as: 'integration', environment: env() })));
    },
    set integration(v) {
      integration = v;
    },
    waitUntil(promise: unknown): void {
      waitUntils.push(Promise.resolve(promise));
    },
    log: console,
  };
}

/** `record[key]` when it is the record's own property, else undefined (never an inherited member). */
function ownValue<T>(record: Record<string, T>, key: unknown): T | undefined {
  return typeof key === 'string' && Object.hasOwn(record, key) ? record[key] : undefined;
}

function json(data: unknown, status: number): Response {
  return Response.json(data, { status });
}

async function route(input: DispatchInput, context: ReturnType<typeof makeContext>): Promise<unknown> {
  const def = definition!;
  const event = input.event;
  if (event.type === 'fetch') {
    if (typeof def.fetch !== 'function') return json({ error: 'this integration has no fetch handler' }, 404);
    const r = event.request ?? {};
    const method = String(r.method ?? 'GET').toUpperCase();
    const hasBody = input.body !== null && input.body.byteLength > 0 && method !== 'GET' && method !== 'HEAD';
    const body = hasBody ? input.body : null;
    const request = input.canonical ? incomingRequest(r.url, method, r.headers, body) : new Request(String(r.url), { method, headers: r.headers ?? [], body });
    return def.fetch(request, context);
  }
  if (event.type === 'ui_render' && !input.toEvents) {
    const component = (def.components ?? []).find((c: ComponentDefinition) => c.componentId === event.componentId);
    if (!component) return json({ error: `no component with componentId "${String(event.componentId)}"` }, 404);
    return render(component, event, context);
  }
  // Own keys only, here and below: an event type is the caller's text, and `constructor`,
  // `toString` or `__proto__` would otherwise find Object.prototype's members.
  const unsupported = ownValue(UNSUPPORTED_EVENTS, event.type);
  if (unsupported) {
    const declared = Array.isArray(def.unsupported) && def.unsupported.includes(unsupported);
    return json(
      {
        error: `"${event.type}" events are not supported here${declared ? ` (the integration's ${unsupported} handler does not run)` : ''}: ${UNSUPPORTED_HANDLERS[unsupported]}`,
      },
      501,
    );
  }
  const h = def.events ? ownValue(def.events, event.type) : undefined;
  if (!h) return json({ error: `this integration has no handler for event "${event.type}"` }, 406);
  const handlers: Handler[] = Array.isArray(h) ? h : [h];
  await Promise.all(handlers.map((fn) => fn(event, context)));
  return new Response('OK', { status: 200, headers: { 'content-type': 'text/plain;charset=UTF-8' } });
}

/** A component's element: what render and action see (GitBook's ComponentInstance). */
interface Element {
  props: any;
  state: any;
  context: any;
  setCache(cache: { maxAge: number }): void;
  dynamicState(key: string): { $state: string };
}

async function render(component: ComponentDefinition, event: DispatchInput['event'], context: ReturnType<typeof makeContext>): Promise<Response> {
  const props = event.props ?? {};
  let maxAge: number | undefined;
  const init = component.initialState;
  // An initialState object is copied: one render's changes must not leak into the next.
  const initial = () => (typeof init === 'function' ? init(props, event.context, context) : init ? JSON.parse(JSON.stringify(init)) : {});
  let element: Element = {
    props,
    state: event.state ?? (await initial()),
    context: event.context,
    setCache(cache) {
      const n = Math.trunc(Number(cache?.maxAge));
      if (!Number.isFinite(n) || n < 0) throw new TypeError('setCache({ maxAge }): maxAge must be a number of seconds, 0 or more');
      maxAge = n;
    },
    dynamicState: (key) => ({ $state: String(key) }),
  };
  const answer = (output: unknown) =>
    Response.json(output, { status: 200, headers: maxAge !== undefined ? { 'cache-control': `max-age=${maxAge}` } : undefined });
  if (event.action && component.action) {
    const result = (await component.action(element, event.action, context)) as
      | { type?: string; state?: unknown; props?: unknown; returnValue?: unknown }
      | undefined;
    // GitBook: an action that completes (a modal or a configuration flow) answers its result, unrendered.
    if (result && typeof result === 'object' && result.type === 'complete')
      return answer(result.returnValue === undefined ? { type: 'complete' } : { type: 'complete', returnValue: result.returnValue });
    // The result is merged into the element: a returned `state` replaces the state wholesale.
    if (result && typeof result === 'object') {
      if ('state' in result) element = { ...element, state: result.state };
      if ('props' in result) element = { ...element, props: result.props };
    }
  }
  const markup = await component.render(element, context);
  return answer({ type: 'element', state: element.state, props: element.props, element: markup });
}

function isExposable(err: unknown): err is ExposableError {
  return (
    err instanceof ExposableError || (!!err && typeof err === 'object' && (err as any).name === 'ExposableError' && typeof (err as any).statusCode === 'number')
  );
}

function describeThrown(err: unknown): { message: string; stack?: string } {
  if (err instanceof Error || (err && typeof err === 'object' && 'message' in err)) {
    const e = err as Error;
    return { message: `${e.name ?? 'Error'}: ${String(e.message)}`, stack: typeof e.stack === 'string' ? e.stack : undefined };
  }
  let text: string;
  try {
    text = typeof err === 'string' ? err : (JSON.stringify(err) ?? String(err));
  } catch {
    text = String(err);
  }
  return { message: `a non-Error value was thrown: ${text}` };
}

async function serialise(res: Response, limit: number): Promise<DispatchOutput> {
  const parts = responseParts(res);
  let body: Uint8Array | string = new Uint8Array(0);
  if (parts.body) {
    try {
      body = consumeText(res, limit) ?? (await consume(res, limit));
    } catch (e) {
      if (/larger than/.test(String((e as Error).message))) return { status: 500, headers: [], body: new Uint8Array(0), limit: 'response_body', waitUntil: 0 };
      throw e;
    }
  }
  return { status: parts.status, headers: parts.headers, body, waitUntil: 0 };
}

function errorOutput(err: unknown): DispatchOutput {
  if (isExposable(err)) {
    return { status: err.statusCode, headers: [['content-type', 'application/json']], body: JSON.stringify({ error: err.message }), waitUntil: 0 };
  }
  return {
    status: 500,
    headers: [['content-type', 'application/json']],
    body: '{"error":"Internal server error"}',
    error: describeThrown(err),
    waitUntil: 0,
  };
}

/**
 * Exercise the hot path once while the isolate loads (under startup_time), so that V8's lazy
 * compilation of the library is not billed to the first invocation's CPU time.
 */
export async function warm(): Promise<void> {
  const req = incomingRequest('https://warm.up/path?q=1', 'POST', [['content-type', 'application/json']], utf8Encode('{"a":1}'));
  await req.json();
  new URL(req.url).searchParams.get('q');
  const full = new Request('https://warm.up/', { method: 'POST', headers: { 'x-a': 'b' }, body: 'x' });
  await full.text();
  for (const res of [new Response('hello', { headers: { 'content-type': 'text/plain' } }), Response.json({ ok: true }, { status: 201 })]) {
    responseParts(res);
    await consume(res, Infinity);
  }
  errorOutput(new ExposableError('warm'));
}

/** Run one invocation (the host's number `seq`). Never rejects: a throw becomes an error output. */
export async function dispatch(input: DispatchInput, seq: number): Promise<DispatchOutput> {
  resetPending(input.logLines);
  resetTimers();
  if (input.entropy) addEntropy(input.entropy);
  waitUntils = [];
  let out: DispatchOutput;
  try {
    if (!definition) throw new Error('the integration is not loaded');
    const context = makeContext(input.environment, seq);
    const res = await route(input, context);
    if (!(res instanceof Response)) {
      const got = res === null ? 'null' : typeof res === 'object' ? ((res as object).constructor?.name ?? 'object') : typeof res;
      throw new TypeError(`the fetch handler must return a Response, got ${got}`);
    }
    out = await serialise(res, input.responseBodyLimit);
  } catch (err) {
    out = errorOutput(err);
  }
  out.waitUntil = waitUntils.length;
  return out;
}

/** Wait for every waitUntil promise (including ones added meanwhile); report rejections. */
export async function drain(): Promise<number> {
  let done = 0;
  while (done < waitUntils.length) {
    const batch = waitUntils.slice(done);
    done = waitUntils.length;
    const results = await Promise.allSettled(batch);
    for (const r of results) if (r.status === 'rejected') console.error('waitUntil promise rejected:', r.reason);
  }
  return done;
}
