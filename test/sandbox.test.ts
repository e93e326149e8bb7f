/**
 * The sandbox as integration code and the runtime see it: dispatch by event type, errors, logs,
 * waitUntil, loading and checking scripts, versions, outbound fetch under the network policy,
 * context.api, crypto, crashes of the worker process.
 */
import assert from 'node:assert/strict';
import { createHash, createHmac } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { describe, it } from 'node:test';
import { call, fetchScript, invokeEnvelope, localServer, script, testSandbox } from './sandbox.helpers.ts';
import { offLoopHashes, performCrypto } from '../src/sandbox/host/ops.ts';

describe('dispatch', () => {
  it('hands fetch a standard Request rebuilt from the envelope, with the raw body byte-exact', async (t) => {
    const sb = testSandbox(t);
    const s = fetchScript(`
      const bytes = new Uint8Array(await request.arrayBuffer());
      const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', bytes));
      return Response.json({
        method: request.method, url: request.url, search: new URL(request.url).searchParams.get('q'),
        type: request.headers.get('content-type'), extra: request.headers.get('x-extra'),
        size: bytes.length, sha256: [...digest].map((b) => b.toString(16).padStart(2, '0')).join(''),
        isRequest: request instanceof Request,
      });`);
    const body = new Uint8Array(256).map((_, i) => 255 - i);
    const r = await call(sb, s, {
      method: 'POST',
      url: 'https://hooks.test/v1/x?q=%C3%A9t%C3%A9',
      headers: [
        ['Content-Type', 'application/octet-stream'],
        ['X-Extra', 'a'],
        ['x-extra', 'b'],
      ],
      body,
    });
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(r.json(), {
      method: 'POST',
      url: 'https://hooks.test/v1/x?q=%C3%A9t%C3%A9',
      search: 'été',
      type: 'application/octet-stream',
      extra: 'a, b',
      size: 256,
      sha256: createHash('sha256').update(body).digest('hex'),
      isRequest: true,
    });
    assert.deepEqual(r.headers, [['content-type', 'application/json']]);
    assert.equal(r.error, undefined);
  });

  it('answers ExposableError with its status and message, any other throw with a bare 500 and the stack in the logs', async (t) => {
    const sb = testSandbox(t);
    const s = fetchScript(`
      const p = new URL(request.url).pathname;
      if (p === '/exposed') throw new ExposableError('the channel is gone', 410);
      if (p === '/default') throw new ExposableError('bad input');
      throw new Error('database password is hunter2');`);
    const exposed = await call(sb, s, { url: 'https://x.test/exposed' });
    assert.equal(exposed.status, 410);
    assert.deepEqual(exposed.json(), { error: 'the channel is gone' });
    assert.equal(exposed.error, undefined);
    assert.equal((await call(sb, s, { url: 'https://x.test/default' })).status, 400);

    const hidden = await call(sb, s, { url: 'https://x.test/other' });
    assert.equal(hidden.status, 500);
    assert.equal(hidden.text, '{"error":"Internal server error"}');
    assert.equal(hidden.error?.kind, 'exception');
    assert.match(hidden.error?.message ?? '', /hunter2/);
    assert.match(hidden.error?.stack ?? '', /at Object\.fetch \(integration:/);
    assert.ok(hidden.logs.some((l) => l.level === 'error' && l.message.includes('hunter2')));
  });

  it('renders components: initialState, an action that replaces state, JSX markup, 404 for an unknown componentId', async (t) => {
    const sb = testSandbox(t);
    const s = script(`
      import { createIntegration, createComponent } from '@switchyard/runtime';
      import { jsx, jsxs, Fragment } from '@switchyard/runtime/jsx-runtime';
      const Label = (props) => jsx('text', { children: props.text });
      const counter = createComponent({
        componentId: 'counter',
        initialState: (props) => ({ count: props.start ?? 0 }),
        async action(element, action) {
          if (action.action === 'increment') return { state: { count: element.state.count + 1 } };
          return {};
        },
        async render(element, context) {
          return jsxs('block', { children: [
            jsx(Label, { text: 'Count: ' + element.state.count }),
            jsx(Fragment, { children: [jsx('button', { label: 'Add', onPress: { action: 'increment' } }), null, false] }),
          ] });
        },
      });
      export default createIntegration({ components: [counter] });`);
    const render = (extra: Record<string, unknown>) =>
      invokeEnvelope(sb, s, {
        event: { type: 'ui_render', componentId: 'counter', props: { start: 4 }, context: { type: 'document' }, ...extra },
        environment: {},
      });

    const first = await render({});
    assert.equal(first.status, 200, first.text);
    assert.deepEqual(first.json(), {
      type: 'element',
      state: { count: 4 },
      props: { start: 4 },
      element: {
        type: 'block',
        children: [
          { type: 'text', children: ['Count: 4'] },
          { type: 'button', label: 'Add', onPress: { action: 'increment' } },
        ],
      },
    });
    const clicked = await render({ state: { count: 9 }, action: { action: 'increment' } });
    assert.deepEqual(clicked.json().state, { count: 10 });
    const unchanged = await render({ state: { count: 9, note: 'x' }, action: { action: 'other' } });
    assert.deepEqual(unchanged.json().state, { count: 9, note: 'x' });

    const missing = await invokeEnvelope(sb, s, { event: { type: 'ui_render', componentId: 'nope' }, environment: {} });
    assert.equal(missing.status, 404);
    assert.match(missing.json().error, /nope/);
  });

  it('runs event handlers (one or several) and answers 200 OK, 406 for an event type with no handler', async (t) => {
    const sb = testSandbox(t);
    const s = script(`
      import { createIntegration } from '@switchyard/runtime';
      export default createIntegration({ events: {
        installation_setup: async (event, context) => { console.log('setup for', context.environment.installation.id); },
        space_view: [async (e) => console.log('first', e.spaceId), async (e) => console.log('second', e.spaceId)],
      } });`);
    const setup = await invokeEnvelope(sb, s, { event: { type: 'installation_setup' }, environment: { installation: { id: 'inst_1' } } });
    assert.equal(setup.status, 200);
    assert.equal(setup.text, 'OK');
    assert.deepEqual(
      setup.logs.map((l) => l.message),
      ['setup for inst_1'],
    );
    const view = await invokeEnvelope(sb, s, { event: { type: 'space_view', spaceId: 'sp' }, environment: {} });
    assert.deepEqual(view.logs.map((l) => l.message).sort(), ['first sp', 'second sp']);
    const none = await invokeEnvelope(sb, s, { event: { type: 'space_content_updated' }, environment: {} });
    assert.equal(none.status, 406);
    assert.match(none.json().error, /space_content_updated/);
    const noFetch = await call(sb, s);
    assert.equal(noFetch.status, 404);
  });

  it('an event type that names a member of Object.prototype is one with no handler: 406, not taken for an unsupported or a defined one', async (t) => {
    const sb = testSandbox(t, { inProcess: true });
    const s = script(`
      import { createIntegration } from '@switchyard/runtime';
      export default createIntegration({ events: { site_view: async () => {} } });`);
    for (const type of ['constructor', 'toString', '__proto__', 'hasOwnProperty', 'valueOf', '__defineGetter__', 'isPrototypeOf']) {
      const r = await invokeEnvelope(sb, s, { event: { type }, environment: {} });
      assert.equal(r.status, 406, `${type}: ${r.text}`);
      assert.deepEqual(r.json(), { error: `this integration has no handler for event "${type}"` }, type);
    }
    // The table of unsupported types still answers for its own keys.
    const task = await invokeEnvelope(sb, s, { event: { type: 'task' }, environment: {} });
    assert.equal(task.status, 501);
    assert.match(task.json().error, /"task" events are not supported here: integration tasks/);
    // A handler of such a name that the integration does define runs.
    const own = script(`
      import { createIntegration } from '@switchyard/runtime';
      export default createIntegration({ events: { constructor: async () => console.log('own constructor handler') } });`);
    const ran = await invokeEnvelope(sb, own, { event: { type: 'constructor' }, environment: {} });
    assert.equal(ran.status, 200, ran.text);
    assert.deepEqual(
      ran.logs.map((l) => l.message),
      ['own constructor handler'],
    );
  });

  it('the web globals look names up among their own keys: a DOMException or an Error named after an Object.prototype member', async (t) => {
    const sb = testSandbox(t, { inProcess: true });
    const s = fetchScript(`
      const named = (name) => Object.assign(new Error('x'), { name });
      const cloned = structuredClone(named('toString'));
      return Response.json({
        codes: ['constructor', 'toString', '__proto__', 'NotFoundError'].map((n) => new DOMException('m', n).code),
        clone: [cloned instanceof Error, cloned.message, structuredClone(named('constructor')) instanceof Error, structuredClone(named('RangeError')) instanceof RangeError],
      });`);
    const r = await call(sb, s);
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(r.json(), { codes: [0, 0, 0, 8], clone: [true, 'x', true, true] });
  });

  it("a provider's answer shown in an OAuth error keeps a `__proto__` key as a key, its secrets hidden", async () => {
    // The guest library's own module, run here (held in a variable: guest code is outside tsconfig.json's check).
    const guestOAuth = '../src/sandbox/guest/runtime/oauth.ts';
    const { describeResponse } = (await import(guestOAuth)) as { describeResponse(response: unknown): string };
    const answer = JSON.parse('{"__proto__":{"access_token":"sk_live_1","note":"n"},"error":"bad"}');
    assert.equal(describeResponse(answer), '{"__proto__":{"access_token":"[redacted]","note":"n"},"error":"bad"}');
  });

  it('keeps console lines per invocation, caps them at log_lines, and reports lines printed after the response through onLog', async (t) => {
    const sb = testSandbox(t, { limits: { log_lines: 5 } });
    const s = fetchScript(`
      console.log('object', { a: 1, nested: { b: [1, 2] } });
      console.warn('warned %s=%d', 'n', 42);
      console.error(new TypeError('shown with its stack'));
      context.waitUntil(new Promise((r) => setTimeout(r, 20)).then(() => console.info('after the response')));
      if (new URL(request.url).searchParams.has('many')) for (let i = 0; i < 50; i++) console.log('line', i);
      return new Response('ok');`);
    const r = await call(sb, s);
    assert.equal(r.status, 200);
    assert.deepEqual(
      r.logs.map((l) => [l.level, l.message.split('\n')[0]]),
      [
        ['log', 'object { a: 1, nested: { b: [ 1, 2 ] } }'],
        ['warn', 'warned n=42'],
        ['error', 'TypeError: shown with its stack'],
      ],
    );
    const late = await waitForLate(sb, r.requestId);
    assert.deepEqual(
      late.map((l) => [l.level, l.message]),
      [['info', 'after the response']],
    );

    const many = await call(sb, s, { url: 'https://x.test/?many' });
    assert.equal(many.logs.length, 6);
    assert.match(many.logs[5].message, /log output truncated: more than sandbox\.log_lines = 5/);
  });

  it('refuses a request body larger than sandbox.request_body with 413', async (t) => {
    const sb = testSandbox(t, { limits: { request_body: 16 } });
    const r = await call(sb, fetchScript(`return new Response('never');`), { method: 'POST', body: 'x'.repeat(17) });
    assert.equal(r.status, 413);
    assert.equal(r.error?.limit, 'request_body');
  });
});

async function waitForLate(sb: ReturnType<typeof testSandbox>, requestId: string, count = 1, waitMs = 10_000) {
  // A late line crosses from the isolate's thread; a loaded machine can take seconds.
  for (const end = Date.now() + waitMs; Date.now() < end; ) {
    const lines = sb.late.filter((e) => e.requestId === requestId).map((e) => e.line);
    if (lines.length >= count) return lines;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`no late log line for ${requestId}`);
}

describe('loading and checking scripts', () => {
  it('check() lists what a script exports', async (t) => {
    const sb = testSandbox(t);
    const r = await sb.check(
      script(`import { createIntegration, createComponent } from '@switchyard/runtime';
        export default createIntegration({
          fetch: async () => new Response('x'),
          components: [createComponent({ componentId: 'a', render: async () => ({ type: 'block' }) }), createComponent({ componentId: 'b', render: async () => null })],
          events: { installation_setup: async () => {}, space_view: [async () => {}] },
        });`),
    );
    assert.ok(r.ok);
    assert.deepEqual(r.exports, { fetch: true, components: ['a', 'b'], events: ['installation_setup', 'space_view'] });
    assert.match(r.library ?? '', /^[0-9a-f]{16}$/, 'which guest library read the exports (the exports cache keys on it)');
  });

  it('says why a script cannot load, and an invocation of it answers 500 with kind load', async (t) => {
    const sb = testSandbox(t, { limits: { script_size: 4096 } });
    const cases: Array<[string, RegExp]> = [
      [`export default {`, /does not compile: .*SyntaxError|Unexpected/],
      [`import fs from 'node:fs';\nexport default {};`, /imports "node:fs"; only '@switchyard\/runtime'/],
      [`import { createIntegration } from '@switchyard/runtime';\ncreateIntegration({});`, /no default export/],
      [`throw new Error('missing API key at load');`, /threw while loading: .*missing API key at load/],
      [
        `import { createIntegration } from '@switchyard/runtime';\nexport default createIntegration({ events: { x: 'not a function' } });`,
        /events\.x must be a function/,
      ],
      [`// ${'x'.repeat(5000)}\nexport default {};`, /larger than sandbox\.script_size = 4 kB/],
    ];
    for (const [code, why] of cases) {
      const s = script(code);
      const checked = await sb.check(s);
      assert.equal(checked.ok, false, code.slice(0, 40));
      assert.match((checked as { error: string }).error, why);
      const r = await call(sb, s);
      assert.equal(r.status >= 500, true);
      assert.match(r.error?.message ?? '', why);
      assert.equal(r.error?.kind, code.includes('x'.repeat(100)) ? 'limit' : 'load');
    }
  });

  it('keeps module state between invocations of one version, starts fresh for a new version or after unload', async (t) => {
    const sb = testSandbox(t);
    const code = (tag: string) => `import { createIntegration } from '@switchyard/runtime';
      let hits = 0;
      export default createIntegration({ fetch: async () => new Response('${tag}:' + ++hits) });`;
    const v1 = { name: 'counter', version: 'v1', code: code('v1') };
    assert.equal((await call(sb, v1)).text, 'v1:1');
    assert.equal((await call(sb, v1)).text, 'v1:2');
    const v2 = { name: 'counter', version: 'v2', code: code('v2') };
    assert.equal((await call(sb, v2)).text, 'v2:1');
    await sb.unload('counter');
    assert.equal((await call(sb, v2)).text, 'v2:1');
  });

  it('keeps only well-formed names from what a script says it exports, and the worker survives values JSON cannot carry', async (t) => {
    const sb = testSandbox(t);
    const odd = script(`export default { async fetch() { return new Response('still here'); }, components: { map: () => [1n, 'real', { toString: 0 }] } };`);
    const checked = await sb.check(odd);
    assert.ok(checked.ok);
    assert.deepEqual(checked.exports, { fetch: true, components: ['real'], events: [] });
    const r = await call(sb, odd);
    assert.equal(r.text, 'still here');
    assert.equal(r.error, undefined);
  });

  it('gives concurrent invocations of one integration isolates of their own', async (t) => {
    const sb = testSandbox(t, { concurrency: 3 });
    const s = script(`import { createIntegration } from '@switchyard/runtime';
      const isolateId = crypto.randomUUID();
      export default createIntegration({ async fetch() { await new Promise((r) => setTimeout(r, 150)); return new Response(isolateId); } });`);
    const results = await Promise.all([1, 2, 3].map(() => call(sb, s)));
    assert.deepEqual(
      results.map((r) => r.status),
      [200, 200, 200],
    );
    assert.equal(new Set(results.map((r) => r.text)).size, 3);
  });

  it('runs invocations that answer at once one after another on the same warm isolate', async (t) => {
    const sb = testSandbox(t, { concurrency: 4 });
    const s = script(`import { createIntegration } from '@switchyard/runtime';
      const isolateId = crypto.randomUUID();
      export default createIntegration({ async fetch() { return new Response(isolateId); } });`);
    const first = await call(sb, s);
    // Twenty at once: each is over before the worker takes the next, so none needs another isolate.
    const results = await Promise.all(Array.from({ length: 20 }, () => call(sb, s)));
    assert.deepEqual(new Set(results.map((r) => r.text)), new Set([first.text]));
  });

  it("off the inline path, code an invocation leaves running after its answer stays its own: not in the next invocation's logs, requests or CPU time", async (t) => {
    const hits: string[] = [];
    const upstream = await localServer(t, (req, res) => {
      hits.push(req.url!);
      res.end('ok');
    });
    const sb = testSandbox(t, { concurrency: 1, limits: { cpu_time: 300 } });
    const s = fetchScript(`
      const p = new URL(request.url).pathname;
      if (p === '/spin') { const end = Date.now() + 150; while (Date.now() < end) {} return new Response('spun'); }
      if (p === '/a') {
        // Two timers due together: the answer comes with the first, the second's code runs after it.
        const first = new Promise((r) => setTimeout(r, 0));
        const second = new Promise((r) => setTimeout(r, 0));
        second.then(() => {
          console.log('A after its answer');
          fetch('${upstream.url}/from-a').catch(() => {});
          // Long enough to still run when the 400 ms check comes, however late a loaded machine runs it (a 2 s spin once ended first in a full run).
          if (new URL(request.url).searchParams.has('spin')) { const end = Date.now() + 10000; while (Date.now() < end) {} }
        });
        await first;
        // Answered from a call that runs a while (?spin): the second timer's call, due with the
        // first, is certain to be queued behind this one by then, however late the host fires it.
        if (new URL(request.url).searchParams.has('spin')) { const end = Date.now() + 100; while (Date.now() < end) {} }
        return new Response('A');
      }
      console.log('B');
      await new Promise((r) => setTimeout(r, 20));
      return new Response('B');`);
    // A 150 ms call overdraws the stall allowance: this integration now runs on isolated-vm's threads.
    assert.equal((await call(sb, s, { url: 'https://x.test/spin' })).text, 'spun');
    for (let i = 0; i < 3; i++) {
      const [a, b] = await Promise.all([call(sb, s, { url: 'https://x.test/a' }), call(sb, s, { url: 'https://x.test/b' })]);
      assert.equal(a.text, 'A');
      assert.equal(b.text, 'B', b.error?.message);
      assert.deepEqual(
        b.logs.map((l) => l.message),
        ['B'],
      );
    }
    await new Promise((r) => setTimeout(r, 100));
    assert.deepEqual(hits, [], 'no request made by code after its answer');
    assert.deepEqual(
      sb.late.filter((l) => l.line.message.includes('A after')),
      [],
    );
    // Left running past the CPU limit after its answer: the isolate is disposed, the record says so,
    // and the next invocation runs on a fresh one, charged nothing of it.
    // Its second timer's code is on its way into the isolate when A ends only if the host delivered
    // that timer before the end (an ended invocation's timers are dropped: nothing of it runs). A
    // answers after a 100 ms spin in the call the first timer made, so the second is queued by then;
    // before that spin, five tries in a row once missed in a full run. Still tried up to five times.
    let late: Awaited<ReturnType<typeof waitForLate>> | undefined;
    for (let attempt = 0; attempt < 5 && !late; attempt++) {
      const [a, b] = await Promise.all([call(sb, s, { url: 'https://x.test/a?spin' }), call(sb, s, { url: 'https://x.test/b' })]);
      assert.equal(a.text, 'A');
      assert.equal(b.text, 'B', b.error?.message);
      assert.ok(b.cpuMs < 100, `B charged ${b.cpuMs} ms`);
      // The disposal is noticed by a timer 400 ms after A's answer; B can be answered before it lands.
      late = await waitForLate(sb, a.requestId, 1, 4_000).catch(() => undefined);
    }
    assert.ok(late, 'in five tries, code left running after the answer was never disposed with a late line');
    assert.deepEqual(
      late.map((l) => l.level),
      ['error'],
    );
    assert.match(late[0].message, /still running 400 ms after its invocation ended.*disposed/);
  });

  it('runs guest calls inline until one runs long; that integration then runs apart, so the others answer during its long calls', async (t) => {
    const sb = testSandbox(t, { limits: { cpu_time: 2000 } });
    const heavy = fetchScript(`
      const spin = Number(new URL(request.url).searchParams.get('spin'));
      if (spin) { const end = Date.now() + spin; while (Date.now() < end) {} }
      return new Response('heavy');`);
    const light = fetchScript(`return new Response('light');`);
    // Both loaded (and light calls are cheap), then a long call of heavy and a call of light together.
    assert.equal((await call(sb, heavy)).text, 'heavy');
    assert.equal((await call(sb, light)).text, 'light');
    const race = async () => {
      const order: string[] = [];
      await Promise.all([call(sb, heavy, { url: 'https://x.test/?spin=300' }), call(sb, light)].map((p) => p.then((r) => order.push(r.text))));
      return order;
    };
    // One call a little over 10 ms (as a garbage collection of the guest's heap can make one) is
    // within the integration's stall allowance: it stays inline.
    assert.equal((await call(sb, heavy, { url: 'https://x.test/?spin=15' })).text, 'heavy');
    // Inline: light waits behind heavy's 300 ms call on the worker's thread.
    assert.deepEqual(await race(), ['heavy', 'light']);
    // That call ran long: heavy now runs on an isolate thread of its own, and light answers first.
    assert.deepEqual(await race(), ['light', 'heavy']);
  });
  it("a call's host work counts too: a guest that spends its calls in the host's random bytes leaves the inline path as a spinning one does", async (t) => {
    const sb = testSandbox(t, { limits: { cpu_time: 2000 } });
    // Nearly all of such a call is the host's (crypto.getRandomValues is the host's, inline): the
    // isolate's own CPU count sees a few ms of it, the thread's all of it.
    const heavy = fetchScript(`
      const n = Number(new URL(request.url).searchParams.get('host'));
      const buf = new Uint8Array(65536);
      const started = Date.now();
      for (let i = 0; i < n; i++) crypto.getRandomValues(buf);
      return new Response('heavy ' + (Date.now() - started));`);
    const light = fetchScript(`return new Response('light');`);
    assert.match((await call(sb, heavy)).text, /^heavy /);
    assert.equal((await call(sb, light)).text, 'light');
    // A count of host calls, not a time: CPU work of its own whatever the machine's load (about
    // 50 ms quiet), where the allowance lets 30 ms pass; the isolate's own count sees under 30 of it.
    const race = async () => {
      const order: string[] = [];
      await Promise.all([call(sb, heavy, { url: 'https://x.test/?host=600' }), call(sb, light)].map((p) => p.then((r) => order.push(r.text.split(' ')[0]))));
      return order;
    };
    assert.deepEqual(await race(), ['heavy', 'light']);
    assert.deepEqual(await race(), ['light', 'heavy'], 'a call spent nearly all in the host moved heavy off the inline path');
  });
});

describe('outbound fetch', () => {
  it('reaches a server, follows redirects with each hop re-checked, and honours redirect: manual and error', async (t) => {
    const upstream = await localServer(t, (req, res) => {
      const m = /^\/hop\/(\d+)/.exec(req.url!);
      if (m && Number(m[1]) > 0) {
        res.writeHead(302, { location: `/hop/${Number(m[1]) - 1}` });
        return res.end();
      }
      if (req.url === '/see-other') {
        res.writeHead(303, { location: '/echo' });
        return res.end();
      }
      res.writeHead(200, { 'content-type': 'application/json', 'x-upstream': 'yes' });
      res.end(JSON.stringify({ method: req.method, url: req.url, body: req.body.toString(), auth: req.headers.authorization ?? null }));
    });
    const sb = testSandbox(t);
    const s = fetchScript(`
      const { url, init } = await request.json();
      try {
        const res = await fetch(url, init);
        return Response.json({ status: res.status, redirected: res.redirected, url: res.url, upstream: res.headers.get('x-upstream'), location: res.headers.get('location'), body: await res.text() });
      } catch (e) {
        return Response.json({ error: e.name + ': ' + e.message });
      }`);
    const go = async (url: string, init: Record<string, unknown> = {}) => (await call(sb, s, { method: 'POST', body: JSON.stringify({ url, init }) })).json();

    const direct = await go(`${upstream.url}/echo`, { method: 'PUT', body: 'payload', headers: { authorization: 'Bearer x' } });
    assert.deepEqual(direct, {
      status: 200,
      redirected: false,
      url: `${upstream.url}/echo`,
      upstream: 'yes',
      location: null,
      body: JSON.stringify({ method: 'PUT', url: '/echo', body: 'payload', auth: 'Bearer x' }),
    });
    const followed = await go(`${upstream.url}/hop/5`);
    assert.equal(followed.status, 200);
    assert.equal(followed.redirected, true);
    assert.equal(followed.url, `${upstream.url}/hop/0`);
    assert.match((await go(`${upstream.url}/hop/6`)).error, /more than 5 redirects/);
    const seeOther = await go(`${upstream.url}/see-other`, { method: 'POST', body: 'dropped' });
    assert.deepEqual(JSON.parse(seeOther.body), { method: 'GET', url: '/echo', body: '', auth: null });
    const manual = await go(`${upstream.url}/hop/1`, { redirect: 'manual' });
    assert.deepEqual([manual.status, manual.location], [302, '/hop/0']);
    assert.match((await go(`${upstream.url}/hop/1`, { redirect: 'error' })).error, /redirect mode is 'error'/);
    assert.match((await go('file:///etc/passwd')).error, /only http: and https:/);
  });

  it("refuses private addresses unless allowed, and the server's own origin always", async (t) => {
    const upstream = await localServer(t, (_req, res) => res.end('private data'));
    const own = await localServer(t, (_req, res) => res.end('management API'));
    const strict = testSandbox(t, { allowPrivateNetworks: false, serverOrigin: own.url });
    const s = fetchScript(`
      const url = await request.text();
      try { return new Response(await (await fetch(url)).text()); } catch (e) { return new Response('refused: ' + e.message, { status: 502 }); }`);
    for (const url of [
      `${upstream.url}/`,
      `http://localhost:${upstream.port}/`,
      'http://169.254.169.254/latest/meta-data/',
      'http://[::1]:1/',
      'http://0x7f.1/',
    ]) {
      const r = await call(strict, s, { method: 'POST', body: url });
      assert.equal(r.status, 502, url);
      assert.match(r.text, /refused/, url);
    }
    const open = testSandbox(t, { allowPrivateNetworks: true, serverOrigin: own.url });
    assert.equal((await call(open, s, { method: 'POST', body: `${upstream.url}/` })).text, 'private data');
    const ownSpellings = [
      `${own.url}/api/v1/integrations`,
      `http://localhost:${own.port}/api/v1/integrations`,
      // IPv4 carried in IPv6 (URL writes the first as [::ffff:7f00:1]) and numeric IPv4 spellings.
      `http://[::ffff:127.0.0.1]:${own.port}/api/v1/integrations`,
      `http://[0:0:0:0:0:ffff:7f00:1]:${own.port}/metrics`,
      `http://[::127.0.0.1]:${own.port}/console/session`,
      `http://[::ffff:0:127.0.0.1]:${own.port}/api/v1/integrations`,
      `http://2130706433:${own.port}/api/v1/integrations`,
      `http://0x7f.1:${own.port}/api/v1/integrations`,
    ];
    for (const url of ownSpellings) {
      const r = await call(open, s, { method: 'POST', body: url });
      assert.match(r.text, /is this server; integrations reach its API only through context\.api/, url);
    }
    assert.equal(own.hits.length, 0);
  });

  it('caps sub-request bodies and time', async (t) => {
    const upstream = await localServer(t, (req, res) => {
      if (req.url === '/slow') return setTimeout(() => res.end('late'), 2000);
      res.end('x'.repeat(2048));
    });
    const sb = testSandbox(t, { limits: { subrequest_body: 1024, subrequest_timeout: 200 } });
    const s = fetchScript(`
      try { return new Response(await (await fetch(await request.text())).text()); } catch (e) { return new Response(e.name + ': ' + e.message, { status: 502 }); }`);
    assert.match((await call(sb, s, { method: 'POST', body: `${upstream.url}/big` })).text, /larger than sandbox\.subrequest_body = 1024 bytes/);
    assert.match((await call(sb, s, { method: 'POST', body: `${upstream.url}/slow` })).text, /TimeoutError: .*subrequest_timeout = 200 ms/);
  });
});

describe('context.api', () => {
  it('calls apiEndpoint with the installation token and refuses paths outside it', async (t) => {
    const api = await localServer(t, (req, res) => {
      res.writeHead(req.url!.includes('missing') ? 404 : 200, { 'content-type': 'application/json' });
      res.end(
        req.url!.includes('missing')
          ? JSON.stringify({ error: { code: 'not_found', message: 'no such installation' } })
          : JSON.stringify({ path: req.url, got: req.body.toString() || null }),
      );
    });
    const sb = testSandbox(t);
    const s = fetchScript(`
      const out = {};
      out.get = await context.api.installations.get('inst 1');
      out.update = await context.api.installations.update('inst_1', { configuration: { a: 1 } });
      out.raw = await context.api.request('POST', '/api/v1/events', { type: 'x' });
      for (const p of ['../../secrets', 'installations/missing']) {
        try { await context.api.request('GET', p); } catch (e) { out[p] = e.message; }
      }
      return Response.json(out);`);
    const r = await call(sb, s, {
      environment: { apiEndpoint: `${api.url}/api/v1`, apiTokens: { installation: 'sy_inv_abc', integration: 'sy_int_zzz' } },
    });
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(r.json(), {
      get: { path: '/api/v1/installations/inst%201', got: null },
      update: { path: '/api/v1/installations/inst_1', got: '{"configuration":{"a":1}}' },
      raw: { path: '/api/v1/events', got: '{"type":"x"}' },
      '../../secrets': 'context.api: "../../secrets" is outside ' + `${api.url}/api/v1`,
      'installations/missing': 'API GET installations/missing answered 404: not_found: no such installation',
    });
    assert.deepEqual(
      api.hits.map((h) => [h.method, h.headers.authorization]),
      [
        ['GET', 'Bearer sy_inv_abc'],
        ['PATCH', 'Bearer sy_inv_abc'],
        ['POST', 'Bearer sy_inv_abc'],
        ['GET', 'Bearer sy_inv_abc'],
      ],
    );
  });
});

describe('runtime library', () => {
  it('runs an esbuild-bundled TSX script that uses the JSX runtime', async (t) => {
    const { build } = await import('esbuild');
    const out = await build({
      stdin: {
        contents: `import { createIntegration, createComponent } from '@switchyard/runtime';
          const Row = ({ label }: { label: string }) => <hstack><text>{label}</text></hstack>;
          const list = createComponent<{ items: string[] }, {}>({
            componentId: 'list',
            render: async (element) => <block>{element.props.items.map((i) => <Row label={i} />)}<divider /></block>,
          });
          export default createIntegration({ components: [list] });`,
        loader: 'tsx',
        resolveDir: process.cwd(),
      },
      bundle: true,
      write: false,
      format: 'esm',
      jsx: 'automatic',
      jsxImportSource: '@switchyard/runtime',
      external: ['@switchyard/runtime', '@switchyard/runtime/*'],
    });
    const sb = testSandbox(t);
    const s = { name: 'tsx', version: '1', code: out.outputFiles[0].text };
    const r = await invokeEnvelope(sb, s, { event: { type: 'ui_render', componentId: 'list', props: { items: ['a', 'b'] } }, environment: {} });
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(r.json().element, {
      type: 'block',
      children: [
        { type: 'hstack', children: [{ type: 'text', children: ['a'] }] },
        { type: 'hstack', children: [{ type: 'text', children: ['b'] }] },
        { type: 'divider' },
      ],
    });
  });
});

describe('crypto', () => {
  it('computes HMAC and digests like Node, verifies in constant time, and gives random values', async (t) => {
    const sb = testSandbox(t);
    const s = fetchScript(`
      const enc = new TextEncoder();
      const hex = (b) => [...new Uint8Array(b)].map((x) => x.toString(16).padStart(2, '0')).join('');
      const key = await crypto.subtle.importKey('raw', enc.encode('secret'), { name: 'HMAC', hash: 'SHA-256' }, false, ['sign', 'verify']);
      const sig = await crypto.subtle.sign('HMAC', key, enc.encode('1636936200.hello !'));
      const tampered = new Uint8Array(sig.slice(0)); tampered[0] ^= 1;
      return Response.json({
        hmac: hex(sig),
        ok: await crypto.subtle.verify('HMAC', key, sig, enc.encode('1636936200.hello !')),
        bad: await crypto.subtle.verify('HMAC', key, tampered, enc.encode('1636936200.hello !')),
        sha1: hex(await crypto.subtle.digest('SHA-1', enc.encode('abc'))),
        sha256: hex(await crypto.subtle.digest({ name: 'SHA-256' }, enc.encode('abc'))),
        uuid: crypto.randomUUID(),
        random: [...crypto.getRandomValues(new Uint8Array(32))],
      });`);
    const r = (await call(sb, s)).json();
    assert.equal(r.hmac, createHmac('sha256', 'secret').update('1636936200.hello !').digest('hex'));
    assert.equal(r.hmac, '1b3d69df55f1e52f05224ba94a5162abeb17ef52cd7f4948c390f810d6a87e98');
    assert.deepEqual([r.ok, r.bad], [true, false]);
    assert.equal(r.sha1, createHash('sha1').update('abc').digest('hex'));
    assert.equal(r.sha256, createHash('sha256').update('abc').digest('hex'));
    assert.match(r.uuid, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    assert.ok(new Set(r.random).size > 10);
  });

  it("digests and HMACs of large data (hashed off the event loop) equal Node's, and verify tells a tampered signature", async (t) => {
    const sb = testSandbox(t);
    const s = fetchScript(`
      const hex = (b) => [...new Uint8Array(b)].map((x) => x.toString(16).padStart(2, '0')).join('');
      const big = new Uint8Array(1 << 20).map((_, i) => (i * 7) & 255);
      const key = await crypto.subtle.importKey('raw', new TextEncoder().encode('secret'), { name: 'HMAC', hash: 'SHA-256' }, false, ['sign', 'verify']);
      const sig = await crypto.subtle.sign('HMAC', key, big);
      const tampered = new Uint8Array(sig.slice(0)); tampered[31] ^= 1;
      return Response.json({
        sha256: hex(await crypto.subtle.digest('SHA-256', big)),
        sha512: hex(await crypto.subtle.digest('SHA-512', big)),
        hmac: hex(sig),
        ok: await crypto.subtle.verify('HMAC', key, sig, big),
        bad: await crypto.subtle.verify('HMAC', key, tampered, big),
      });`);
    const r = (await call(sb, s)).json();
    const big = Buffer.from(new Uint8Array(1 << 20).map((_, i) => (i * 7) & 255));
    assert.equal(r.sha256, createHash('sha256').update(big).digest('hex'));
    assert.equal(r.sha512, createHash('sha512').update(big).digest('hex'));
    assert.equal(r.hmac, createHmac('sha256', 'secret').update(big).digest('hex'));
    assert.deepEqual([r.ok, r.bad], [true, false]);
  });
});

describe("the host's off-loop hashing", () => {
  it("runs at most two large digests at once, the rest in turn, each equal to Node's; none left counted", async () => {
    const data = Array.from({ length: 8 }, (_, i) => new Uint8Array(4 << 20).fill(i));
    let most = 0;
    const watch = setInterval(() => (most = Math.max(most, offLoopHashes())), 0);
    try {
      const results = await Promise.all(data.map((d) => performCrypto('digest', { hash: 'SHA-256', data: d })));
      results.forEach((r, i) => assert.equal(Buffer.from(r as Uint8Array).toString('hex'), createHash('sha256').update(data[i]).digest('hex')));
    } finally {
      clearInterval(watch);
    }
    assert.ok(most >= 1 && most <= 2, `at most two at once, saw ${most}`);
    assert.equal(offLoopHashes(), 0);
  });
});

describe('the worker process', () => {
  it('answers invocations of a crashed worker with 503 crash, and the next invocation runs in a new worker', async (t) => {
    const sb = testSandbox(t);
    const s = fetchScript(`if (new URL(request.url).pathname === '/hang') await new Promise((r) => setTimeout(r, 10_000)); return new Response('alive');`);
    assert.equal((await call(sb, s)).text, 'alive');
    const hanging = call(sb, s, { url: 'https://x.test/hang' });
    await new Promise((r) => setTimeout(r, 200));
    const pid = execFileSync('pgrep', ['-P', String(process.pid), '-f', 'sandbox-worker'], { encoding: 'utf8' })
      .trim()
      .split('\n')[0];
    process.kill(Number(pid), 'SIGKILL');
    const crashed = await hanging;
    assert.equal(crashed.status, 503);
    assert.equal(crashed.error?.kind, 'crash');
    assert.match(crashed.error?.message ?? '', /worker process exited/);
    assert.equal((await call(sb, s)).text, 'alive');
    assert.ok(sb.logs.some((l) => String(l.msg).includes('sandbox worker exited')));
  });
});
