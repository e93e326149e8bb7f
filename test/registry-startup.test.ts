/**
 * The registry's start-up pass in the background (what `serve` uses): readiness, folders shown as
 * loading, a request for an integration loading its folder next and waiting for it (bounded), the
 * winner of a duplicate name unchanged by requests, folders that fail never blocking the others,
 * and the bundle cache across starts (never trusted over a changed file; hot reload unchanged).
 *
 * A folder is held mid-bundle by a FIFO its script imports: esbuild blocks reading it until the
 * test writes to it, so "still loading" is a state the test controls, not a race it hopes to win.
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { defaultConfig } from '../src/config/index.ts';
import { memoryLogger } from '../src/log/index.ts';
import { createRegistry, type RegistryOptions } from '../src/registry/index.ts';
import { SwitchyardError } from '../src/errors.ts';
import { tmpDir, waitFor } from './helpers/index.ts';
import { gatedIntegration } from './registry-support.ts';

const limits = defaultConfig().sandbox;
const settle = () => new Promise((r) => setTimeout(r, 1_100));

function write(dir: string, files: Record<string, string>): void {
  for (const [f, content] of Object.entries(files)) {
    mkdirSync(join(dir, f, '..'), { recursive: true });
    writeFileSync(join(dir, f), content);
  }
}

const manifest = (name: string) => `name: ${name}\ntitle: ${name}\ndescription: test\norganization: o\nvisibility: private\nscopes: []\nscript: index.ts\n`;
const script = (marker: string) =>
  `import { createIntegration } from '@switchyard/runtime';\nexport default createIntegration({ fetch: async () => new Response(${JSON.stringify(marker)}) });\n`;

function integration(dir: string, folder: string, name = folder, marker = folder): void {
  write(dir, { [`${folder}/platform-manifest.yaml`]: manifest(name), [`${folder}/index.ts`]: script(marker) });
}

function open(t: TestContext, dir: string, over: Partial<RegistryOptions> = {}) {
  const log = memoryLogger();
  const loads: string[] = [];
  const registry = createRegistry({ dir, log, env: {}, limits, watch: false, background: true, ...over }).then((r) => {
    r.onChange((name, current) => current && loads.push(name));
    t.after(() => r.close());
    return r;
  });
  return { registry, log, loads };
}

test('in the background: readiness counts the pass, folders show as loading, a request loads its integration next and waits for it', async (t) => {
  const dir = tmpDir(t);
  const gate = gatedIntegration(dir, 'aa-gate');
  for (const f of ['bb', 'mm', 'zz']) integration(dir, f);
  const { registry, loads, log } = open(t, dir);
  const r = await registry;
  // Asked for before anything loaded: zz goes first, then the pass holds on aa-gate.
  const zz = await r.whenLoaded('zz');
  assert.equal(zz?.name, 'zz');
  assert.match(zz!.script!.code, /"zz"/);
  assert.deepEqual(loads, ['zz']);
  await gate.entered();
  const before = r.readiness();
  assert.equal(before.ready, false);
  assert.equal(before.total, 4);
  assert.equal(before.loaded, 1);
  assert.deepEqual(
    r.list().map((s) => [s.name, s.status]),
    [
      ['aa-gate', 'loading'],
      ['bb', 'loading'],
      ['mm', 'loading'],
      ['zz', 'loaded'],
    ],
  );
  assert.equal(r.state('bb')?.status, 'loading');
  assert.equal(r.get('bb'), undefined);
  // The wait is bounded: a 503 that says what is happening, with Retry-After.
  await assert.rejects(r.whenLoaded('bb', 50), (e: unknown) => {
    assert.ok(e instanceof SwitchyardError);
    assert.equal(e.code, 'starting');
    assert.equal(e.status, 503);
    assert.equal(e.headers?.['retry-after'], '1');
    assert.match(e.message, /integration "bb" is not loaded yet: the server is starting \(1 of 4 integrations loaded\)/);
    return true;
  });
  assert.equal(await r.whenReady(50), false);
  const bb = r.whenLoaded('bb');
  const nothing = r.whenLoaded('no-such-integration');
  await gate.release();
  assert.equal((await bb)?.name, 'bb');
  assert.equal(await nothing, undefined, 'once the pass is over, a name nobody claims resolves to nothing');
  assert.equal(await r.whenReady(), true);
  assert.deepEqual(loads, ['zz', 'aa-gate', 'bb', 'mm']);
  const after = r.readiness();
  assert.equal(after.ready, true);
  assert.equal(after.done, 4);
  assert.equal(after.loaded, 4);
  assert.ok(log.lines.some((l) => l.msg === 'integrations loaded' && l.serving === 4 && typeof l.ms === 'number'));
});

test('a request never changes who wins a duplicate name: the first folder in name order that claims it is loaded first', async (t) => {
  const dir = tmpDir(t);
  const gate = gatedIntegration(dir, 'aa-gate');
  integration(dir, 'bb-claims-x', 'x', 'from bb');
  integration(dir, 'x', 'x', 'from x');
  const { registry } = open(t, dir);
  const r = await registry;
  const x = await r.whenLoaded('x');
  assert.match(x!.script!.code, /from bb/);
  assert.equal(x!.dir, join(dir, 'bb-claims-x'));
  await gate.release();
  await r.whenReady();
  assert.match(r.get('x')!.script!.code, /from bb/);
  const loser = r.list().find((s) => s.dir === join(dir, 'x'))!;
  assert.equal(loser.status, 'error');
  assert.match(loser.errors[0].message, /name: "x" is already used by the integration in .*bb-claims-x/);
});

test('folders that fail to bundle never block the others, with a cold cache or a warm one', async (t) => {
  const dir = tmpDir(t);
  const cacheDir = join(tmpDir(t), 'cache');
  write(dir, {
    'broken/platform-manifest.yaml': manifest('broken'),
    'broken/index.ts': "import missing from './missing.ts';\nexport default missing;\n",
  });
  for (const f of ['good-a', 'good-b']) integration(dir, f);
  await settle();
  for (const round of ['cold', 'warm']) {
    const log = memoryLogger();
    const r = await createRegistry({ dir, log, env: {}, limits, watch: false, cacheDir });
    assert.equal(r.readiness().ready, true);
    assert.equal(r.state('broken')!.status, 'error', round);
    assert.match(r.state('broken')!.errors[0].message, /Could not resolve "\.\/missing\.ts"/);
    assert.ok(r.get('good-a') && r.get('good-b'), round);
    const summary = log.lines.find((l) => l.msg === 'integrations loaded')!;
    assert.equal(summary.failed, 1);
    assert.deepEqual([summary.bundles_cached, summary.bundles_built], round === 'cold' ? [0, 2] : [2, 0], round);
    await r.close();
  }
});

test('the cache is never trusted over a changed file: an edit between two starts serves the edit; hot reload works as before', async (t) => {
  const dir = tmpDir(t);
  const cacheDir = join(tmpDir(t), 'cache');
  integration(dir, 'a', 'a', 'one');
  await settle();
  const start = () => createRegistry({ dir, log: memoryLogger(), env: {}, limits, watch: true, cacheDir });
  const first = await start();
  assert.match(first.get('a')!.script!.code, /"one"/);
  // Hot reload with the cache in place: the change is served while running.
  writeFileSync(join(dir, 'a/index.ts'), script('two'));
  await waitFor(() => first.get('a')!.script!.code.includes('"two"'));
  await first.close();

  // Edited while stopped: the next start serves the edit (bundled, not read back).
  writeFileSync(join(dir, 'a/index.ts'), script('three'));
  const second = await start();
  assert.match(second.get('a')!.script!.code, /"three"/);
  assert.equal(second.readiness().bundled, 1);
  await second.close();

  // Back to the first content: its bundle is still cached and read back.
  writeFileSync(join(dir, 'a/index.ts'), script('one'));
  const third = await start();
  assert.match(third.get('a')!.script!.code, /"one"/);
  assert.equal(third.readiness().cached, 1);
  await third.close();
});
