/**
 * The executable's native-file unpacking, without the executable: where the cache folder goes and
 * how files are written (content-checked, atomic, reused).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { SwitchyardError } from '../src/errors.ts';
import { cacheFolder, cacheRoots, extractNativeFiles, type NativeManifest } from '../src/native/index.ts';
import { tmpDir } from './helpers/index.ts';

const sha = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');
const addon = new TextEncoder().encode('pretend this is an ELF shared object');
const program = new TextEncoder().encode('#!/bin/sh\necho esbuild\n');

function manifestFor(over: Partial<NativeManifest['files']['esbuild']> = {}): NativeManifest {
  return {
    hash: 'abc123',
    files: {
      'better-sqlite3': { asset: 'native/better_sqlite3.node', file: 'better_sqlite3.node', size: addon.byteLength, sha256: sha(addon), mode: 0o644 },
      'isolated-vm': { asset: 'native/isolated_vm.node', file: 'isolated_vm.node', size: addon.byteLength, sha256: sha(addon), mode: 0o644 },
      esbuild: { asset: 'native/esbuild', file: 'esbuild', size: program.byteLength, sha256: sha(program), mode: 0o755, ...over },
    },
  };
}

function assets(): { read: (key: string) => Uint8Array; reads: string[] } {
  const reads: string[] = [];
  return {
    reads,
    read(key) {
      reads.push(key);
      return key === 'native/esbuild' ? program : addon;
    },
  };
}

test('unpacks every file with its mode and leaves no temp files', (t) => {
  const dir = tmpDir(t);
  const a = assets();
  const paths = extractNativeFiles(manifestFor(), dir, a.read);
  assert.deepEqual(readdirSync(dir).sort(), ['better_sqlite3.node', 'esbuild', 'isolated_vm.node']);
  assert.equal(paths.esbuild, join(dir, 'esbuild'));
  assert.deepEqual(readFileSync(paths.esbuild), Buffer.from(program));
  assert.equal(statSync(paths.esbuild).mode & 0o777, 0o755);
  assert.equal(statSync(paths['isolated-vm']).mode & 0o777, 0o644);
  assert.equal(a.reads.length, 3);
});

test('reuses files already unpacked without reading the assets again', (t) => {
  const dir = tmpDir(t);
  extractNativeFiles(manifestFor(), dir, assets().read);
  const before = statSync(join(dir, 'esbuild')).mtimeMs;
  const again = assets();
  extractNativeFiles(manifestFor(), dir, again.read);
  assert.deepEqual(again.reads, []);
  assert.equal(statSync(join(dir, 'esbuild')).mtimeMs, before);
});

test('replaces a truncated file and restores a lost execute bit', (t) => {
  const dir = tmpDir(t);
  extractNativeFiles(manifestFor(), dir, assets().read);
  writeFileSync(join(dir, 'isolated_vm.node'), 'half');
  chmodSync(join(dir, 'esbuild'), 0o644);
  const again = assets();
  extractNativeFiles(manifestFor(), dir, again.read);
  assert.deepEqual(again.reads.sort(), ['native/esbuild', 'native/isolated_vm.node']);
  assert.deepEqual(readFileSync(join(dir, 'isolated_vm.node')), Buffer.from(addon));
  assert.equal(statSync(join(dir, 'esbuild')).mode & 0o777, 0o755);
});

test('refuses an asset whose bytes do not match the manifest, and writes nothing for it', (t) => {
  const dir = tmpDir(t);
  const wrong = manifestFor({ sha256: sha(addon) });
  assert.throws(
    () => extractNativeFiles(wrong, dir, assets().read),
    (e: unknown) =>
      e instanceof SwitchyardError &&
      e.code === 'internal' &&
      /native\/esbuild does not match its manifest/.test(e.message) &&
      /npm run build/.test(e.hint ?? ''),
  );
  assert.equal(existsSync(join(dir, 'esbuild')), false);
  assert.deepEqual(
    readdirSync(dir).filter((f) => f.endsWith('.tmp')),
    [],
  );
});

test('cache folder: XDG_CACHE_HOME, else ~/.cache, then a private temp folder; a relative XDG_CACHE_HOME is ignored', () => {
  const uid = process.getuid!();
  assert.deepEqual(cacheRoots({ XDG_CACHE_HOME: '/c', HOME: '/h', TMPDIR: '/t' }), ['/c/switchyard', `/t/switchyard-${uid}`]);
  assert.deepEqual(cacheRoots({ HOME: '/h', TMPDIR: '/t' }), ['/h/.cache/switchyard', `/t/switchyard-${uid}`]);
  assert.deepEqual(cacheRoots({ XDG_CACHE_HOME: 'rel', HOME: '/h', TMPDIR: '/t' }), ['/h/.cache/switchyard', `/t/switchyard-${uid}`]);
});

test('cache folder: creates <root>/<hash> private to the user', (t) => {
  const dir = tmpDir(t);
  const got = cacheFolder('h1', { XDG_CACHE_HOME: join(dir, 'xdg'), TMPDIR: join(dir, 'tmp') });
  assert.equal(got, join(dir, 'xdg', 'switchyard', 'h1'));
  assert.equal(statSync(got).mode & 0o777, 0o700);
});

test('cache folder: falls back to the temp folder when the cache cannot be created', (t) => {
  const dir = tmpDir(t);
  writeFileSync(join(dir, 'file'), '');
  const got = cacheFolder('h1', { XDG_CACHE_HOME: join(dir, 'file', 'xdg'), TMPDIR: join(dir, 'tmp') });
  assert.equal(got, join(dir, 'tmp', `switchyard-${process.getuid!()}`, 'h1'));
});

test('cache folder: never uses a temp folder others can write, and says what it tried', (t) => {
  const dir = tmpDir(t);
  writeFileSync(join(dir, 'file'), '');
  const shared = join(dir, 'tmp', `switchyard-${process.getuid!()}`);
  mkdirSync(shared, { recursive: true });
  chmodSync(shared, 0o777);
  assert.throws(
    () => cacheFolder('h1', { XDG_CACHE_HOME: join(dir, 'file', 'xdg'), TMPDIR: join(dir, 'tmp') }),
    (e: unknown) =>
      e instanceof SwitchyardError &&
      /no folder to unpack/.test(e.message) &&
      e.message.includes(join(dir, 'file', 'xdg')) &&
      /not a private folder/.test(e.message) &&
      /XDG_CACHE_HOME/.test(e.hint ?? ''),
  );
  assert.equal(existsSync(join(shared, 'h1')), false);
});

test("the executable's worker flag is the one the sandbox's workerCommand() passes", async () => {
  const { SANDBOX_WORKER_FLAG } = await import('../src/native/index.ts');
  const { WORKER_FLAG } = await import('../src/sandbox/index.ts');
  assert.equal(SANDBOX_WORKER_FLAG, WORKER_FLAG);
});
