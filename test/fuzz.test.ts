/**
 * Fuzzing with fast-check, bounded in time: the config and manifest parsers on hostile text, and the
 * management API through real HTTP on a real server with the shipped integrations. What must hold
 * for any input: no 5xx, no crash or unhandled rejection, and nothing half-stored (the database
 * passes its integrity and foreign-key checks, every installation listed can be read, every webhook
 * installation has its signing secret, every delivery its event).
 *
 * The routes are the ones the server registers (a route added later is fuzzed too), and every
 * number, time and duration its declaration takes is given values past what a 64-bit integer, a
 * safe integer or a date holds: each must be refused with 400 naming its field. The suite runs on
 * PostgreSQL too (test/postgres-suites.test.ts), where such a number reaching a query would fail it.
 *
 * The seed is fixed so a run is reproducible; FUZZ_SEED and FUZZ_RUNS explore further
 * (`FUZZ_SEED=$RANDOM FUZZ_RUNS=2000 npm test -- test/fuzz.test.ts`). A failure prints its seed and
 * the shrunk counterexample.
 */
import { test } from 'node:test';
import { sql } from './helpers/index.ts';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { parseConfigText } from '../src/config/index.ts';
import { parseManifest } from '../src/manifest/index.ts';
import { SwitchyardError } from '../src/errors.ts';
import { createAuthThrottle } from '../src/http/throttle.ts';
import type { RouteMeta } from '../src/http/route.ts';
import { toJsonSchema, type Schema } from '../src/schema/index.ts';
import { modules } from '../src/server/modules.ts';
import { composeApp } from '../src/server/server.ts';
import type { Services } from '../src/module/contract.ts';
import { deliveryServer } from './webhooks-support.ts';

const seed = Number(process.env.FUZZ_SEED ?? 20261125);
const runs = (n: number) => Number(process.env.FUZZ_RUNS ?? n);
/** The parsers touch no store: their fuzz runs once, not again on PostgreSQL (postgres-suites.test.ts). */
const storeless = { skip: process.env.SWITCHYARD_TEST_PG_URL ? 'no store involved: run on SQLite only' : false };

/** YAML-ish text: the characters YAML gives meaning to, keys of the real schema, and anchors. */
const yamlText = fc
  .array(
    fc.oneof(
      fc.constantFrom(
        'server',
        'port',
        'public_url',
        'webhooks',
        'sandbox',
        'admin_token',
        'name',
        'title',
        'scopes',
        'configurations',
        'secrets',
        'blocks',
        '__proto__',
        'constructor',
      ),
      fc.constantFrom(
        ':',
        ': ',
        '\n',
        '\n  ',
        '- ',
        '&a ',
        '*a',
        '&b ',
        '*b',
        '[',
        ']',
        '{',
        '}',
        ',',
        '"',
        "'",
        '!!',
        '!!binary ',
        '!!js/function ',
        '? ',
        '|',
        '>',
        '#',
        '%YAML 1.2\n',
        '---\n',
        '...\n',
        '<<: ',
        '${{ env.X }}',
        '\t',
        '\u0000',
        '\uFEFF',
        '1e999',
        '0x1F',
        '-1',
        'true',
        'null',
        '~',
      ),
      fc.string({ maxLength: 12 }),
    ),
    { maxLength: 60 },
  )
  .map((parts) => parts.join(''));

test('fuzz: config.yaml text either loads or fails with problems that say where, never anything else', storeless, () => {
  fc.assert(
    fc.property(yamlText, (text) => {
      try {
        parseConfigText(text, 'c.yaml', { X: '1' });
      } catch (e) {
        assert.ok(e instanceof SwitchyardError, `not a SwitchyardError: ${(e as Error)?.stack}`);
        assert.equal(e.code, 'config_invalid');
        for (const p of e.problems ?? []) assert.match(p.where ?? '', /^c\.yaml:\d+:\d+$/);
      }
    }),
    { seed, numRuns: runs(1500) },
  );
});

test('fuzz: manifest text never throws; problems say file:line:col', storeless, () => {
  const base = 'name: fz\ntitle: Fuzz\ndescription: d\norganization: o\nvisibility: public\nscopes: []\n';
  fc.assert(
    fc.property(yamlText, fc.boolean(), (text, prefixed) => {
      const r = parseManifest(prefixed ? base + text : text, 'm.yaml', { X: '1' });
      for (const p of r.problems) assert.match(p.where, /^m\.yaml(:\d+:\d+)?$/);
      if (r.problems.some((p) => p.severity === 'error')) assert.equal(r.manifest, undefined);
    }),
    { seed, numRuns: runs(1500) },
  );
});

