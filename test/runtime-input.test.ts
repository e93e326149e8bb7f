import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import fc from 'fast-check';
import { ROOT, startTestServer } from './helpers/index.ts';
import { call, fetchScript, testSandbox } from './sandbox.helpers.ts';

const FIXTURES = join(ROOT, 'test/fixtures/integrations');
process.env.KITCHEN_SINK_API_KEY = 'sk_test_kitchen';

function multipart(parts: Array<[string, string]>, boundary = 'XyZbOuNdArY'): string {
  return parts.map(([name, value]) => `--${boundary}\r\nContent-Disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`).join('') + `--${boundary}--\r\n`;
}

test('malformed envelopes get a clear 4xx with the JSON error shape and change nothing', async (t) => {
  const s = await startTestServer(t, { integrations_dir: FIXTURES });
  const post = (body: string, contentType?: string) =>
    fetch(`${s.url}/v1/integrations/kitchen-sink`, {
      method: 'POST',
      headers: { authorization: `Bearer ${s.token}`, ...(contentType ? { 'content-type': contentType } : {}) },
      body,
    });
  const mp = 'multipart/form-data; boundary=XyZbOuNdArY';
  const cases: Array<[string, Promise<Response>, number, RegExp]> = [
    ['wrong content type', post('{"event":{}}', 'application/json'), 415, /multipart\/form-data/],
    ['missing event', post(multipart([['environment', '{}']]), mp), 400, /no "event" field/],
    ['missing environment', post(multipart([['event', '{"type":"x"}']]), mp), 400, /no "environment" field/],
    ['event not JSON', post(multipart([['event', '{type:'], ['environment', '{}']]), mp), 400, /"event" field is not valid JSON/],
    ['event not an object', post(multipart([['event', '[1]'], ['environment', '{}']]), mp), 400, /must be a JSON object/],
    ['event without type', post(multipart([['event', '{}'], ['environment', '{}']]), mp), 400, /event\.type/],
    ['fetch without request', post(multipart([['event', '{"type":"fetch"}'], ['environment', '{}']]), mp), 400, /event\.request/],
    ['truncated multipart', post(multipart([['event', '{"type":"x"}'], ['environment', '{}']]).slice(0, 60), mp), 400, /cannot be read|no "event"/],
    ['oversize body', post('x'.repeat(s.config.sandbox.request_body + 70 * 1024), mp), 413, /larger than/],
  ];
  for (const [name, res, status, message] of cases) {
    const r = await res;
    assert.equal(r.status, status, name);
    const body = (await r.json()) as any;
    assert.equal(typeof body.error.code, 'string', name);
    assert.match(body.error.message, message, name);
  }
  const count = s.services.store.db.prepare('SELECT count(*) AS n FROM invocations').get() as { n: number };
  assert.equal(count.n, 0, 'no code ran');
});

/** Bodies a sender may send under RFC 2046 with the boundary `x`: the boundary text inside content is content. */
const SHORT_BOUNDARY_FIELDS: Array<[string, string]> = [
  ['event', JSON.stringify({ type: 'fetch', request: { method: 'POST', url: 'https://x.test/form', headers: [] }, note: 'x xx --x -x-' })],
  ['environment', '{"x":"--x"}'],
  // A line that starts like a delimiter but goes on (`--xy`) is no delimiter.
  ['fetch-body', 'xx\r\n--xy\r\n--x-\r\nx'],
];

test('an envelope whose boundary is x and whose fields hold x, --x and a line --xy is read as sent (RFC 2046), with a preamble and padding', async (t) => {
  const s = await startTestServer(t, { integrations_dir: FIXTURES });
  const body = `preamble --x\r\n${multipart(SHORT_BOUNDARY_FIELDS, 'x').replace('--x\r\nContent-Disposition: form-data; name="environment"', '--x \t\r\nContent-Disposition: form-data; name="environment"')}epilogue`;
  const res = await fetch(`${s.url}/v1/integrations/kitchen-sink`, {
    method: 'POST',
    headers: { authorization: `Bearer ${s.token}`, 'content-type': 'multipart/form-data; boundary=x' },
    body,
  });
  const text = await res.text();
  assert.notEqual(res.status, 400, text);
  assert.ok(res.headers.get('x-request-id'), 'the integration ran');
  const { decodeEnvelope } = await import('../src/runtime/envelope.ts');
  const envelope = await decodeEnvelope(new Request('http://h/', { method: 'POST', headers: { 'content-type': 'multipart/form-data; boundary=x' }, body }), 1 << 20);
  assert.equal((envelope.event as { note?: string }).note, 'x xx --x -x-');
  assert.deepEqual(envelope.environment, { x: '--x' });
  assert.equal(new TextDecoder().decode(envelope.fetchBody), 'xx\r\n--xy\r\n--x-\r\nx');
  // The boundary must still close the body: cut before it, the envelope is refused as before.
  const cut = await decodeEnvelope(new Request('http://h/', { method: 'POST', headers: { 'content-type': 'multipart/form-data; boundary=x' }, body: body.slice(0, body.lastIndexOf('--x--')) }), 1 << 20).catch((e) => e);
  assert.match(cut.message, /ends before its closing boundary/);
});

