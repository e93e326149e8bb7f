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