const weirdSegment = fc.oneof(
  fc.constantFrom(
    '..',
    '%2e%2e',
    '%00',
    '%ff',
    '%',
    '__proto__',
    'constructor',
    'a'.repeat(400),
    'inst_',
    'evt_',
    'dlv_',
    '0',
    '-1',
    ' ',
    '😀',
    'webhook',
    'hello-components',
  ),
  fc.string({ maxLength: 20 }).map(encodeURIComponent),
);

/** A JSON body a client might send, from plausible to hostile. */
const body = fc.oneof(
  { weight: 4, arbitrary: fc.jsonValue({ maxDepth: 4 }).map((v) => JSON.stringify(v)) },
  {
    weight: 4,
    arbitrary: fc
      .record(
        {
          integration: fc.constantFrom('webhook', 'hello-components', 'oauth-example', 'nope', ''),
          configuration: fc.dictionary(
            fc.constantFrom('webhook_url', 'event_types', 'greeting', '__proto__', 'constructor', 'x'),
            fc.oneof(
              fc.jsonValue({ maxDepth: 2 }),
              fc.constantFrom('http://127.0.0.1:9/hook', 'site_view', 'javascript:alert(1)', 'http://user:pw@127.0.0.1:9/'),
            ),
          ),
          space: fc.oneof(fc.string({ maxLength: 10 }), fc.integer()),
          site: fc.string({ maxLength: 10 }),
          type: fc.constantFrom('site_view', 'page_feedback', 'space_content_updated', 'nope', ''),
          eventId: fc.oneof(fc.string({ maxLength: 30 }), fc.integer()),
          status: fc.constantFrom('paused', 'active', 'failed', 'nope'),
          since: fc.oneof(fc.string({ maxLength: 20 }), fc.integer()),
        },
        { requiredKeys: [] },
      )
      .map((v) => JSON.stringify(v)),
  },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      '{',
      '[]',
      'null',
      '"x"',
      '{"a":' + '['.repeat(3000),
      '\u0000',
      '{"__proto__":{"polluted":1}}',
      '[' + '{},'.repeat(2000) + '{}]',
    ),
  },
  { weight: 1, arbitrary: fc.constant(undefined) },
);

interface Registered {
  method: string;
  /** h3's pattern: `/api/v1/deliveries/:id`, `/api/v1/spaces/**`. */
  route: string;
  spec?: RouteMeta['spec'];
}

/** Every route the server registers, read from the app its modules compose (as test/openapi.test.ts does). */
function registeredRoutes(services: Services): Registered[] {
  const app = composeApp(services, modules) as unknown as { '~routes': Array<{ method?: string; route: string; meta?: { route?: RouteMeta } }> };
  return app['~routes'].map((r) => ({ method: r.method || 'GET', route: r.route, spec: r.meta?.route?.spec }));
}

/** A route's pattern with every parameter given `id` (a `**` tail too). */
const pathOf = (route: string, id: string) => route.replace(/:[A-Za-z0-9_]+/g, id).replace(/\*\*$/, id);

/** What a declared field reads: a whole number, a time, a duration, or text (anything else) that the values below are not about. */
type Form = 'number' | 'time' | 'duration' | 'text';

/** The kinds that read text, a choice or a flag; a kind not named here or below fails the test until it is classified. */
const TEXT_KINDS = new Set([
  'text-param',
  'enum-param',
  'flag-param',
  'true-or-false-param',
  'endpoint-param',
  'string',
  'enum',
  'boolean',
  'record',
  'array',
  'any',
  'object',
  'union',
  'nullable',
]);

function formOf(schema: Schema<unknown>): Form | undefined {
  if (schema.kind === 'time-param' || schema.kind === 'time-field') return 'time';
  if (schema.kind === 'bucket-param' || schema.kind === 'duration') return 'duration';
  const json = toJsonSchema(schema);
  if (json.type === 'integer' || json.type === 'number' || json.pattern === '^\\d+$') return 'number';
  return TEXT_KINDS.has(schema.kind) ? 'text' : undefined;
}

interface Target {
  method: string;
  route: string;
  in: 'query' | 'body';
  name: string;
  form: Exclude<Form, 'text'>;
  /** The largest number it takes, as declared (a count's bound), else the largest safe integer. */
  max: number;
}