test("integration code's request.formData() reads a body whose boundary is x the same way", async (t) => {
  const sb = testSandbox(t);
  const s = fetchScript(`const form = await request.formData(); return Response.json([...form].map(([k, v]) => [k, typeof v === 'string' ? v : 'file ' + v.name]));`);
  const body = multipart([['a', 'x'], ['b', '--x'], ['c', 'line\r\n--xy\r\nx']], 'x');
  const r = await call(sb, s, { method: 'POST', headers: [['content-type', 'multipart/form-data; boundary=x']], body });
  assert.equal(r.status, 200, r.text);
  assert.deepEqual(r.json(), [['a', 'x'], ['b', '--x'], ['c', 'line\r\n--xy\r\nx']]);
});

test('unknown installations and bad tokens are 4xx', async (t) => {
  const s = await startTestServer(t, { integrations_dir: FIXTURES });
  assert.equal((await fetch(`${s.url}/v1/integrations/kitchen-sink/installations/inst_nope`)).status, 404);
  assert.equal((await s.api('GET', '/api/v1/installations/inst_nope')).status, 404);
  assert.equal((await s.api('PATCH', '/api/v1/installations/inst_nope', { configuration: {} })).status, 404);
  assert.equal((await s.api('POST', '/api/v1/installations', { integration: 'not-loaded' })).status, 404);
  assert.equal((await s.api('POST', '/api/v1/installations', { integration: 'kitchen-sink', target: 'moon' })).status, 400);
  assert.equal((await s.api('GET', '/api/v1/installations', undefined, 'sy_inst_forged')).status, 401);
  assert.equal((await s.api('GET', '/api/v1/installations', undefined, 'sy_inv_Zm9v.YmFy')).status, 401);
  const notJson = await fetch(`${s.url}/api/v1/installations`, {
    method: 'POST',
    headers: { authorization: `Bearer ${s.token}`, 'content-type': 'application/json' },
    body: '{"integration":',
  });
  assert.equal(notJson.status, 400);
  assert.match(((await notJson.json()) as any).error.message, /not a valid JSON object/);
});

test('fuzz: random and mutated envelopes never produce a 5xx or a crash', async (t) => {
  const s = await startTestServer(t, { integrations_dir: FIXTURES });
  const boundary = 'FuZzBoUnDaRy';
  const valid = multipart(
    [
      ['event', JSON.stringify({ type: 'fetch', request: { method: 'POST', url: 'https://x.test/a', headers: [['a', 'b']] } })],
      ['environment', '{}'],
      ['fetch-body', 'hello'],
    ],
    boundary,
  );
  const mutation = fc.oneof(
    fc.string({ maxLength: 400 }),
    fc.tuple(fc.nat(valid.length), fc.nat(valid.length), fc.string({ maxLength: 20 })).map(([a, b, ins]) => {
      const [lo, hi] = a < b ? [a, b] : [b, a];
      return valid.slice(0, lo) + ins + valid.slice(hi);
    }),
    fc.nat(valid.length).map((n) => valid.slice(0, n)),
    fc.record({ type: fc.oneof(fc.string({ maxLength: 12 }), fc.constantFrom('fetch', 'ui_render', 'space_view')), x: fc.jsonValue() }).map((ev) =>
      multipart([['event', JSON.stringify(ev)], ['environment', JSON.stringify({ installation: { id: 'inst_nope' } })]], boundary),
    ),
  );
  await fc.assert(
    fc.asyncProperty(mutation, fc.boolean(), async (body, rightType) => {
      const res = await fetch(`${s.url}/v1/integrations/kitchen-sink`, {
        method: 'POST',
        headers: { authorization: `Bearer ${s.token}`, 'content-type': rightType ? `multipart/form-data; boundary=${boundary}` : 'text/plain' },
        body,
      });
      await res.arrayBuffer();
      // 500 only from the integration itself answering "Internal server error" is a guest fault;
      // the platform must never answer 5xx for a malformed envelope.
      if (res.status >= 500) {
        const reqId = res.headers.get('x-request-id');
        assert.ok(reqId, `platform 5xx (${res.status}) for ${JSON.stringify(body).slice(0, 200)}`);
      }
    }),
    { numRuns: 150 },
  );
  assert.equal((await fetch(`${s.url}/healthz`)).status, 200);
});

