/**
 * Routes declared with route() (src/http/route.ts): the query and body are checked against the
 * route's schemas before its handler runs (400 naming every problem by its field path, defaults
 * filled in, the body readers' limits kept), on a bare app and on the core API's routes.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { H3, type HTTPError } from 'h3';
import { SwitchyardError } from '../src/errors.ts';
import { route } from '../src/http/route.ts';
import { flag, pageQuery, requestBody, timeQuery } from '../src/http/params.ts';
import { array, boolean, number, object, oneOf, optional, string, toJsonSchema, withDefault, nullable, named, union } from '../src/schema/index.ts';
import { ROOT, startTestServer } from './helpers/index.ts';

/** An app that answers errors in the server's one shape. */
function bareApp(): H3 {
  return new H3({
    silent: true,
    onError(error) {
      const cause = (error as HTTPError).cause ?? error;
      if (cause instanceof SwitchyardError)
        return new Response(JSON.stringify(cause.toJSON()), { status: cause.status, headers: { 'content-type': 'application/json' } });
      return new Response(JSON.stringify({ error: { code: 'internal', message: String(cause) } }), { status: 500 });
    },
  });
}

const send = async (app: H3, method: string, path: string, body?: unknown) => {
  const res = await app.request(path, {
    method,
    ...(body !== undefined ? { body: typeof body === 'string' ? body : JSON.stringify(body), headers: { 'content-type': 'application/json' } } : {}),
  });
  return { status: res.status, body: (await res.json()) as any };
};

function widgets(): { app: H3; seen: unknown[] } {
  const app = bareApp();
  const seen: unknown[] = [];
  route(
    app,
    {
      method: 'POST',
      path: '/widgets/:id',
      summary: 'a test route',
      auth: 'token',
      query: object({ verbose: withDefault(flag('say more'), false), ...pageQuery, count: optional(number({ integer: true, min: 1 })) }),
      body: {
        schema: requestBody({
          name: string({ min: 1 }),
          size: withDefault(oneOf(['s', 'm', 'l']), 'm'),
          tags: optional(array(string())),
          nested: requestBody({ on: withDefault(boolean(), true) }),
        }),
        limit: 200,
      },
      response: object({ ok: boolean() }),
    },
    (input) => {
      seen.push({ params: { ...input.params }, query: input.query, body: input.body });
      return { ok: true };
    },
  );
  return { app, seen };
}

test('route(): a valid request reaches the handler typed and with defaults filled in', async () => {
  const { app, seen } = widgets();
  const r = await send(app, 'POST', '/widgets/w1?limit=20&count=3', { name: 'a' });
  assert.equal(r.status, 200);
  assert.deepEqual(seen[0], {
    params: { id: 'w1' },
    query: { verbose: false, limit: 20, count: 3 },
    body: { name: 'a', size: 'm', nested: { on: true } },
  });
  await send(app, 'POST', '/widgets/w1?verbose=true', { name: 'b', size: 'l' });
  assert.deepEqual((seen[1] as any).query, { verbose: true });
  assert.equal((seen[1] as any).body.size, 'l');
});

test('route(): a key or query parameter the route does not know is refused with the closest one, never ignored', async () => {
  const { app, seen } = widgets();
  // A misspelt safety key ignored would do the real thing (a dryRun that replays).
  const body = await send(app, 'POST', '/widgets/w1', { name: 'a', sise: 'l' });
  assert.equal(body.status, 400);
  assert.equal(body.body.error.where, 'sise');
  assert.match(body.body.error.message, /unknown key "sise"/);
  assert.match(body.body.error.hint, /did you mean "size"/);
  const query = await send(app, 'POST', '/widgets/w1?limt=5&count=1&count=2&count=3', { name: 'a' });
  assert.equal(query.status, 400);
  assert.deepEqual(
    query.body.error.problems.map((p: any) => [p.where, p.message]),
    [
      ['limt', 'is not a query parameter of this route'],
      ['count', 'is given 3 times; give it once'],
    ],
  );
  assert.match(query.body.error.problems[0].hint, /did you mean "limit"/);
  assert.equal(seen.length, 0);
});