/** Every number, time and duration a declared route reads from its query or its body. */
function numericFields(routes: Registered[]): { targets: Target[]; unclassified: string[] } {
  const targets: Target[] = [];
  const unclassified: string[] = [];
  for (const { method, route, spec } of routes) {
    const shapes = { query: spec?.query?.shape, body: (spec?.body?.schema as { shape?: Record<string, Schema<unknown>> } | undefined)?.shape };
    for (const where of ['query', 'body'] as const)
      for (const [name, schema] of Object.entries(shapes[where] ?? {})) {
        const form = formOf(schema);
        if (!form) unclassified.push(`${method} ${route} ${where} ${name}: ${schema.kind}`);
        else if (form !== 'text') targets.push({ method, route, in: where, name, form, max: Number(toJsonSchema(schema).maximum ?? Number.MAX_SAFE_INTEGER) });
      }
  }
  return { targets, unclassified };
}

const bigInteger = (min: bigint, max: bigint) => fc.bigInt({ min, max }).map(String);
const units = fc.constantFrom('ms', 's', 'm', 'h', 'd');
/** Forms no field takes for a number, with a unit or without: a sign, an exponent (1e309 is Infinity), hex, words. */
const oddNumber = fc.oneof(
  bigInteger(-(2n ** 70n), -1n),
  fc.constantFrom('-0', '+1', '1e309', '-1e309', '1e3', '0x10', '0b1', '0o7', 'Infinity', 'NaN', '1_000', '١'),
  fc.tuple(fc.integer({ min: 1, max: 9 }), fc.integer({ min: 1, max: 400 })).map(([a, e]) => `${a}e${e}`),
  fc.bigInt({ min: 0n, max: 2n ** 80n }).map((n) => `0x${n.toString(16)}`),
);
/** A fraction: no count, cursor or epoch time (a duration with a unit may have one: `1.5h`). */
const fraction = fc.tuple(fc.integer({ min: 0, max: 999 }), fc.integer({ min: 1, max: 999 })).map(([a, b]) => `${a}.${b}`);

/** Values each form must refuse (400 naming the field), from the plainly wrong to one past its bound. */
const refused: Record<Target['form'], fc.Arbitrary<string>> = {
  // Past Number.MAX_SAFE_INTEGER (exact here), past 2^63 (a store's integer), past 2^64.
  number: fc.oneof(
    bigInteger(2n ** 53n, 2n ** 63n),
    bigInteger(2n ** 63n - 1n, 2n ** 66n),
    bigInteger(2n ** 64n, 10n ** 400n),
    oddNumber,
    fraction,
    fc.constant(' 1'),
  ),
  time: fc.oneof(
    // A duration ago before year 1: 800000 days and more, in any unit.
    fc.tuple(bigInteger(800_000n, 10n ** 30n), fc.constant('d')).map(([n, u]) => n + u),
    fc.tuple(bigInteger(70_000_000_000_000n, 10n ** 400n), fc.constant('ms')).map(([n, u]) => n + u),
    fc.tuple(oddNumber, fc.option(units, { nil: '' })).map(([n, u]) => n + u),
    fraction,
    // Neither epoch seconds (10 digits) nor milliseconds (up to 13).
    bigInteger(10n ** 13n, 2n ** 70n),
    fc.constantFrom(
      '0000-12-31T23:59:59Z',
      '10000-01-01T00:00:00Z',
      '+275760-09-13T00:00:00.000Z',
      '-000001-01-01T00:00:00Z',
      '9999-12-31T23:59:59-01:00',
      'yesterday',
      'Jan 31 2025',
    ),
  ),
  duration: fc.oneof(
    fc.tuple(bigInteger(3_650_001n, 10n ** 30n), fc.constant('d')).map(([n, u]) => n + u),
    fc.tuple(oddNumber, fc.option(units, { nil: '' })).map(([n, u]) => n + u),
    fraction,
    bigInteger(0n, 2n ** 70n),
  ),
};

/** The same, written out: the values a defect was seen with, checked on every run. */
const REFUSED: Record<Target['form'], string[]> = {
  number: [
    '9223372036854775807',
    '9223372036854775808',
    '18446744073709551616',
    '9007199254740992',
    '1'.padEnd(400, '0'),
    '-1',
    '-0',
    '1.5',
    '1e3',
    '1e309',
    '0x10',
  ],
  time: [
    '99999999999999d',
    '800000d',
    `${'9'.repeat(400)}d`,
    '-1',
    '-0',
    '-1h',
    '1.5',
    '1e309',
    '1e3d',
    '0x10',
    '99999999999999',
    '10000-01-01T00:00:00Z',
    'yesterday',
  ],
  duration: ['99999999999999d', '3650001d', `${'9'.repeat(400)}d`, '-1s', '-0', '1.5', '1e309s', '0x10s'],
};

