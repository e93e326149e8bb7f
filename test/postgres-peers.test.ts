/**
 * Nodes on one PostgreSQL store compare the integration versions they serve: a node whose
 * folder holds another version says so in /healthz (`nodes.differ`) and its log.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { postgresFor } from './helpers/postgres.ts';
import { freshPostgresDatabase, startTestServer, tmpDir, waitFor } from './helpers/index.ts';
import { differences } from '../src/registry/peers.ts';

function folderWith(t: Parameters<typeof tmpDir>[0], answer: string): string {
  const dir = tmpDir(t);
  mkdirSync(join(dir, 'greeter'));
  writeFileSync(
    join(dir, 'greeter/platform-manifest.yaml'),
    'name: greeter\ntitle: Greeter\ndescription: Says hello.\norganization: o\nvisibility: private\nscopes:\n  - site:views:read\nscript: index.ts\n',
  );
  writeFileSync(
    join(dir, 'greeter/index.ts'),
    `import { createIntegration } from '@switchyard/runtime';\nexport default createIntegration({ fetch: async () => new Response(${JSON.stringify(answer)}) });\n`,
  );
  return dir;
}

test('differences: an integration absent or of another version on a live node is listed, per node', () => {
  const d = differences({ a: 'v1', b: 'v2' }, [
    { node_id: 'n2', integrations: JSON.stringify({ a: 'v1', b: 'v3' }) },
    { node_id: 'n3', integrations: JSON.stringify({ a: 'v1' }) },
    { node_id: 'n4', integrations: 'not json' },
  ]);
  assert.deepEqual(d, [
    { integration: 'a', here: 'v1', others: { n4: null } },
    { integration: 'b', here: 'v2', others: { n2: 'v3', n3: null, n4: null } },
  ]);
  assert.deepEqual(differences({ a: 'v1' }, [{ node_id: 'n2', integrations: '{"a":"v1"}' }]), []);
});

test('two nodes on one PostgreSQL store: the same folder agrees; another version of an integration is said in /healthz and the log', async (t) => {
  const pg = await postgresFor(t);
  if (!pg) return;
  const dataA = join(tmpDir(t), 'data');
  const store = freshPostgresDatabase(dataA, pg.url);
  const a = await startTestServer(t, { store, data_dir: dataA, integrations_dir: folderWith(t, 'hello') });
  const b = await startTestServer(t, { store, integrations_dir: folderWith(t, 'hello') });
  const health = async (s: typeof a) =>
    (await (await fetch(`${s.url}/healthz`)).json()) as {
      nodes: { node: string; count: number; differ: Array<{ integration: string; here: string; others: Record<string, string> }> };
    };
  const agreed = await waitFor(async () => {
    const h = await health(a);
    return h.nodes?.count === 2 ? h : undefined;
  }, 15_000);
  assert.deepEqual(agreed.nodes.differ, [], 'the same folder: nothing differs');
  const nodeB = (await health(b)).nodes.node;
  assert.notEqual(nodeB, agreed.nodes.node, 'each node has its own id');

  const c = await startTestServer(t, { store, integrations_dir: folderWith(t, 'hello, but newer') });
  const nodeC = (await health(c)).nodes.node;
  const seen = await waitFor(async () => {
    const h = await health(a);
    return h.nodes.count === 3 && h.nodes.differ.length ? h : undefined;
  }, 15_000);
  assert.equal(seen.nodes.differ.length, 1);
  assert.equal(seen.nodes.differ[0]!.integration, 'greeter');
  assert.deepEqual(Object.keys(seen.nodes.differ[0]!.others), [nodeC], 'only the node with the other version is named');
  assert.notEqual(seen.nodes.differ[0]!.others[nodeC], seen.nodes.differ[0]!.here);
  const cSays = await waitFor(() => c.logs.find((l) => /other integration versions than other nodes/.test(String(l.msg))), 15_000);
  assert.match(String(cSays.differ), /greeter: \S+ here, \S+ on [0-9a-f]{12}/);
  assert.equal((await fetch(`${a.url}/healthz`)).status, 200, 'a difference is reported, not a failure');
});
