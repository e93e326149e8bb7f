/**
 * The public lane (src/http/public-lane.ts): HTTP/1.1 requests to the public endpoints are answered
 * in front of the app, the others by the app's public routes. Whichever way a request came, the
 * integration must be handed the same request and the client get the same answer: each case here
 * is sent both ways (the app's way forced by a target srvx normalises, `x/../`), and compared.
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import { once } from 'node:events';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startTestServer, tmpDir, type TestServer } from './helpers/index.ts';

const ECHO = `import { createIntegration } from '@switchyard/runtime';
export default createIntegration({
  async fetch(request) {
    const url = new URL(request.url);
    if (url.pathname.endsWith('/empty')) return new Response(null, { status: 204, headers: { 'x-empty': 'yes' } });
    const body = await request.text();
    const headers = new Headers({ 'content-type': 'application/json', 'x-echo': 'yes', connection: 'keep-alive', 'content-length': '1' });
    // Ours, under its name and nameless (a browser sends that one back as "sy_console=x"), and one of its own.
    for (const c of ['sy_console=forged', '=sy_console=x', 'theme=dark']) headers.append('set-cookie', c);
    return new Response(JSON.stringify({ method: request.method, url: request.url, headers: [...request.headers], body }), { status: 201, headers });
  },
});
`;

async function echoServer(t: TestContext, over: Record<string, unknown> = {}) {
  const dir = tmpDir(t);
  mkdirSync(join(dir, 'echo/src'), { recursive: true });
  writeFileSync(
    join(dir, 'echo/platform-manifest.yaml'),
    'name: echo\ntitle: Echo\ndescription: Says what it got\norganization: test\nvisibility: private\nscopes: []\nscript: src/index.ts\n',
  );
  writeFileSync(join(dir, 'echo/src/index.ts'), ECHO);
  const server = await startTestServer(t, { integrations_dir: dir, ...over });
  const installed = await server.api('POST', '/api/v1/installations', { integration: 'echo' });
  assert.equal(installed.status, 201, JSON.stringify(installed.body));
  const endpoint = new URL(installed.body.installation.urls.publicEndpoint as string);
  // Count the requests that came through the lane: the app's routes call the handler directly.
  const lane = server.services.publicLane!;
  let laneCalls = 0;
  server.services.publicLane = { ...lane, answer: (...args) => (laneCalls++, lane.answer(...args)) };
  return { server, path: endpoint.pathname, laneCalls: () => laneCalls };
}

type Answer = { status: number; headers: http.IncomingHttpHeaders; raw: string[]; body: string };

/** A request as written (node:http leaves the target alone: `..` reaches the server). */
function send(server: TestServer, method: string, target: string, headers: Record<string, string | string[]> = {}, body?: string | string[]): Promise<Answer> {
  const url = new URL(server.url);
  return new Promise((resolve, reject) => {
    const req = http.request({ host: url.hostname, port: url.port, method, path: target, headers, agent: false }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, raw: res.rawHeaders, body: text }));
    });
    req.on('error', reject);
    for (const part of typeof body === 'string' ? [body] : (body ?? [])) req.write(part);
    req.end();
  });
}

/** What a client can compare of two answers: all but the request id and the date. */
function comparable(a: Answer) {
  const headers = { ...a.headers };
  delete headers['x-request-id'];
  delete headers.date;
  return { status: a.status, headers, body: a.body };
}