/** The bounds themselves are read (a page past the last, a window from year 1 to 9999, the longest bucket). */
const accepted = (target: Target): string[] =>
  ({
    number: [String(target.max), '0000000000000000000000001'],
    time: ['0001-01-01T00:00:00Z', '9999-12-31T23:59:59.999Z', '700000d', '1.5h', '9999999999999'],
    duration: ['3650000d'],
  })[target.form];

interface ApiError {
  code: string;
  message: string;
  where?: string;
  problems?: Array<{ where: string }>;
}

/** Ask `target` for `value`: the answer's status and error. */
async function ask(s: { url: string; token: string }, target: Target, value: string): Promise<{ status: number; error?: ApiError }> {
  const path = pathOf(target.route, 'x');
  const res = await fetch(target.in === 'query' ? `${s.url}${path}?${target.name}=${encodeURIComponent(value)}` : `${s.url}${path}`, {
    method: target.method,
    headers: { authorization: `Bearer ${s.token}`, ...(target.in === 'body' ? { 'content-type': 'application/json' } : {}) },
    body: target.in === 'body' ? JSON.stringify({ [target.name]: value }) : undefined,
    signal: AbortSignal.timeout(10_000),
  });
  // A stream that was accepted stays open: its answer is its status.
  if (res.headers.get('content-type')?.startsWith('text/event-stream')) {
    await res.body?.cancel();
    return { status: res.status };
  }
  const body = (await res.json().catch(() => undefined)) as { error?: ApiError } | undefined;
  return { status: res.status, error: body?.error };
}

/** What is wrong with the answer to a value past its bound: not a 400 whose problems name the field (a body may have others too: a required key it lacks). */
function notRefused(r: Awaited<ReturnType<typeof ask>>, target: Target, value: string): string | undefined {
  const what = `${target.method} ${target.route} ${target.in} ${target.name}=${value.length > 60 ? `${value.slice(0, 60)}…` : value}`;
  if (r.status !== 400 || r.error?.code !== 'bad_request') return `${what} answered ${r.status} ${r.error?.code ?? ''}`;
  if (r.error.where !== target.name && !r.error.problems?.some((p) => p.where === target.name)) return `${what}: the error names ${r.error.where}`;
  return undefined;
}

test('fuzz: every number, time and duration a route reads is refused past its bound with 400 naming it, never a 5xx', async (t) => {
  const s = await deliveryServer(t);
  t.diagnostic(`on ${s.services.store.engine}`);
  const { targets, unclassified } = numericFields(registeredRoutes(s.services));
  assert.deepEqual(unclassified, [], 'declared fields of a kind this test does not know: classify them in formOf');
  const wrong: string[] = [];
  for (const target of targets) {
    for (const value of REFUSED[target.form]) {
      const why = notRefused(await ask(s, target, value), target, value);
      if (why) wrong.push(why);
    }
    // The bounds themselves: never a 5xx, and the value read (a window with until before since may still be refused).
    if (target.in === 'query')
      for (const value of accepted(target)) {
        const r = await ask(s, target, value);
        if (r.status >= 500 || r.error?.message.includes(`got "${value}"`))
          wrong.push(`${target.route} ${target.name}=${value} answered ${r.status} ${JSON.stringify(r.error)}`);
      }
  }
  assert.deepEqual(wrong, []);

  // The list routes and the replays are all here: the declarations were read.
  const seen = new Set(targets.map((x) => `${x.route} ${x.name}`));
  for (const route of ['/api/v1/events', '/api/v1/deliveries', '/api/v1/handler-runs', '/api/v1/logs'])
    for (const name of ['limit', 'cursor', 'since', 'until']) assert.ok(seen.has(`${route} ${name}`), `${route} ${name}`);
  for (const x of ['/api/v1/deliveries/stats bucket', '/api/v1/logs/stream after', '/api/v1/deliveries/replay since', '/api/v1/handler-runs/replay until'])
    assert.ok(seen.has(x), x);

  await fc.assert(
    fc.asyncProperty(
      fc.constantFrom(...targets).chain((target) => fc.tuple(fc.constant(target), refused[target.form])),
      async ([target, value]) => assert.equal(notRefused(await ask(s, target, value), target, value), undefined),
    ),
    { seed, numRuns: runs(600) },
  );
});

