/**
 * Every route of the server is declared once: its method and path, who may call it, the schemas of
 * its body, query and answer (src/schema). `route()` registers the handler on the h3 app and records
 * the declaration on the project's own list of the app's routes (`declaredRoutes`), so the same
 * schemas validate the request, type the handler's arguments, and write the route's operation into
 * GET /openapi.json (`routeOperations`). `passRoute()` declares a route whose handler takes h3's event
 * as it comes (nothing read or checked before it: a hot path, a body handed on unread), recorded and
 * documented the same way. test/openapi.test.ts fails on a route registered any other way.
 */
import type { H3, H3Event } from 'h3';
import { SwitchyardError, type Problem } from '../errors.ts';
import { formatPath, toJsonSchema, validate, type Infer, type Issue, type JsonSchema, type Schema } from '../schema/index.ts';
import { didYouMean } from '../schema/suggest.ts';
import { requireAdmin } from './principal.ts';
import { readJson } from './body.ts';
import type { OpenApiPart } from './openapi.ts';

type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
/** The methods an `ANY` route may be documented with. */
export type DocumentedMethod = Method | 'HEAD' | 'OPTIONS';

/** `/api/v1/deliveries/:id/retry` -> `'id'`. */
export type ParamsOf<P extends string> = P extends `${string}:${infer Name}/${infer Rest}`
  ? Name | ParamsOf<`/${Rest}`>
  : P extends `${string}:${infer Name}`
    ? Name
    : never;

/** An object schema: a query's parameters are its keys. */
type ObjectSchema = Schema<any> & { shape: Record<string, Schema<any>> };

/**
 * How the body is read: a JSON object up to `limit` bytes (readJson: 413 beyond, its depth cap,
 * `optional` takes an empty body as `{}`), or by the route's own reader (a batch route's
 * readJsonObjectOrArray). Either way its value is then checked against `schema`.
 */
export type BodySpec<S extends Schema<any>> = (
  | { schema: S; limit: number; optional?: boolean; read?: undefined }
  | { schema: S; read: (req: Request) => Promise<unknown> }
) & {
  /**
   * What /openapi.json shows when it says more than the route checks: a body checked further by
   * the service it is handed to (events, each validated by its type, a batch's items one by one).
   */
  documented?: Schema<any>;
};

/** An answer the route documents beside its main one. */
export interface ResponseDoc {
  description: string;
  schema?: Schema<any>;
}

export interface RouteSpec<P extends string, B extends Schema<any> | undefined, Q extends ObjectSchema | undefined, R extends Schema<any> | undefined> {
  /** `ANY`: every method, handed to the handler (documented with `methods`). */
  method: Method | 'ANY';
  /** The methods an `ANY` route is documented with (GET, POST, PUT, PATCH and DELETE unless said). */
  methods?: readonly DocumentedMethod[];
  /** h3's pattern: `/api/v1/deliveries/:id`; a trailing `/**` takes the rest of the path (`{path}`). */
  path: P;
  summary: string;
  description?: string;
  /**
   * `admin`: the admin token, checked before anything is read (403 otherwise). `token`: any token the
   * /api/v1 guard accepted; the handler decides what it may reach. `self`: a token the handler checks
   * itself (outside /api/v1: the runtime endpoint, /metrics). `none`: no token (health, this
   * document, the public endpoints): documented without security and without the common answers.
   */
  auth: 'admin' | 'token' | 'self' | 'none';
  /**
   * The holder of an install link may call it too (the handler decides what the link reaches). Every
   * other route refuses a link before it runs (the /api/v1 guard, app.ts): a link installs, no more.
   */
  installLink?: true;
  /** Who may call it beyond `auth`, decided before anything is read (a token for its own installation). */
  authorize?: (req: Request, params: { [K in ParamsOf<P>]: string }) => void | Promise<void>;
  body?: B extends Schema<any> ? BodySpec<B> : undefined;
  query?: Q;
  /** What each path parameter is (documented; every one is a non-empty string). */
  params?: { [K in ParamsOf<P>]?: string };
  /**
   * A path parameter that takes only these values: the route is documented once per value, under
   * its own path (the runtime endpoint's `:version`, whose other values answer 400 with the versions).
   */
  paramValues?: { [K in ParamsOf<P>]?: readonly string[] };
  /**
   * A body route() leaves unread: the handler reads it itself or hands it on as it came (the
   * runtime's multipart envelope, a public endpoint's body, a call forwarded upstream). Documented
   * with its media type and shape; a JSON body route() reads and checks is `body`.
   */
  passThrough?: { media: string; schema: Schema<any>; required?: boolean };
  /** The main answer's shape, documented with `status` (200 unless said). */
  response?: R;
  status?: number;
  /** A description of the main answer. */
  responseDescription?: string;
  /**
   * The main answer's media type when it is not JSON: documented as text. `text/event-stream`: the
   * handler answers with a stream of server-sent events (src/inspection/sse.ts), held open.
   */
  responseMedia?: string;
  /** Other answers, by status (`'409'`); 400, 401, 403 and 404 are documented for every route that takes a token. */
  responses?: Record<string, ResponseDoc>;
}