test('the lane and the app hand the integration the same request and send the same answer', async (t) => {
  const { server, path, laneCalls } = await echoServer(t);
  const headers = {
    'X-Mixed-Case': 'One',
    'x-repeated': ['a', 'b'],
    // Two Cookie lines: one Cookie header for the guest, joined with "; " as Node joins them.
    cookie: ['theme=dark; sy_console=secret', 'sy_other=x; lang=en'],
    'user-agent': 'lane-test',
  };
  const viaLane = await send(server, 'GET', `${path}/b?q=1&r=%20`, headers);
  assert.equal(laneCalls(), 1, 'the lane answered');
  const viaApp = await send(server, 'GET', `${path}/a/../b?q=1&r=%20`, headers);
  assert.equal(laneCalls(), 1, 'the app answered (a target srvx normalises)');
  assert.deepEqual(comparable(viaLane), comparable(viaApp));

  assert.equal(viaLane.status, 201);
  const seen = JSON.parse(viaLane.body) as { method: string; url: string; headers: Array<[string, string]>; body: string };
  assert.equal(seen.url, `${server.url}${path}/b?q=1&r=%20`);
  const got = new Map(seen.headers);
  assert.equal(got.get('x-mixed-case'), 'One');
  assert.equal(got.get('x-repeated'), 'a, b');
  assert.equal(got.get('cookie'), 'theme=dark; lang=en', 'none of our cookies reaches integration code');
  // The answer: the guest's hop-by-hop headers and our cookie dropped, the sandbox policy on, its length ours.
  assert.equal(viaLane.headers['x-echo'], 'yes');
  assert.deepEqual(viaLane.headers['set-cookie'], ['theme=dark'], 'none of ours, named or nameless');
  assert.match(String(viaLane.headers['content-security-policy']), /^sandbox /);
  assert.equal(viaLane.headers['content-length'], String(Buffer.byteLength(viaLane.body)));
  assert.match(String(viaLane.headers['x-request-id']), /^req_/);
  assert.equal(viaLane.raw.filter((h) => h.toLowerCase() === 'x-request-id').length, 1);
});

test('bodies through the lane: as sent, chunked, past the limit (413, closed), and a status without one', async (t) => {
  const { server, path, laneCalls } = await echoServer(t, { sandbox: { request_body: 64 } });
  for (const [target, lane] of [
    [`${path}/x`, true],
    [`${path}/y/../x`, false],
  ] as const) {
    const before = laneCalls();
    const sized = await send(server, 'POST', target, { 'content-type': 'text/plain', 'content-length': '5' }, 'hello');
    assert.equal(sized.status, 201, sized.body);
    assert.equal(JSON.parse(sized.body).body, 'hello');
    const chunked = await send(server, 'PUT', target, { 'content-type': 'text/plain' }, ['one ', 'two']);
    assert.equal(chunked.status, 201, chunked.body);
    assert.equal(JSON.parse(chunked.body).body, 'one two');
    const streamed = await send(server, 'POST', target, {}, ['x'.repeat(40), 'y'.repeat(40)]);
    assert.equal(streamed.status, 413, streamed.body);
    assert.equal(JSON.parse(streamed.body).error.code, 'payload_too_large');
    assert.equal(streamed.headers.connection, 'close');
    const declared = await send(server, 'POST', target, { 'content-length': '65' }, 'z'.repeat(65));
    assert.equal(declared.status, 413, declared.body);
    const empty = await send(server, 'GET', target.replace(/x$/, 'empty'));
    assert.equal(empty.status, 204);
    assert.equal(empty.headers['x-empty'], 'yes');
    assert.equal(empty.body, '');
    const head = await send(server, 'HEAD', target);
    assert.equal(head.status, 201);
    assert.equal(head.body, '');
    assert.equal(laneCalls() - before, lane ? 6 : 0, lane ? 'all through the lane' : 'none through the lane');
  }
});