test('fuzz: the management API answers any request without a 5xx and stores nothing half-way', async (t) => {
  const s = await deliveryServer(t);
  // Wrong tokens are part of the input: keep the throttle from ending the exploration early.
  s.services.authThrottle = createAuthThrottle({ max: Number.MAX_SAFE_INTEGER });
  const crashes: unknown[] = [];
  const onCrash = (e: unknown) => crashes.push(e);
  process.on('uncaughtException', onCrash);
  process.on('unhandledRejection', onCrash);
  t.after(() => {
    process.off('uncaughtException', onCrash);
    process.off('unhandledRejection', onCrash);
  });
  const { installationId } = await s.subscribe('http://127.0.0.1:9/hook');
  const ids = fc.oneof(fc.constant(installationId), weirdSegment);
  const routes = registeredRoutes(s.services);
  assert.ok(routes.length > 40, 'the route table was read');
  const request = fc.record({
    route: fc.constantFrom(...routes),
    method: fc.option(fc.constantFrom('GET', 'POST', 'PATCH', 'PUT', 'DELETE', 'HEAD', 'OPTIONS'), { freq: 4 }),
    id: ids,
    query: fc.option(
      fc.dictionary(
        fc.constantFrom('limit', 'status', 'since', 'until', 'cursor', 'after', 'bucket', 'type', 'installation', 'integration', 'event', 'level', 'errors'),
        fc.oneof(
          fc.string({ maxLength: 12 }),
          fc.constantFrom('-1', '1e309', '999999999999', '9223372036854775808', '99999999999999d', '2026-13-45', 'failed', 'retrying'),
          refused.number,
          refused.time,
        ),
      ),
      { freq: 2 },
    ),
    body,
    contentType: fc.constantFrom(
      'application/json',
      'application/json',
      'text/plain',
      'application/x-www-form-urlencoded',
      'multipart/form-data; boundary=x',
      '',
    ),
    auth: fc.constantFrom('admin', 'admin', 'admin', 'none', 'wrong'),
  });
  await fc.assert(
    fc.asyncProperty(request, async (r) => {
      const template = r.route.route;
      const method = r.method ?? r.route.method;
      const path = pathOf(template, r.id);
      const qs = r.query ? `?${new URLSearchParams(r.query)}` : '';
      const headers: Record<string, string> = {};
      if (r.contentType) headers['content-type'] = r.contentType;
      if (r.auth === 'admin') headers.authorization = `Bearer ${s.token}`;
      if (r.auth === 'wrong') headers.authorization = 'Bearer wrong-token-0000000000';
      if (template.startsWith('/console')) headers['x-switchyard-console'] = 'login';
      const origin = template.startsWith('/console') ? s.consoleUrl : s.url;
      const res = await fetch(`${origin}${path}${qs}`, {
        method,
        headers,
        redirect: 'manual',
        body: method === 'GET' || method === 'HEAD' ? undefined : r.body,
        signal: AbortSignal.timeout(10_000),
      });
      await res.body?.cancel();
      assert.ok(res.status < 500, `${method} ${path}${qs} answered ${res.status}`);
    }),
    { seed, numRuns: runs(1200) },
  );
  assert.deepEqual(crashes, [], 'no uncaught exception or unhandled rejection');

  // Nothing half-stored (PostgreSQL checks its own pages and keys as it writes).
  const store = s.services.store;
  if (store.engine === 'sqlite') {
    assert.equal(await sql.value(store, 'PRAGMA integrity_check'), 'ok');
    assert.deepEqual(await sql.all(store, 'PRAGMA foreign_key_check'), []);
  }
  const list = await s.api('GET', '/api/v1/installations');
  assert.equal(list.status, 200);
  for (const inst of list.body.installations) {
    assert.equal((await s.api('GET', `/api/v1/installations/${inst.id}`)).status, 200, inst.id);
    if (inst.integration === 'webhook' && inst.status !== 'uninstalled')
      assert.equal((await s.api('GET', `/api/v1/webhooks/${inst.id}/secret`)).status, 200, `the secret of ${inst.id}`);
  }
  const orphans = (await sql.get<{ n: number }>(
    store,
    'SELECT COUNT(*) AS n FROM webhook_deliveries d WHERE NOT EXISTS (SELECT 1 FROM events e WHERE e.id = d.event_id)',
  ))!;
  assert.equal(orphans.n, 0, 'every delivery has its event');
  assert.equal((await fetch(`${s.url}/healthz`)).status, 200);
});