test('route(): a bad body or query is a 400 naming every problem by its field path; the handler never runs', async () => {
  const { app, seen } = widgets();
  const body = await send(app, 'POST', '/widgets/w1', { name: '', size: 'xl', tags: ['ok', 3], nested: { on: 'yes' } });
  assert.equal(body.status, 400);
  assert.equal(body.body.error.code, 'bad_request');
  assert.equal(body.body.error.where, 'name');
  assert.deepEqual(
    body.body.error.problems.map((p: any) => p.where),
    ['name', 'size', 'tags[1]', 'nested.on'],
  );
  assert.match(body.body.error.message, /^the request has 4 problems: name must not be empty; size: the string "xl" is not allowed/);
  const missing = await send(app, 'POST', '/widgets/w1', {});
  assert.equal(missing.body.error.where, 'name');
  assert.match(missing.body.error.message, /^"name" is required$/);
  const query = await send(app, 'POST', '/widgets/w1?limit=0&count=1.5', { name: 'a' });
  assert.equal(query.status, 400);
  assert.deepEqual(
    query.body.error.problems.map((p: any) => p.where),
    ['limit', 'count'],
  );
  assert.match(query.body.error.message, /limit must be a whole number from 1 to 500, got "0"/);
  assert.match(query.body.error.message, /count must be a whole number, got 1\.5/);
  // JSON's null is a value the sender gave: refused where the key takes none, never a default.
  const nulls = await send(app, 'POST', '/widgets/w1', { name: 'a', size: null, tags: null, nested: null });
  assert.equal(nulls.status, 400);
  assert.deepEqual(
    nulls.body.error.problems.map((p: any) => p.where),
    ['size', 'tags', 'nested'],
  );
  assert.equal(seen.length, 0);
});

test('route(): numbers past what both stores hold and times past what a date holds are refused by the shared readers, naming the field', async () => {
  const app = bareApp();
  const seen: unknown[] = [];
  route(
    app,
    {
      method: 'GET',
      path: '/things',
      summary: 'a test list',
      auth: 'token',
      query: object({ ...pageQuery, since: timeQuery('since'), count: optional(number({ integer: true })) }),
    },
    ({ query }) => (seen.push(query), { ok: true }),
  );
  for (const [query, where, message] of [
    [
      'cursor=9223372036854775807',
      'cursor',
      /cursor must be the nextCursor of a previous page \(a whole number up to 9007199254740991\), got "9223372036854775807"/,
    ],
    ['cursor=9007199254740992', 'cursor', /cursor must be/],
    ['cursor=1e3', 'cursor', /cursor must be/],
    ['limit=0x10', 'limit', /limit must be a whole number from 1 to 500, got "0x10"/],
    ['limit=1e2', 'limit', /limit must be a whole number/],
    ['count=99999999999999999999', 'count', /count must be a whole number from -9007199254740991 to 9007199254740991, got 100000000000000000000/],
    ['since=99999999999999d', 'since', /since must be a time from 0001-01-01 to 9999-12-31, got "99999999999999d"/],
    ['since=-1', 'since', /since must be a duration ago \(15m, 2h, 7d\) or a date-time/],
    ['since=1.5', 'since', /since must be a duration ago/],
    ['since=10000-01-01T00:00:00Z', 'since', /since must be/],
  ] as const) {
    const r = await send(app, 'GET', `/things?${query}`);
    assert.equal(r.status, 400, query);
    assert.equal(r.body.error.where, where, query);
    assert.match(r.body.error.message, message, query);
  }
  assert.equal(seen.length, 0);
  const ok = await send(app, 'GET', '/things?cursor=9007199254740991&limit=500&since=0001-01-01&count=-9007199254740991');
  assert.equal(ok.status, 200);
  assert.deepEqual(seen[0], { cursor: '9007199254740991', limit: 500, since: Date.parse('0001-01-01T00:00:00Z'), count: -9007199254740991 });
  await send(app, 'GET', '/things?since=1.5h');
  assert.ok(Number.isInteger((seen[1] as { since: number }).since), 'a time is a whole millisecond');
});