test("the lane's errors are the app's: an unknown installation, the console's host, a paused installation", async (t) => {
  const { server, path, laneCalls } = await echoServer(t);
  const unknown = path.replace(/installations\/[^/]+/, 'installations/inst_nope');
  const a = await send(server, 'GET', `${unknown}/q`);
  const b = await send(server, 'GET', `${unknown}/z/../q`);
  assert.equal(a.status, 404);
  assert.deepEqual(comparable(a), comparable(b));
  assert.equal(JSON.parse(a.body).error.code, 'not_found');

  const consoleHost = new URL(server.consoleUrl).host;
  const c = await send(server, 'GET', `${path}/q`, { host: consoleHost });
  const d = await send(server, 'GET', `${path}/z/../q`, { host: consoleHost });
  assert.equal(c.status, 404, c.body);
  assert.match(JSON.parse(c.body).error.message, /console's origin/);
  assert.deepEqual(comparable(c), comparable(d));
  assert.equal(laneCalls(), 2, 'the lane took the unknown installation and the console host');

  const id = path.split('/').at(-1)!;
  assert.equal((await server.api('POST', `/api/v1/installations/${id}/pause`)).status, 200);
  const e = await send(server, 'GET', `${path}/q`);
  const f = await send(server, 'GET', `${path}/z/../q`);
  assert.equal(e.status, 503, e.body);
  assert.deepEqual(comparable(e), comparable(f));
});

test('the metrics name the route the lane answered as the app names it', async (t) => {
  const { server, path } = await echoServer(t);
  await send(server, 'GET', path);
  await send(server, 'GET', `${path}/deeper`);
  await send(server, 'GET', `${path}/a/../deeper`);
  const text = await (await fetch(`${server.url}/metrics`, { headers: { authorization: `Bearer ${server.token}` } })).text();
  assert.match(text, /switchyard_http_requests_total\{method="GET",route="\/v1\/integrations\/:name\/installations\/:id",status="201"\} 1\n/);
  assert.match(text, /switchyard_http_requests_total\{method="GET",route="\/v1\/integrations\/:name\/installations\/:id\/\*\*",status="201"\} 2\n/);
});

test("a client that hangs up mid-body is its own failure, not the store's: /healthz stays 200, and the request is counted", async (t) => {
  const { server, path } = await echoServer(t);
  const url = new URL(server.url);
  for (const target of [`${path}/up`, `${path}/x/../up`]) {
    const socket = net.connect(Number(url.port), url.hostname);
    await once(socket, 'connect');
    socket.write(`POST ${target} HTTP/1.1\r\nHost: ${url.host}\r\nContent-Length: 50\r\n\r\nabc`);
    await new Promise((r) => setTimeout(r, 100));
    socket.destroy();
  }
  await new Promise((r) => setTimeout(r, 200));
  const health = await fetch(`${server.url}/healthz`);
  const body = (await health.json()) as { store: string };
  assert.equal(health.status, 200, JSON.stringify(body));
  assert.equal(body.store, 'ok');
  const text = await (await fetch(`${server.url}/metrics`, { headers: { authorization: `Bearer ${server.token}` } })).text();
  assert.match(
    text,
    /switchyard_http_requests_total\{method="POST",route="\/v1\/integrations\/:name\/installations\/:id\/\*\*",status="400"\} 2\n/,
    'both ways counted',
  );
});

test('two Host headers are refused (400) both ways; a lone trailing slash is the route itself', async (t) => {
  const { server, path } = await echoServer(t);
  const consoleHost = new URL(server.consoleUrl).host;
  const url = new URL(server.url);
  const raw = (target: string) =>
    new Promise<string>((resolve, reject) => {
      const socket = net.connect(Number(url.port), url.hostname, () =>
        socket.write(`GET ${target} HTTP/1.1\r\nHost: ${consoleHost}\r\nHost: ${url.host}\r\nConnection: close\r\n\r\n`),
      );
      let text = '';
      socket.setEncoding('utf8');
      socket.on('data', (d) => (text += d));
      socket.on('end', () => resolve(text));
      socket.on('error', reject);
    });
  for (const target of [`${path}/q`, `${path}/z/../q`]) {
    const answer = await raw(target);
    assert.match(answer, /^HTTP\/1\.1 400 /, answer);
    assert.match(answer, /more than one Host header/);
  }
  await send(server, 'GET', `${path}/`);
  await send(server, 'GET', `${path}/z/../`);
  const text = await (await fetch(`${server.url}/metrics`, { headers: { authorization: `Bearer ${server.token}` } })).text();
  assert.match(text, /switchyard_http_requests_total\{method="GET",route="\/v1\/integrations\/:name\/installations\/:id",status="201"\} 2\n/);
});
