/**
 * Spec 6.1: `ui_render` is among the events handlers, "emitted when the integration's UI component
 * is rendered". A render (the API the console uses) also calls `events.ui_render`, fire and
 * forget: it never delays the render nor fails it. GitBook's runtime has no such event, so a
 * gitbook-manifest.yaml's handler is not called.
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type ServerResponse } from 'node:http';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startTestServer, tmpDir, waitFor, type TestServer } from './helpers/index.ts';

const CODE = `import { createComponent, createIntegration } from '@switchyard/runtime';
const widget = createComponent({
  componentId: 'widget',
  initialState: () => ({ n: 1 }),
  action: async (element: any) => ({ state: { n: element.state.n + 1 } }),
  render: async (element: any) => ({ type: 'block', children: [{ type: 'text', text: 'n=' + element.state.n }] }),
});
export default createIntegration({
  components: [widget],
  events: {
    ui_render: async (event: any, context: any) => {
      const mode = event.props?.mode ?? 'plain';
      console.log('ui_render handler: ' + event.componentId + ' mode=' + mode + ' state=' + JSON.stringify(event.state ?? null) + ' installation=' + context.environment.installation?.id);
      if (mode === 'throw') throw new Error('the handler failed on purpose');
      if (mode === 'loop') for (;;);
      if (mode === 'gated') {
        // Held until the test lets it go: the render must have answered meanwhile.
        await fetch(event.props.gate);
        console.log('gated handler done');
      }
    },
  },
});
`;

function integrations(t: TestContext): string {
  const dir = tmpDir(t);
  for (const [name, file] of [
    ['renders', 'platform-manifest.yaml'],
    ['gb-renders', 'gitbook-manifest.yaml'],
  ]) {
    mkdirSync(join(dir, name));
    writeFileSync(
      join(dir, name, file),
      [
        `name: ${name}`,
        `title: ${name}`,
        'description: ui_render handler test.',
        'organization: switchyard-tests',
        'visibility: private',
        'scopes: []',
        'script: ./index.ts',
        '',
      ].join('\n'),
    );
    writeFileSync(join(dir, name, 'index.ts'), CODE);
  }
  return dir;
}

/** An HTTP server that holds every request until release(). */
async function gate(t: TestContext) {
  const held: ServerResponse[] = [];
  let hits = 0;
  const server = createServer((_req, res) => {
    hits++;
    held.push(res);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.after(() => new Promise<void>((r) => (server.closeAllConnections(), server.close(() => r()))));
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}/gate`,
    hits: () => hits,
    release: () => held.splice(0).forEach((res) => res.end('go')),
  };
}

async function setUp(t: TestContext) {
  const s = await startTestServer(t, { integrations_dir: integrations(t) });
  const install = async (integration: string) => {
    const r = await s.api('POST', '/api/v1/installations', { integration });
    assert.equal(r.status, 201, JSON.stringify(r.body));
    return r.body.installation.id as string;
  };
  return { s, install };
}

/** The invocations of an installation's ui_render handler (its render's own records print nothing). */
async function handlerRuns(s: TestServer, installation: string) {
  const r = await s.api('GET', `/api/v1/logs?installation=${installation}`);
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return (r.body.invocations as any[]).filter((i) => i.eventType === 'ui_render' && JSON.stringify(i.logs).includes('ui_render handler'));
}

test('a render calls events.ui_render with the render event, as its own invocation', async (t) => {
  const { s, install } = await setUp(t);
  const id = await install('renders');
  const r = await s.api('POST', `/api/v1/installations/${id}/render`, { componentId: 'widget', props: {}, state: { n: 4 }, action: { action: 'add' } });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  assert.deepEqual(r.body.state, { n: 5 });
  const [run] = await waitFor(async () => {
    const runs = await handlerRuns(s, id);
    return runs.length ? runs : undefined;
  });
  assert.equal(run.status, 200);
  assert.match(JSON.stringify(run.logs), new RegExp(`ui_render handler: widget mode=plain state=\\{\\\\"n\\\\":4\\} installation=${id}`));
});

test('a slow ui_render handler does not delay the render, a throwing one does not fail it (its error is in the integration log)', async (t) => {
  const g = await gate(t);
  const { s, install } = await setUp(t);
  const id = await install('renders');
  // The handler waits on the gate, which stays shut until the render has answered.
  const slow = await s.api('POST', `/api/v1/installations/${id}/render`, { componentId: 'widget', props: { mode: 'gated', gate: g.url } });
  assert.equal(slow.status, 200, JSON.stringify(slow.body));
  assert.deepEqual(slow.body.element, { type: 'block', children: [{ type: 'text', text: 'n=1' }] });
  await waitFor(() => g.hits() === 1);
  assert.equal((await handlerRuns(s, id)).length, 0, 'the handler is still waiting at the gate');
  g.release();
  const [done] = await waitFor(async () => {
    const runs = await handlerRuns(s, id);
    return runs.length ? runs : undefined;
  });
  assert.match(JSON.stringify(done.logs), /gated handler done/);

  const thrown = await s.api('POST', `/api/v1/installations/${id}/render`, { componentId: 'widget', props: { mode: 'throw' } });
  assert.equal(thrown.status, 200, JSON.stringify(thrown.body));
  assert.deepEqual(thrown.body.element, { type: 'block', children: [{ type: 'text', text: 'n=1' }] });
  const failed = await waitFor(async () => (await handlerRuns(s, id)).find((i) => i.error));
  assert.equal(failed.status, 500);
  assert.match(failed.error.message, /the handler failed on purpose/);

  // One that never ends is stopped by its own limit; the render is answered, and the next one too.
  const looped = await s.api('POST', `/api/v1/installations/${id}/render`, { componentId: 'widget', props: { mode: 'loop' } });
  assert.equal(looped.status, 200, JSON.stringify(looped.body));
  const stopped = await waitFor(async () => (await handlerRuns(s, id)).find((i) => i.error?.kind === 'limit'), 15_000);
  assert.match(stopped.error.message, /cpu_time|wall_time/);
  assert.equal((await s.api('POST', `/api/v1/installations/${id}/render`, { componentId: 'widget', props: {} })).status, 200);
});

test("a gitbook-manifest.yaml's ui_render handler is not called on render (GitBook's runtime has no such event)", async (t) => {
  const { s, install } = await setUp(t);
  const gb = await install('gb-renders');
  const spec = await install('renders');
  assert.equal((await s.api('POST', `/api/v1/installations/${gb}/render`, { componentId: 'widget', props: {} })).status, 200);
  // The spec integration's handler, fired after the GitBook one's render, has run: so would have the GitBook one's.
  assert.equal((await s.api('POST', `/api/v1/installations/${spec}/render`, { componentId: 'widget', props: {} })).status, 200);
  await waitFor(async () => (await handlerRuns(s, spec)).length === 1);
  assert.equal((await handlerRuns(s, gb)).length, 0);
});

test('the logs leave out renders and their ui_render handler runs with renders=false (what a console visit causes), and keep the rest', async (t) => {
  const { s, install } = await setUp(t);
  const id = await install('renders');
  assert.equal((await s.api('POST', `/api/v1/installations/${id}/render`, { componentId: 'widget', props: {} })).status, 200);
  await waitFor(async () => (await handlerRuns(s, id)).length === 1);
  // Something else the integration ran: a request to its public endpoint.
  const endpoint = (await s.api('GET', `/api/v1/installations/${id}`)).body.installation.urls.publicEndpoint;
  await (await fetch(`${endpoint}/hello`)).arrayBuffer();
  const types = async (query: string) => {
    const r = await s.api('GET', `/api/v1/logs?installation=${id}${query}`);
    assert.equal(r.status, 200, JSON.stringify(r.body));
    return (r.body.invocations as Array<{ eventType: string }>).map((i) => i.eventType);
  };
  assert.deepEqual(await types(''), ['fetch', 'ui_render', 'ui_render'], 'by default every invocation');
  assert.deepEqual(await types('&renders=true'), ['fetch', 'ui_render', 'ui_render']);
  assert.deepEqual(await types('&renders=false'), ['fetch']);
  const bad = await s.api('GET', `/api/v1/logs?renders=no`);
  assert.equal(bad.status, 400);
  assert.match(JSON.stringify(bad.body), /must be true or false, got \\"no\\"/);

  // The live feed takes the same filter: from the start, only the fetch.
  const ac = new AbortController();
  const res = await fetch(`${s.url}/api/v1/logs/stream?after=0&installation=${id}&renders=false`, {
    headers: { authorization: `Bearer ${s.token}` },
    signal: ac.signal,
  });
  assert.equal(res.status, 200);
  const reader = res.body!.getReader();
  let text = '';
  while (!text.includes('"eventType":"fetch"')) text += new TextDecoder().decode((await reader.read()).value);
  ac.abort();
  assert.doesNotMatch(text, /ui_render/);
});