test('route(): a body declared with a plain object (null taken as absent, as in YAML) is refused when the route is registered', () => {
  const register = (schema: any) => route(bareApp(), { method: 'POST', path: '/x', summary: 'x', auth: 'token', body: { schema, limit: 100 } }, () => ({}));
  assert.throws(() => register(object({ a: optional(string()) })), /POST \/x body: a request body's objects must be declared with requestBody\(\)/);
  assert.throws(() => register(requestBody({ inner: optional(array(object({ a: string() }))) })), /POST \/x body\.inner/);
  register(requestBody({ inner: optional(array(requestBody({ a: string() }))) }));
});

test('route(): the body readers keep their limits and their refusals (size, JSON, media type)', async () => {
  const { app, seen } = widgets();
  const big = await send(app, 'POST', '/widgets/w1', { name: 'x'.repeat(500) });
  assert.equal(big.status, 413);
  assert.equal(big.body.error.code, 'payload_too_large');
  const notJson = await send(app, 'POST', '/widgets/w1', '{nope');
  assert.equal(notJson.status, 400);
  assert.match(notJson.body.error.message, /not a valid JSON object/);
  const list = await send(app, 'POST', '/widgets/w1', [1]);
  assert.equal(list.status, 400);
  const empty = await send(app, 'POST', '/widgets/w1');
  assert.equal(empty.status, 400);
  assert.match(empty.body.error.message, /needs a JSON body/);
  assert.equal(seen.length, 0);
});

test('toJsonSchema: every kind, with bounds, defaults, required keys, nullable and named shapes as components', () => {
  const Item = named('Item', object({ id: string({ pattern: /^i_\d+$/ }), n: nullable(number({ integer: true, min: 0 })) }));
  const s = object({
    items: array(Item, { min: 1, max: 3, unique: true }),
    mode: withDefault(oneOf(['a', 'b']), 'a'),
    url: optional(string({ url: true, max: 100 })),
    either: union([Item, array(Item)]),
    flagged: boolean({ description: 'on or off' }),
  });
  const components: Record<string, Record<string, unknown>> = {};
  assert.deepEqual(toJsonSchema(s, components), {
    type: 'object',
    properties: {
      items: { type: 'array', items: { $ref: '#/components/schemas/Item' }, minItems: 1, maxItems: 3, uniqueItems: true },
      mode: { enum: ['a', 'b'], default: 'a' },
      url: { type: 'string', maxLength: 100, format: 'uri' },
      either: { oneOf: [{ $ref: '#/components/schemas/Item' }, { type: 'array', items: { $ref: '#/components/schemas/Item' } }] },
      flagged: { type: 'boolean', description: 'on or off' },
    },
    required: ['items', 'either', 'flagged'],
    additionalProperties: false,
  });
  assert.deepEqual(components.Item, {
    type: 'object',
    properties: { id: { type: 'string', pattern: '^i_\\d+$' }, n: { type: ['integer', 'null'], minimum: 0 } },
    required: ['id', 'n'],
    additionalProperties: false,
  });
  // Without components a named shape is written out in place.
  assert.equal((toJsonSchema(Item) as any).type, 'object');
});

test('the core API: a bad body or query on a declared route is a 400 with its field path; defaults apply', async (t) => {
  const s = await startTestServer(t, { integrations_dir: join(ROOT, 'integrations') });
  const install = await s.api('POST', '/api/v1/installations', { integration: 5, target: 'galaxy', externalIds: ['a', 1], webhook_secret: 'short' });
  assert.equal(install.status, 400);
  assert.equal(install.body.error.code, 'bad_request');
  assert.equal(install.body.error.where, 'integration');
  assert.deepEqual(
    install.body.error.problems.map((p: any) => p.where),
    ['integration', 'target', 'externalIds[1]', 'webhook_secret'],
  );

  const page = await s.api('GET', '/api/v1/deliveries?limit=0');
  assert.equal(page.status, 400);
  assert.equal(page.body.error.where, 'limit');
  assert.match(page.body.error.message, /limit must be a whole number from 1 to 500, got "0"/);
  const since = await s.api('GET', '/api/v1/events?since=yesterday');
  assert.equal(since.body.error.where, 'since');
  const runs = await s.api('GET', '/api/v1/handler-runs?status=lost');
  assert.equal(runs.body.error.where, 'status');
  const replay = await s.api('POST', '/api/v1/handler-runs/replay', { since: '1h' });
  assert.equal(replay.status, 400);
  assert.equal(replay.body.error.where, 'failed');
  const configure = await s.api('PATCH', '/api/v1/installations/inst_nope', { externalIds: 'x' });
  assert.equal(configure.status, 400);
  assert.deepEqual(
    configure.body.error.problems.map((p: any) => p.where),
    ['configuration', 'externalIds'],
  );

  // Defaults: `reveal` and `all` are false unless asked, `dryRun` is false.
  const webhookInstall = { integration: 'webhook', configuration: { webhook_url: 'http://127.0.0.1:9/hook', event_types: 'site_view' } };
  const misspelt = await s.api('POST', '/api/v1/installations', { ...webhookInstall, configuraton: {} });
  assert.equal(misspelt.status, 400);
  assert.equal(misspelt.body.error.message, 'unknown key "configuraton"');
  assert.match(misspelt.body.error.hint, /did you mean "configuration"/);
  const made = await s.api('POST', '/api/v1/installations', webhookInstall);
  assert.equal(made.status, 201, JSON.stringify(made.body));
  const id = made.body.installation.id;
  const secret = await s.api('GET', `/api/v1/webhooks/${id}/secret`);
  assert.equal(secret.body.revealed, false);
  assert.match(secret.body.secret, /^whsec_…/);
  assert.equal((await s.api('GET', `/api/v1/webhooks/${id}/secret?reveal=true`)).body.secret, made.body.webhookSecret);
  await s.api('DELETE', `/api/v1/installations/${id}`);
  assert.ok(!(await s.api('GET', '/api/v1/installations')).body.installations.some((i: any) => i.id === id), 'uninstalled ones are left out by default');
  assert.ok((await s.api('GET', '/api/v1/installations?all=true')).body.installations.some((i: any) => i.id === id));
  const dry = await s.api('POST', '/api/v1/deliveries/replay', { failed: true, since: '1h', dryRun: true });
  assert.equal(dry.body.dryRun, true);
  const real = await s.api('POST', '/api/v1/deliveries/replay', { failed: true, since: '1h' });
  assert.equal(real.status, 200);
  assert.equal(real.body.dryRun, undefined, 'a replay (dryRun defaults to false) answers as it always did');
});