export interface RouteInput<P extends string, B, Q> {
  event: H3Event;
  req: Request;
  params: { [K in ParamsOf<P>]: string };
  body: B;
  query: Q;
}

type Out<S> = S extends Schema<any> ? Infer<S> : undefined;
type Answer<R> = R extends Schema<any> ? Infer<R> | Response : unknown;

/** What `route()` leaves on the h3 route (read by takesInstallLink for the request it matched). */
export interface RouteMeta {
  spec: RouteSpec<string, Schema<any> | undefined, ObjectSchema | undefined, Schema<any> | undefined>;
}

/** A route on the project's list: what route() and passRoute() registered, and its declaration. */
export interface DeclaredRoute {
  method: RouteMeta['spec']['method'];
  path: string;
  spec: RouteMeta['spec'];
}

const declared = new WeakMap<H3, DeclaredRoute[]>();

/** The routes declared on `app`, in the order they were registered: GET /openapi.json is written from them. */
export function declaredRoutes(app: H3): readonly DeclaredRoute[] {
  return declared.get(app) ?? [];
}

function register(app: H3, spec: RouteMeta['spec'], handler: (event: H3Event) => unknown): void {
  const list = declared.get(app) ?? [];
  declared.set(app, list);
  if (list.some((r) => r.method === spec.method && r.path === spec.path)) throw new Error(`${spec.method} ${spec.path} is declared twice`);
  list.push({ method: spec.method, path: spec.path, spec });
  app.on(spec.method === 'ANY' ? '' : spec.method, spec.path, handler, { meta: { route: { spec } satisfies RouteMeta } });
}

/** Every object a body schema holds takes null as a value (declared with requestBody, or one of its own kind). */
function assertJsonBody(schema: Schema<any>, where: string): void {
  const o = schema.options as { nullIsValue?: boolean; inner?: Schema<any>; item?: Schema<any>; value?: Schema<any>; variants?: Schema<any>[] } | undefined;
  if (schema.kind === 'object') {
    if (!o?.nullIsValue) throw new Error(`${where}: a request body's objects must be declared with requestBody() (null is a value in JSON)`);
    for (const [k, sub] of Object.entries((schema as ObjectSchema).shape)) assertJsonBody(sub, `${where}.${k}`);
  }
  for (const sub of [o?.inner, o?.item, o?.value, ...(o?.variants ?? [])]) if (sub) assertJsonBody(sub, where);
}

/**
 * Register `handler` for `spec.method spec.path`: the caller is authorized, the query and body are
 * read and validated (400 `bad_request` naming every problem by its field path, defaults filled
 * in), then the handler gets them typed.
 */
export function route<
  const P extends string,
  B extends Schema<any> | undefined = undefined,
  Q extends ObjectSchema | undefined = undefined,
  R extends Schema<any> | undefined = undefined,
>(app: H3, spec: RouteSpec<P, B, Q, R>, handler: (input: RouteInput<P, Out<B>, Out<Q>>) => Answer<R> | Promise<Answer<R>>): void {
  const { body, query } = spec as RouteMeta['spec'];
  if (body && !body.read) assertJsonBody(body.schema, `${spec.method} ${spec.path} body`);
  register(app, spec as RouteMeta['spec'], async (event) => {
    const req = event.req;
    if (spec.auth === 'admin') requireAdmin(req);
    const params = (event.context.params ?? {}) as RouteInput<P, unknown, unknown>['params'];
    await spec.authorize?.(req, params);
    let q: unknown;
    if (query) {
      const issues: Issue[] = [];
      const values = queryValues(query, new URL(req.url).searchParams, issues);
      const r = validate(query, values);
      if (!r.ok || issues.length) throw requestError([...issues, ...(r.ok ? [] : r.issues)]);
      q = r.value;
    }
    let b: unknown;
    if (body) {
      const raw = body.read ? await body.read(req) : await readJson(req, body.limit, { optional: body.optional });
      b = checked(body.schema, raw);
    }
    return handler({ event, req, params, body: b as Out<B>, query: q as Out<Q> });
  });
}

