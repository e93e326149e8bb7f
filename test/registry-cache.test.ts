/**
 * The bundle cache (src/registry/bundle-cache.ts): an unchanged folder is read back instead of
 * bundled; any change that could change the bundle (an input, a file that would now win an import,
 * package.json) is a miss; a torn or corrupt entry is a miss; a build a file changed under is not
 * stored; old entries are pruned; concurrent writers never leave a torn entry.
 *
 * The cache refuses to store a build when a file it read changed less than a second before the
 * build started (see RACY_MS), so fixtures are written first and the tests wait that second.
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { fork } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createDiskCache } from '../src/cache/index.ts';
import { bundleScript, createBundleCache } from '../src/registry/index.ts';
import { tmpDir } from './helpers/index.ts';

const settle = () => new Promise((r) => setTimeout(r, 1_100));

function write(dir: string, files: Record<string, string>): void {
  for (const [f, content] of Object.entries(files)) {
    mkdirSync(join(dir, f, '..'), { recursive: true });
    writeFileSync(join(dir, f), content);
  }
}

function folder(t: TestContext) {
  const root = tmpDir(t);
  const dir = join(root, 'integration');
  write(dir, {
    'src/index.ts': [
      "import { createIntegration } from '@switchyard/runtime';",
      "import shout from 'shout';",
      "import { greet } from './greet';",
      'export default createIntegration({ fetch: async () => new Response(shout(greet("x"))) });',
    ].join('\n'),
    'src/greet.ts': 'export const greet = (n: string): string => `hello ${n}`;\n',
    'node_modules/shout/package.json': '{"name":"shout","main":"index.js"}',
    'node_modules/shout/index.js': 'module.exports = (s) => s.toUpperCase() + "!";',
    'node_modules/shout/loud.js': 'module.exports = (s) => s.toUpperCase() + "!!!";',
  });
  const cache = createBundleCache(join(root, 'data', 'cache'));
  const bundle = () => bundleScript({ dir, entry: join(dir, 'src/index.ts'), label: 'integration', cache });
  return { root, dir, cache, bundle };
}

test('an unchanged folder is read back from the cache, not bundled again; each kind of change is a miss that bundles the new files', async (t) => {
  const { dir, bundle } = folder(t);
  await settle();
  const first = await bundle();
  assert.deepEqual(first.problems, []);
  assert.equal(first.bundle!.cached, false);
  assert.match(first.bundle!.key!, /^[0-9a-f]{40}$/, 'stored');
  const again = await bundle();
  assert.equal(again.bundle!.cached, true, 'read back');
  assert.equal(again.bundle!.code, first.bundle!.code);
  assert.equal(again.bundle!.version, first.bundle!.version);
  assert.deepEqual(again.bundle!.inputs.sort(), first.bundle!.inputs.sort());

  // A new file that now wins the import (esbuild tries .tsx before .ts); nothing else changed.
  writeFileSync(join(dir, 'src/greet.tsx'), 'export const greet = (n: string): string => `greetings ${n}`;\n');
  await settle();
  const shadowed = await bundle();
  assert.equal(shadowed.bundle!.cached, false);
  assert.match(shadowed.bundle!.code, /greetings/);
  assert.equal((await bundle()).bundle!.cached, true);

  // A package.json that points elsewhere (not an input itself); nothing else changed.
  writeFileSync(join(dir, 'node_modules/shout/package.json'), '{"name":"shout","main":"loud.js"}');
  await settle();
  const repointed = await bundle();
  assert.equal(repointed.bundle!.cached, false);
  assert.match(repointed.bundle!.code, /"!!!"/);

  // An input's content, bundled at once (and not stored: it changed just now).
  writeFileSync(join(dir, 'src/greet.tsx'), 'export const greet = (n: string): string => `howdy ${n}`;\n');
  const edited = await bundle();
  assert.equal(edited.bundle!.cached, false);
  assert.match(edited.bundle!.code, /howdy/);
});

test('a tsconfig above the folder is part of the key; one extending a package makes the folder uncacheable', async (t) => {
  const { root, dir, bundle } = folder(t);
  write(root, { 'tsconfig.json': '{"compilerOptions":{}}' });
  await settle();
  const first = await bundle();
  assert.ok(first.bundle!.key);
  assert.equal((await bundle()).bundle!.cached, true);
  writeFileSync(join(root, 'tsconfig.json'), '{"compilerOptions":{"useDefineForClassFields":false}}');
  assert.equal((await bundle()).bundle!.cached, false, 'a changed tsconfig above the folder');
  writeFileSync(join(dir, 'tsconfig.json'), '{"extends":"@tsconfig/strictest/tsconfig.json"}');
  await settle();
  const unfollowable = await bundle();
  assert.equal(unfollowable.bundle!.key, undefined, 'not stored');
  assert.equal((await bundle()).bundle!.cached, false);
});

test('a corrupt or torn entry is a miss (and removed); a leftover temp file is ignored', async (t) => {
  const { root, bundle } = folder(t);
  await settle();
  const first = await bundle();
  const entry = join(root, 'data/cache/bundles', first.bundle!.key!);
  const text = readFileSync(entry, 'utf8');
  writeFileSync(entry, text.slice(0, text.length / 2));
  writeFileSync(`${entry}.123-abcd.tmp`, text.slice(0, 10));
  const torn = await bundle();
  assert.equal(torn.bundle!.cached, false, 'a torn entry is a miss');
  assert.equal(torn.bundle!.code, first.bundle!.code);
  // The code edited in place (same length, valid JSON): its hash no longer matches.
  writeFileSync(entry, text.replace('hello', 'HELLO'));
  const tampered = await bundle();
  assert.equal(tampered.bundle!.cached, false, 'an entry whose code does not match its hash is a miss');
  assert.match(tampered.bundle!.code, /hello/);
  assert.equal((await bundle()).bundle!.cached, true, 'stored whole again');
});

test('a build is not stored when a file it read changed around it (its ctime is too recent)', async (t) => {
  const { dir, bundle } = folder(t);
  await settle();
  const written = Date.now();
  writeFileSync(join(dir, 'src/greet.ts'), 'export const greet = (n: string): string => `fresh ${n}`;\n');
  const r = await bundle();
  assert.match(r.bundle!.code, /fresh/);
  // Holds unless this machine stalled for a second between the write and the build.
  if (Date.now() - written < 1_000) {
    assert.equal(r.bundle!.key, undefined, 'not stored');
    assert.equal((await bundle()).bundle!.cached, false);
  }
  await settle();
  assert.ok((await bundle()).bundle!.key, 'stored once the files are settled');
  assert.equal((await bundle()).bundle!.cached, true);
});

test('prune removes entries unused for a week and stale temp files, keeps the ones in use; a read refreshes an old entry', (t) => {
  const dir = tmpDir(t);
  const cache = createDiskCache(dir);
  for (const name of ['old', 'kept', 'fresh', 'read']) assert.ok(cache.write(name, `{"name":"${name}"}`));
  writeFileSync(join(dir, 'old.1-2.tmp'), 'partial');
  const weekAgo = new Date(Date.now() - 8 * 24 * 60 * 60_000);
  for (const name of ['old', 'kept', 'read', 'old.1-2.tmp']) utimesSync(join(dir, name), weekAgo, weekAgo);
  assert.equal(cache.read('read'), '{"name":"read"}');
  const removed = cache.prune(7 * 24 * 60 * 60_000, new Set(['kept']));
  assert.equal(removed, 2);
  assert.deepEqual(readdirSync(dir).sort(), ['fresh', 'kept', 'read']);
  assert.throws(() => cache.read('../escape'), /not a cache entry name/);
});

test('two processes writing the same entry over and over never let a reader see a torn one', async (t) => {
  const dir = tmpDir(t);
  const writer = `
    const { createDiskCache } = await import(${JSON.stringify(new URL('../src/cache/index.ts', import.meta.url).href)});
    const cache = createDiskCache(process.argv[2]);
    const big = 'x'.repeat(512 * 1024);
    for (let i = 0; i < 200; i++) cache.write('entry', JSON.stringify({ writer: process.pid, i, big }));
  `;
  const file = join(dir, 'writer.mjs');
  writeFileSync(file, writer);
  const writers = [0, 1].map(() => fork(file, [join(dir, 'cache')], { execArgv: [] }));
  const done = Promise.all(writers.map((w) => new Promise((r) => w.on('exit', r))));
  const reader = createDiskCache(join(dir, 'cache'));
  let reads = 0;
  let finished = false;
  void done.then(() => (finished = true));
  while (!finished) {
    const text = reader.read('entry');
    if (text !== undefined) {
      const e = JSON.parse(text) as { big: string };
      assert.equal(e.big.length, 512 * 1024);
      reads++;
    }
    await new Promise((r) => setImmediate(r));
  }
  assert.ok(reads > 0, 'the reader saw entries while they were written');
  assert.deepEqual(readdirSync(join(dir, 'cache')), ['entry'], 'no temp file left behind');
});
