/**
 * The invocation's context as integration code sees it: context.api and context.integration are
 * made on first use (dispatch.ts), and must still behave as the plain data properties they were.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { call, fetchScript, testSandbox } from './sandbox.helpers.ts';

test('context.api and context.integration can be replaced, spread, redefined and listed as before they were made lazily', async (t) => {
  const sb = testSandbox(t);
  const s = fetchScript(`
    const out = {};
    const own = (k) => { const d = Object.getOwnPropertyDescriptor(context, k); return d ? ('value' in d ? 'data' : 'accessor') + (d.writable === false ? ',readonly' : '') : 'absent'; };
    out.keys = Object.keys(context).sort().join(',');
    out.spread = Object.keys({ ...context }).sort().join(',');
    out.same = context.api === context.api && context.integration === context.integration;
    const wrapped = { request: async () => 'wrapped' };
    try { context.api = wrapped; out.assignApi = context.api === wrapped; } catch (e) { out.assignApi = e.name + ': ' + e.message; }
    try { context.integration = { api: wrapped }; out.assignIntegration = context.integration.api === wrapped; } catch (e) { out.assignIntegration = e.name + ': ' + e.message; }
    Object.defineProperty(context, 'api', { get() { throw new Error('mine'); }, configurable: true });
    try { context.api; out.redefined = 'no throw'; } catch (e) { out.redefined = e.message; }
    return Response.json(out);`);
  const r = await call(sb, s, { environment: { apiEndpoint: 'http://127.0.0.1:1/api/v1', apiTokens: { installation: 'sy_inv_a', integration: 'sy_int_b' } } });
  assert.equal(r.status, 200, r.text);
  assert.deepEqual(r.json(), {
    keys: 'api,environment,integration,log,waitUntil',
    spread: 'api,environment,integration,log,waitUntil',
    same: true,
    // Integration code (ES modules: strict mode) that swaps in its own client, or a test double,
    // must not get "Cannot set property api of #<Object> which has only a getter".
    assignApi: true,
    assignIntegration: true,
    redefined: 'mine',
  });
});

test("context.environment is the invocation's own, whenever its code first reads it (handed over on first read): after an await, changed in place, replaced, and never another invocation's", async (t) => {
  for (const inProcess of [false, true]) {
    const sb = testSandbox(t, { inProcess });
    const s = fetchScript(`
      const url = new URL(request.url);
      if (url.searchParams.has('wait')) await new Promise((r) => setTimeout(r, 5));
      const out = { id: context.environment.installation.id, same: context.environment === context.environment, marked: context.environment.marked ?? null };
      context.environment.marked = out.id;
      out.kept = context.environment.marked;
      out.keys = Object.keys({ ...context }).sort().join(',');
      if (url.searchParams.has('replace')) { context.environment = { installation: { id: 'replaced' } }; out.replaced = context.environment.installation.id; }
      return Response.json(out);`);
    const env = (id: string) => ({ installation: { id } });
    const first = await call(sb, s, { url: 'https://integration.test/?wait', environment: env('inst_a') });
    assert.equal(first.status, 200, first.text);
    assert.deepEqual(first.json(), { id: 'inst_a', same: true, marked: null, kept: 'inst_a', keys: 'api,environment,integration,log,waitUntil' });
    // The same isolate, another installation: its own environment, without the first one's change.
    const [second, third] = await Promise.all([
      call(sb, s, { environment: env('inst_b') }),
      call(sb, s, { url: 'https://integration.test/?replace', environment: env('inst_c') }),
    ]);
    assert.deepEqual(second.json(), { id: 'inst_b', same: true, marked: null, kept: 'inst_b', keys: 'api,environment,integration,log,waitUntil' });
    assert.deepEqual(third.json(), {
      id: 'inst_c',
      same: true,
      marked: null,
      kept: 'inst_c',
      keys: 'api,environment,integration,log,waitUntil',
      replaced: 'replaced',
    });
  }
});

test("the state the guest's Request, Response, Headers and bodies keep is out of integration code's reach: no own keys, brand checks throw, frozen objects still work", async (t) => {
  const sb = testSandbox(t, { inProcess: true });
  const s = fetchScript(`
    const out = {};
    const h = new Headers({ 'x-a': '1' });
    out.keys = [request, request.headers, h, new Response('x')].map((o) => Reflect.ownKeys(o).length);
    for (const [name, fn] of [['get', () => Headers.prototype.get.call({}, 'x')], ['url', () => Object.getOwnPropertyDescriptor(Request.prototype, 'url').get.call({})], ['status', () => Object.getOwnPropertyDescriptor(Response.prototype, 'status').get.call(Object.create(Response.prototype))]]) {
      try { const r = fn(); out[name] = r instanceof Promise ? await r.then(() => 'resolved', (e) => e.name) : 'returned ' + r; } catch (e) { out[name] = e.name; }
    }
    Object.freeze(h);
    const res = new Response('frozen ' + h.get('x-a') + ' ' + (await request.text()), { headers: h });
    Object.freeze(res);
    out.body = await res.clone().text();
    return new Response(JSON.stringify(out), { headers: Object.freeze(new Headers({ 'content-type': 'application/json' })) });`);
  const r = await call(sb, s, { method: 'POST', body: 'payload' });
  assert.equal(r.status, 200, r.text);
  assert.deepEqual(r.json(), { keys: [0, 0, 0, 0], get: 'TypeError', url: 'TypeError', status: 'TypeError', body: 'frozen 1 payload' });
});

test("a context kept from an earlier invocation does not hand over that invocation's environment later: reading it says the invocation is over", async (t) => {
  const sb = testSandbox(t, { inProcess: true });
  const s = fetchScript(`
    if (!globalThis.kept) { globalThis.kept = context; return new Response('kept'); }
    try { return new Response('read ' + JSON.stringify(globalThis.kept.environment)); } catch (e) { return new Response(e.message); }`);
  assert.equal((await call(sb, s, { environment: { installation: { id: 'inst_a' } } })).text, 'kept');
  const later = await call(sb, s, { environment: { installation: { id: 'inst_b' } } });
  assert.equal(later.status, 200, later.text);
  assert.match(later.text, /this invocation is over: its environment is no longer available/);
  assert.doesNotMatch(later.text, /inst_/);
});