/**
 * Register `handler` for `spec.method spec.path` as h3 hands it the event: nothing is read or
 * checked before it (no admin check, no query, no JSON body), so it costs nothing per request
 * beyond the handler (an installation's public endpoint), and a body it hands on stays unread
 * (`passThrough`). Declared and documented as route() declares.
 */
export function passRoute<const P extends string, R extends Schema<any> | undefined = undefined>(
  app: H3,
  spec: Omit<RouteSpec<P, undefined, undefined, R>, 'auth' | 'authorize' | 'body' | 'query'> & { auth: 'token' | 'self' | 'none' },
  handler: (event: H3Event) => Answer<R> | Promise<Answer<R>>,
): void {
  register(app, spec as RouteMeta['spec'], handler);
}

/**
 * A query's values as the schema wants them: an empty value taken as absent, and a number or
 * `true`/`false` read from its text where the schema wants one. A parameter the route does not
 * know, or one given twice, is a problem (400 with the rest): `?stauts=failed` listing everything,
 * or `?status=a&status=b` quietly meaning `a`, would mislead a script that acts on the answer.
 */
function queryValues(schema: ObjectSchema, q: URLSearchParams, issues: Issue[]): Record<string, unknown> {
  const known = Object.keys(schema.shape);
  for (const key of new Set(q.keys())) {
    if (!Object.hasOwn(schema.shape, key))
      issues.push({ path: [key], message: `is not a query parameter of this route`, hint: didYouMean(key, known) ?? `it takes ${known.join(', ')}` });
    else if (q.getAll(key).length > 1) issues.push({ path: [key], message: `is given ${q.getAll(key).length} times; give it once` });
  }
  const out: Record<string, unknown> = {};
  for (const [key, sub] of Object.entries(schema.shape)) {
    const v = q.get(key);
    if (v === null || v === '') continue;
    const kind = sub.kind === 'nullable' ? ((sub.options?.inner as Schema<unknown>)?.kind ?? '') : sub.kind;
    if (kind === 'number' && /^-?\d+(\.\d+)?$/.test(v.trim())) out[key] = Number(v);
    else if (kind === 'boolean' && (v === 'true' || v === 'false')) out[key] = v === 'true';
    else out[key] = v;
  }
  return out;
}

function checked<T>(schema: Schema<T>, value: unknown): T {
  const r = validate(schema, value);
  if (r.ok) return r.value;
  throw requestError(r.issues);
}

/**
 * 400 with every issue: `where` is the first one's field path, `problems` lists them all, and the
 * message says them in a line (`limit must be a whole number from 1 to 500, got "0"`), as the
 * event validation does; a message that does not read on from its field name (`"type" is
 * required`) follows it after a colon, as config.yaml's problems do.
 */
export function requestError(issues: Issue[]): SwitchyardError {
  const problems: Problem[] = issues.map((i) => ({ where: formatPath(i.path), message: i.message, ...(i.hint ? { hint: i.hint } : {}) }));
  const line = (p: Problem) =>
    p.message.includes(`"${p.where}"`) ? p.message : /^(must|is|has|does)\b/.test(p.message) ? `${p.where} ${p.message}` : `${p.where}: ${p.message}`;
  const message = problems.length === 1 ? line(problems[0]) : `the request has ${problems.length} problems: ${problems.map(line).join('; ')}`;
  return new SwitchyardError('bad_request', message, {
    where: problems[0]?.where,
    problems,
    ...(problems.length === 1 && problems[0].hint ? { hint: problems[0].hint } : {}),
  });
}

/** The answers every route that takes a token may give (the one vocabulary of them: openapi.ts has none). */
const COMMON: Record<string, string> = {
  '400': 'Bad input: the message says what, `where` and `problems` say where',
  '401': 'Missing or wrong token',
  '403': 'The token may not do this',
  '404': 'Not found',
};

const errorContent = { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } };

/** The methods an `ANY` route is documented with unless it says. */
const ANY_METHODS: readonly DocumentedMethod[] = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'];

/** Answers may gain keys in a later version: their objects are not closed. */
const ANSWER = { open: true };

/** An h3 pattern as an OpenAPI path: `:id` -> `{id}`, a trailing `/**` -> `/{path}`. */
export const openApiPath = (pattern: string) => pattern.replace(/\/\*\*$/, '/{path}').replace(/:([A-Za-z0-9_]+)/g, '{$1}');

/** The OpenAPI paths a declared route is documented under (one per value of a `paramValues` parameter). */
export function openApiPathsOf(spec: Pick<RouteMeta['spec'], 'path' | 'paramValues'>): string[] {
  let paths = [openApiPath(spec.path)];
  for (const [name, values] of Object.entries((spec.paramValues ?? {}) as Record<string, readonly string[]>))
    paths = paths.flatMap((p) => values.map((v) => p.replace(`{${name}}`, v)));
  return paths;
}

