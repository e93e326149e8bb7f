/**
 * Fuzzing with fast-check, bounded in time: the config and manifest parsers on hostile text, and the
 * management API through real HTTP on a real server with the shipped integrations. What must hold
 * for any input: no 5xx, no crash or unhandled rejection, and nothing half-stored (the database
 * passes its integrity and foreign-key checks, every installation listed can be read, every webhook
 * installation has its signing secret, every delivery its event).
 *
 * The seed is fixed so a run is reproducible; FUZZ_SEED and FUZZ_RUNS explore further
 * (`FUZZ_SEED=$RANDOM FUZZ_RUNS=2000 npm test -- test/fuzz.test.ts`). A failure prints its seed and
 * the shrunk counterexample.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { parseConfigText } from '../src/config/index.ts';
import { parseManifest } from '../src/manifest/index.ts';
import { SwitchyardError } from '../src/errors.ts';
import { createAuthThrottle } from '../src/http/throttle.ts';
import { deliveryServer } from './webhooks-support.ts';

const seed = Number(process.env.FUZZ_SEED ?? 20261125);
const runs = (n: number) => Number(process.env.FUZZ_RUNS ?? n);

/** YAML-ish text: the characters YAML gives meaning to, keys of the real schema, and anchors. */
const yamlText = fc
  .array(
    fc.oneof(
      fc.constantFrom('server', 'port', 'public_url', 'webhooks', 'sandbox', 'admin_token', 'name', 'title', 'scopes', 'configurations', 'secrets', 'blocks', '__proto__', 'constructor'),
      fc.constantFrom(':', ': ', '\n', '\n  ', '- ', '&a ', '*a', '&b ', '*b', '[', ']', '{', '}', ',', '"', "'", '!!', '!!binary ', '!!js/function ', '? ', '|', '>', '#', '%YAML 1.2\n', '---\n', '...\n', '<<: ', '${{ env.X }}', '\t', '\u0000', '\uFEFF', '1e999', '0x1F', '-1', 'true', 'null', '~'),
      fc.string({ maxLength: 12 }),
    ),
    { maxLength: 60 },
  )
  .map((parts) => parts.join(''));

test('fuzz: config.yaml text either loads or fails with problems that say where, never anything else', () => {
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

test('fuzz: manifest text never throws; problems say file:line:col', () => {
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
  fc.constantFrom('..', '%2e%2e', '%00', '%ff', '%', '__proto__', 'constructor', 'a'.repeat(400), 'inst_', 'evt_', 'dlv_', '0', '-1', ' ', '😀', 'webhook', 'hello-components'),
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
            fc.oneof(fc.jsonValue({ maxDepth: 2 }), fc.constantFrom('http://127.0.0.1:9/hook', 'site_view', 'javascript:alert(1)', 'http://user:pw@127.0.0.1:9/')),
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
  { weight: 1, arbitrary: fc.constantFrom('{', '[]', 'null', '"x"', '{"a":' + '['.repeat(3000), '\u0000', '{"__proto__":{"polluted":1}}', '[' + '{},'.repeat(2000) + '{}]') },
  { weight: 1, arbitrary: fc.constant(undefined) },
);

const routes = [
  'GET /healthz', 'GET /openapi.json', 'GET /metrics',
  'GET /api/v1/integrations', 'GET /api/v1/integrations/:x',
  'GET /api/v1/installations', 'POST /api/v1/installations', 'GET /api/v1/installations/:x', 'PATCH /api/v1/installations/:x',
  'PUT /api/v1/installations/:x', 'DELETE /api/v1/installations/:x', 'POST /api/v1/installations/:x/render', 'POST /api/v1/installations/:x/token',
  'GET /api/v1/events', 'POST /api/v1/events', 'GET /api/v1/events/:x',
  'GET /api/v1/deliveries', 'GET /api/v1/deliveries/:x', 'POST /api/v1/deliveries/:x/retry', 'POST /api/v1/deliveries/:x/replay', 'POST /api/v1/deliveries/replay',
  'GET /api/v1/logs', 'GET /api/v1/logs/:x', 'GET /api/v1/retention', 'POST /api/v1/retention/run',
  'GET /api/v1/webhooks/:x/secret', 'POST /api/v1/webhooks/:x/secret/rotate',
  'POST /api/v1/oauth/state', 'POST /api/v1/oauth/state/consume', 'POST /api/v1/oauth/refresh/claim', 'POST /api/v1/oauth/refresh/release',
  'GET /console/session', 'POST /console/login', 'POST /console/logout', 'GET /console/api/samples/:x', 'GET /console/api/integrations/:x/components',
];

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
  const request = fc.record({
    route: fc.constantFrom(...routes),
    method: fc.option(fc.constantFrom('GET', 'POST', 'PATCH', 'PUT', 'DELETE', 'HEAD', 'OPTIONS'), { freq: 4 }),
    id: ids,
    query: fc.option(
      fc.dictionary(fc.constantFrom('limit', 'status', 'since', 'until', 'cursor', 'type', 'installation', 'integration', 'event', 'level'), fc.oneof(fc.string({ maxLength: 12 }), fc.constantFrom('-1', '1e309', '999999999999', '2026-13-45', 'failed', 'retrying'))),
      { freq: 2 },
    ),
    body,
    contentType: fc.constantFrom('application/json', 'application/json', 'text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', ''),
    auth: fc.constantFrom('admin', 'admin', 'admin', 'none', 'wrong'),
  });
  await fc.assert(
    fc.asyncProperty(request, async (r) => {
      const [routeMethod, template] = r.route.split(' ');
      const method = r.method ?? routeMethod;
      const path = template.replace(':x', r.id);
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

  // Nothing half-stored.
  const db = s.services.store.db;
  assert.equal(db.pragma('integrity_check', { simple: true }), 'ok');
  assert.deepEqual(db.pragma('foreign_key_check'), []);
  const list = await s.api('GET', '/api/v1/installations');
  assert.equal(list.status, 200);
  for (const inst of list.body.installations) {
    assert.equal((await s.api('GET', `/api/v1/installations/${inst.id}`)).status, 200, inst.id);
    if (inst.integration === 'webhook' && inst.status !== 'uninstalled')
      assert.equal((await s.api('GET', `/api/v1/webhooks/${inst.id}/secret`)).status, 200, `the secret of ${inst.id}`);
  }
  const orphans = db.prepare('SELECT COUNT(*) AS n FROM webhook_deliveries d WHERE NOT EXISTS (SELECT 1 FROM events e WHERE e.id = d.event_id)').get() as { n: number };
  assert.equal(orphans.n, 0, 'every delivery has its event');
  assert.equal((await fetch(`${s.url}/healthz`)).status, 200);
});
