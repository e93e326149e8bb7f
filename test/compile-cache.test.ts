/** Node's compile cache for runs from source: in this user's cache folder, inherited by children, off when asked. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, readdirSync, realpathSync, statSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT, tmpDir } from './helpers/index.ts';

function run(env: NodeJS.ProcessEnv, script?: string) {
  const base = { ...process.env };
  delete base.NODE_COMPILE_CACHE;
  delete base.NODE_DISABLE_COMPILE_CACHE;
  const args = script ? ['--no-node-snapshot', '--input-type=module', '-e', script] : ['--no-node-snapshot', join(ROOT, 'src/main.ts'), 'deliveries', '--help'];
  const r = spawnSync(process.execPath, args, { env: { ...base, ...env }, encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  return r.stdout;
}

/** Files under `dir`, recursively. */
function files(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((d) => d.isFile())
    .map((d) => join(d.parentPath, d.name));
}

test('a command run from source keeps compiled modules in $XDG_CACHE_HOME/switchyard/node-compile-cache, private to this user', (t) => {
  const xdg = tmpDir(t);
  run({ XDG_CACHE_HOME: xdg });
  const dir = join(xdg, 'switchyard', 'node-compile-cache');
  const cached = files(dir);
  assert.ok(cached.length > 10, `modules cached: ${cached.length}`);
  assert.equal(statSync(join(xdg, 'switchyard')).mode & 0o077, 0, 'the cache root is 0700');
});

test('the cache is handed to the processes it starts, and NODE_COMPILE_CACHE or NODE_DISABLE_COMPILE_CACHE keep their meaning', (t) => {
  const xdg = tmpDir(t);
  const mod = JSON.stringify(new URL('../src/native/compile-cache.ts', import.meta.url).href);
  const inherited = run(
    { XDG_CACHE_HOME: xdg },
    `const { enableCompileCache } = await import(${mod}); enableCompileCache(); console.log(process.env.NODE_COMPILE_CACHE);`,
  );
  assert.equal(inherited.trim(), join(xdg, 'switchyard', 'node-compile-cache'));

  const chosen = tmpDir(t);
  run({ XDG_CACHE_HOME: xdg, NODE_COMPILE_CACHE: chosen });
  assert.ok(files(chosen).length > 10, 'the folder named by NODE_COMPILE_CACHE is used');

  const off = tmpDir(t);
  run({ XDG_CACHE_HOME: off, NODE_DISABLE_COMPILE_CACHE: '1' });
  assert.deepEqual(files(join(off, 'switchyard')), [], 'nothing cached when disabled');
});

test('a cache folder someone else can write (XDG_CACHE_HOME in a shared place, reached through a symlink or left group/world-writable) is not used', (t) => {
  const mod = JSON.stringify(new URL('../src/native/compile-cache.ts', import.meta.url).href);
  const script = `const { enableCompileCache } = await import(${mod}); console.log(enableCompileCache() ?? '');`;
  // Another account's folder, writable by all: what a shared XDG_CACHE_HOME (/tmp/.cache) can hold.
  const theirs = tmpDir(t);
  chmodSync(theirs, 0o777);
  const viaSymlink = tmpDir(t);
  symlinkSync(theirs, join(viaSymlink, 'switchyard'));
  const open = tmpDir(t);
  mkdirSync(join(open, 'switchyard'), { mode: 0o777 });
  chmodSync(join(open, 'switchyard'), 0o777);
  for (const xdg of [viaSymlink, open]) {
    const dir = run({ XDG_CACHE_HOME: xdg, TMPDIR: tmpDir(t) }, script).trim();
    assert.ok(!dir || (!realpathSync(dir).startsWith(realpathSync(theirs)) && !dir.startsWith(xdg)), `code cache kept in a folder others can write: ${dir}`);
  }
});
