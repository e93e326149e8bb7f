/**
 * A management route declared once: its method and path, who may call it, the schemas of its body,
 * query and answer (src/schema). `route()` registers the handler on the h3 app and keeps the
 * declaration on the route (h3's route `meta`), so the same schemas validate the request, type the
 * handler's arguments, and write the route's operation into GET /openapi.json (`routeOperations`).
 */
import type { H3, H3Event } from 'h3';
import { SwitchyardError, type Problem } from '../errors.ts';
import { formatPath, toJsonSchema, validate, type Infer, type Issue, type JsonSchema, type Schema } from '../schema/index.ts';
import { didYouMean } from '../schema/suggest.ts';
import { requireAdmin } from './principal.ts';
import { readJson } from './body.ts';
import type { OpenApiPart } from './openapi.ts';

type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

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
  method: Method;
  /** h3's pattern: `/api/v1/deliveries/:id`. */
  path: P;
  summary: string;
  description?: string;
  /**
   * `admin`: the admin token, checked before anything is read (403 otherwise). `token`: any token the
   * /api/v1 guard accepted; the handler decides what it may reach.
   */
  auth: 'admin' | 'token';
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
  /** The main answer's shape, documented with `status` (200 unless said). */
  response?: R;
  status?: number;
  /** A description of the main answer. */
  responseDescription?: string;
  /** The main answer's media type when it is not JSON (`text/event-stream`): documented as text. */
  responseMedia?: string;
  /** Other answers, by status (`'409'`); 400, 401, 403 and 404 are documented for every route. */
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

/** What `route()` leaves on the h3 route, read by routeOperations and by the OpenAPI test. */
export interface RouteMeta {
  spec: RouteSpec<string, Schema<any> | undefined, ObjectSchema | undefined, Schema<any> | undefined>;
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
  app.on(
    spec.method,
    spec.path,
    async (event) => {
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
    },
    { meta: { route: { spec } satisfies RouteMeta } },
  );
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

/** The answers every management route may give. */
const COMMON: Record<string, string> = {
  '400': 'Bad input: the message says what, `where` and `problems` say where',
  '401': 'Missing or wrong token',
  '403': 'The token may not do this',
  '404': 'Not found',
};

const errorContent = { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } };

/** Answers may gain keys in a later version: their objects are not closed. */
const ANSWER = { open: true };

/** An h3 pattern as an OpenAPI path: `:id` -> `{id}`. */
export const openApiPath = (pattern: string) => pattern.replace(/:([A-Za-z0-9_]+)/g, '{$1}');

/** The OpenAPI operation of one declared route; named schemas are added to `components`. */
export function operationOf(spec: RouteMeta['spec'], components: Record<string, JsonSchema>): Record<string, unknown> {
  const parameters: unknown[] = [];
  for (const m of spec.path.matchAll(/:([A-Za-z0-9_]+)/g)) {
    const description = (spec.params as Record<string, string | undefined> | undefined)?.[m[1]];
    parameters.push({ name: m[1], in: 'path', required: true, ...(description ? { description } : {}), schema: { type: 'string', minLength: 1 } });
  }
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
  for (const [status, description] of Object.entries(COMMON)) responses[status] = { description, content: errorContent };
  for (const [status, r] of Object.entries(spec.responses ?? {}))
    responses[status] = {
      description: r.description,
      content: r.schema ? { 'application/json': { schema: toJsonSchema(r.schema, components, ANSWER) } } : Number(status) >= 400 ? errorContent : undefined,
    };
  for (const r of Object.values(responses) as Array<{ content?: unknown }>) if (r.content === undefined) delete r.content;
  return {
    summary: spec.summary,
    ...(spec.description ? { description: spec.description } : {}),
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
    responses,
  };
}

/** Whether the route a request matched was declared to take an install link (see RouteSpec.installLink). */
export function takesInstallLink(event: H3Event): boolean {
  return Boolean((event.context.matchedRoute?.meta as { route?: RouteMeta } | undefined)?.route?.spec.installLink);
}

/** The routes an app registered through `route()`, as an OpenAPI part: their paths and the named schemas they use. */
export function routeOperations(app: H3): OpenApiPart {
  const paths: Record<string, Record<string, unknown>> = {};
  const schemas: Record<string, JsonSchema> = {};
  for (const r of app['~routes']) {
    const meta = (r.meta as { route?: RouteMeta } | undefined)?.route;
    if (!meta) continue;
    const item = (paths[openApiPath(meta.spec.path)] ??= {});
    item[meta.spec.method.toLowerCase()] = operationOf(meta.spec, schemas);
  }
  return { paths, schemas };
}