/** The methods a declared route is documented with. */
export function documentedMethods(spec: Pick<RouteMeta['spec'], 'method' | 'methods'>): readonly DocumentedMethod[] {
  return spec.method === 'ANY' ? (spec.methods ?? ANY_METHODS) : [spec.method];
}

/** The OpenAPI operation of one declared route; named schemas are added to `components`. */
export function operationOf(spec: RouteMeta['spec'], components: Record<string, JsonSchema>): Record<string, unknown> {
  const parameters: unknown[] = [];
  const fixed = (spec.paramValues ?? {}) as Record<string, unknown>;
  for (const m of spec.path.matchAll(/:([A-Za-z0-9_]+)/g)) {
    if (fixed[m[1]]) continue;
    const description = (spec.params as Record<string, string | undefined> | undefined)?.[m[1]];
    parameters.push({ name: m[1], in: 'path', required: true, ...(description ? { description } : {}), schema: { type: 'string', minLength: 1 } });
  }
  if (spec.path.endsWith('/**'))
    parameters.push({
      name: 'path',
      in: 'path',
      required: true,
      description: 'the rest of the path, slashes included',
      schema: { type: 'string', minLength: 1 },
    });
  if (spec.query)
    for (const [name, sub] of Object.entries(spec.query.shape)) {
      const schema = toJsonSchema(sub, components);
      const description = schema.description;
      delete schema.description;
      parameters.push({ name, in: 'query', required: !sub.isOptional && !sub.hasDefault, ...(description ? { description } : {}), schema });
    }
  const responses: Record<string, unknown> = {};
  const main = String(spec.status ?? 200);
  responses[main] = {
    description: spec.responseDescription ?? 'OK',
    ...(spec.response ? { content: { 'application/json': { schema: toJsonSchema(spec.response, components, ANSWER) } } } : {}),
    ...(spec.responseMedia ? { content: { [spec.responseMedia]: { schema: { type: 'string' } } } } : {}),
  };
  if (spec.auth !== 'none') for (const [status, description] of Object.entries(COMMON)) responses[status] = { description, content: errorContent };
  for (const [status, r] of Object.entries(spec.responses ?? {}))
    responses[status] = {
      description: r.description,
      content: r.schema ? { 'application/json': { schema: toJsonSchema(r.schema, components, ANSWER) } } : Number(status) >= 400 ? errorContent : undefined,
    };
  for (const r of Object.values(responses) as Array<{ content?: unknown }>) if (r.content === undefined) delete r.content;
  return {
    summary: spec.summary,
    ...(spec.description ? { description: spec.description } : {}),
    ...(spec.auth === 'none' ? { security: [] } : {}),
    ...(spec.auth === 'admin' ? { 'x-switchyard-auth': 'admin' } : {}),
    ...(spec.installLink ? { 'x-switchyard-install-link': true } : {}),
    ...(parameters.length ? { parameters } : {}),
    ...(spec.body
      ? {
          requestBody: {
            required: !('optional' in spec.body && spec.body.optional),
            content: { 'application/json': { schema: toJsonSchema(spec.body.documented ?? spec.body.schema, components) } },
          },
        }
      : {}),
    ...(spec.passThrough
      ? {
          requestBody: {
            required: spec.passThrough.required ?? true,
            // Not checked by route(): the handler reads what it needs of it.
            content: { [spec.passThrough.media]: { schema: toJsonSchema(spec.passThrough.schema, components, ANSWER) } },
          },
        }
      : {}),
    responses,
  };
}

/** Whether the route a request matched was declared to take an install link (see RouteSpec.installLink). */
export function takesInstallLink(event: H3Event): boolean {
  return Boolean((event.context.matchedRoute?.meta as { route?: RouteMeta } | undefined)?.route?.spec.installLink);
}

/** The routes declared on an app (the project's list), as an OpenAPI part: their paths and the named schemas they use. */
export function routeOperations(app: H3): OpenApiPart {
  const paths: Record<string, Record<string, unknown>> = {};
  const schemas: Record<string, JsonSchema> = {};
  for (const { spec } of declaredRoutes(app)) {
    const operation = operationOf(spec, schemas);
    // An ANY route documented as GET or HEAD: those carry no body.
    const { requestBody: _, ...bodiless } = operation;
    for (const path of openApiPathsOf(spec)) {
      const item = (paths[path] ??= {});
      for (const m of documentedMethods(spec)) item[m.toLowerCase()] = spec.method === 'ANY' && (m === 'GET' || m === 'HEAD') ? bodiless : operation;
    }
  }
  return { paths, schemas };
}