test('__proto__, constructor and prototype in a configuration are refused like any unknown key, nothing stored', async (t) => {
  const s = await startTestServer(t, { integrations_dir: FIXTURES });
  const raw = (method: string, path: string, text: string) =>
    fetch(`${s.url}${path}`, { method, headers: { authorization: `Bearer ${s.token}`, 'content-type': 'application/json' }, body: text });
  for (const key of ['__proto__', 'constructor', 'prototype']) {
    // Written as text: JSON.stringify of an object literal would drop a __proto__ key.
    const r = await raw('POST', '/api/v1/installations', `{"integration":"kitchen-sink","configuration":{"channel":"c","${key}":{"isAdmin":true}}}`);
    const body = (await r.json()) as any;
    assert.equal(r.status, 400, `${key}: ${JSON.stringify(body)}`);
    assert.equal(body.error.code, 'validation_failed');
    assert.deepEqual(body.error.problems.map((p: any) => p.where), [`configuration.${key}`], key);
    assert.match(body.error.problems[0].message, new RegExp(`"${key}" is not a property`));
  }
  const n = s.services.store.db.prepare('SELECT count(*) AS n FROM installations').get() as { n: number };
  assert.equal(n.n, 0, 'nothing was stored');

  const ok = await s.api('POST', '/api/v1/installations', { integration: 'kitchen-sink', configuration: { channel: 'c' } });
  assert.equal(ok.status, 201);
  const id = ok.body.installation.id;
  const patched = await raw('PATCH', `/api/v1/installations/${id}`, '{"configuration":{"__proto__":{"channel":42}}}');
  assert.equal(patched.status, 400, 'an edit is refused too');
  const stored = s.services.store.db.prepare('SELECT configuration FROM installations WHERE id = ?').get(id) as { configuration: string };
  assert.deepEqual(JSON.parse(stored.configuration), { channel: 'c', threshold: 3, mode: 'fast' });
});

test('a deeply nested environment or event is a 400 naming the field, never a sandbox failure', async (t) => {
  const s = await startTestServer(t, { integrations_dir: FIXTURES });
  const mp = 'multipart/form-data; boundary=XyZbOuNdArY';
  const nested = (depth: number) => '{"a":'.repeat(depth) + '1' + '}'.repeat(depth);
  const post = (event: string, environment: string) =>
    fetch(`${s.url}/v1/integrations/kitchen-sink`, {
      method: 'POST',
      headers: { authorization: `Bearer ${s.token}`, 'content-type': mp },
      body: multipart([['event', event], ['environment', environment]]),
    });
  const fetchEvent = JSON.stringify({ type: 'fetch', request: { method: 'GET', url: 'https://x.test/env', headers: [] } });
  for (const [field, res] of [
    ['environment', await post(fetchEvent, nested(20_000))],
    ['event', await post(`{"type":"installation_setup","x":${nested(20_000)}}`, '{}')],
  ] as const) {
    const body = (await res.json()) as any;
    assert.equal(res.status, 400, `${field}: ${JSON.stringify(body)}`);
    assert.equal(body.error.where, field);
    assert.match(body.error.message, new RegExp(`"${field}" field is nested deeper than 64 levels`));
  }
  const ok = await post(fetchEvent, nested(40));
  assert.notEqual(ok.status, 400, 'ordinary nesting passes');
  const n = s.services.store.db.prepare('SELECT count(*) AS n FROM invocations').get() as { n: number };
  assert.equal(n.n, 1, 'only the ordinary envelope ran');
});

test('a deeply nested JSON body is a 400 at every management route: render props, events, configuration', async (t) => {
  const s = await startTestServer(t, { integrations_dir: FIXTURES });
  const nested = '{"a":'.repeat(20_000) + '1' + '}'.repeat(20_000);
  const raw = (method: string, path: string, text: string) =>
    fetch(`${s.url}${path}`, { method, headers: { authorization: `Bearer ${s.token}`, 'content-type': 'application/json' }, body: text });
  const id = (await s.api('POST', '/api/v1/installations', { integration: 'kitchen-sink', configuration: { channel: 'c' } })).body.installation.id;
  for (const [method, path, text] of [
    ['POST', `/api/v1/installations/${id}/render`, `{"componentId":"counter","props":${nested}}`],
    ['POST', '/api/v1/events', `{"type":"space_content_updated","spaceId":"s","revisionId":"r","x":${nested}}`],
    ['PATCH', `/api/v1/installations/${id}`, `{"configuration":{"channel":${nested}}}`],
  ]) {
    const res = await raw(method, path, text);
    const body = (await res.json()) as any;
    assert.equal(res.status, 400, `${method} ${path}: ${JSON.stringify(body)}`);
    assert.match(body.error.message, /nested deeper than 64 levels/);
  }
  const n = s.services.store.db.prepare("SELECT count(*) AS n FROM invocations WHERE event_type != 'installation_setup'").get() as { n: number };
  assert.equal(n.n, 0, 'no code ran for them');
  const stored = s.services.store.db.prepare('SELECT configuration FROM installations WHERE id = ?').get(id) as { configuration: string };
  assert.deepEqual(JSON.parse(stored.configuration), { channel: 'c', threshold: 3, mode: 'fast' });
});
