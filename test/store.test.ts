import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { spawn } from 'node:child_process';
import { migrate, openStore } from '../src/store/index.ts';
import { SwitchyardError } from '../src/errors.ts';
import { tmpDir, waitFor } from './helpers/index.ts';
import { AUTOCHECKPOINT_PAGES, BACKSTOP_PAGES, WAL_BOUND_PAGES } from '../src/store/checkpointer.ts';

test('the store is a WAL SQLite file with foreign keys and a busy timeout', (t) => {
  const dir = tmpDir(t);
  const store = openStore(dir);
  t.after(() => store.close());
  assert.equal(store.sqlite!.pragma('journal_mode', { simple: true }), 'wal');
  assert.equal(store.sqlite!.pragma('foreign_keys', { simple: true }), 1);
  assert.equal(store.sqlite!.pragma('busy_timeout', { simple: true }), 5000);
  // A WAL that starts over is cut back to the bound the checkpointer keeps it under (checkpointer.ts).
  assert.equal(store.sqlite!.pragma('journal_size_limit', { simple: true }), WAL_BOUND_PAGES * 4096);
  assert.ok(existsSync(join(dir, 'switchyard.db')));
});

test("the server's store checkpoints the WAL from a thread of its own; its connection's own checkpoint is a backstop; all is in the file after close", async (t) => {
  const dir = tmpDir(t);
  const store = openStore(dir, { lock: true, migrations: [{ module: 'things', steps: ['CREATE TABLE things (id INTEGER PRIMARY KEY, v TEXT)'] }] });
  let closed = false;
  t.after(() => closed || store.close());
  assert.ok(store.checkpointer?.running());
  assert.equal(store.sqlite!.pragma('wal_autocheckpoint', { simple: true }), BACKSTOP_PAGES);
  const insert = store.sqlite!.prepare('INSERT INTO things (v) VALUES (?)');
  // About 500 pages, well under the backstop: only the thread can have copied them.
  for (let i = 0; i < 20; i++)
    store.sqlite!.transaction(() => {
      for (let k = 0; k < 100; k++) insert.run('x'.repeat(800));
    })();
  await waitFor(() => store.checkpointer!.checkpointed() > 0);
  store.close();
  closed = true;
  // Everything is in the database file itself (the WAL is empty or gone), and nothing was lost.
  const wal = join(dir, 'switchyard.db-wal');
  assert.ok(!existsSync(wal) || statSync(wal).size === 0);
  const again = openStore(dir, { readonly: true });
  t.after(() => again.close());
  assert.equal((again.sqlite!.prepare('SELECT count(*) AS n FROM things').get() as { n: number }).n, 2000);
  // Stores without the lock (tests of single modules, the CLI) checkpoint as SQLite does by default.
  const plain = openStore(tmpDir(t));
  t.after(() => plain.close());
  assert.equal(plain.checkpointer, undefined);
  assert.equal(plain.sqlite!.pragma('wal_autocheckpoint', { simple: true }), AUTOCHECKPOINT_PAGES);
});

test('migrations apply once, in order, per module, and survive reopening', (t) => {
  const dir = tmpDir(t);
  const mods = [{ module: 'things', steps: ['CREATE TABLE things (id INTEGER PRIMARY KEY)', 'ALTER TABLE things ADD COLUMN name TEXT'] }];
  let store = openStore(dir, { migrations: mods });
  store.sqlite!.prepare('INSERT INTO things (name) VALUES (?)').run('a');
  store.close();
  store = openStore(dir, { migrations: mods });
  t.after(() => store.close());
  assert.deepEqual(store.sqlite!.prepare('SELECT name FROM things').all(), [{ name: 'a' }]);
  const row = store.sqlite!.prepare("SELECT version FROM schema_migrations WHERE module = 'things'").get() as { version: number };
  assert.equal(row.version, 2);
  assert.throws(() => migrate(store.sqlite!, [{ module: 'things', steps: ['SELECT 1'] }]), /newer than this program knows/);
});

test('a failing migration step leaves the module at its old version', (t) => {
  const dir = tmpDir(t);
  const store = openStore(dir, { migrations: [] });
  t.after(() => store.close());
  assert.throws(() => migrate(store.sqlite!, [{ module: 'm', steps: ['CREATE TABLE a (x)', 'NOT SQL'] }]));
  assert.equal((store.sqlite!.prepare("SELECT count(*) AS n FROM sqlite_master WHERE name = 'a'").get() as any).n, 0);
});

test('a second owner of the data directory is refused while the first is alive', (t) => {
  const dir = tmpDir(t);
  const first = openStore(dir, { lock: true });
  assert.throws(
    () => openStore(dir, { lock: true }),
    (e: unknown) => e instanceof SwitchyardError && e.code === 'data_dir_locked' && /another switchyard server/.test(e.message),
  );
  first.close();
  const again = openStore(dir, { lock: true });
  again.close();
});

test('a lock file naming a live pid does not block: only a holder the kernel knows does', (t) => {
  const dir = tmpDir(t);
  // What an older version left, or a container restart where the new server is PID 1 again.
  writeFileSync(join(dir, 'switchyard.lock'), '1\n');
  writeFileSync(join(dir, 'switchyard.pid'), '1\n');
  const store = openStore(dir, { lock: true });
  assert.equal(readFileSync(join(dir, 'switchyard.pid'), 'utf8').trim(), String(process.pid));
  store.close();
  assert.ok(!existsSync(join(dir, 'switchyard.pid')), 'the holder note goes with the holder');
  openStore(dir, { lock: true }).close();
});

test('a lock held by another process blocks until that process is killed with -9', async (t) => {
  const dir = tmpDir(t);
  const lockModule = new URL('../src/store/lock.ts', import.meta.url).href;
  // The holder keeps its Lock referenced, as the server does: a collected one closes its connection and lets go.
  const child = spawn(process.execPath, [
    '--input-type=module',
    '-e',
    `import { acquireLock } from ${JSON.stringify(lockModule)}; globalThis.lock = acquireLock(${JSON.stringify(dir)}); console.log('held'); setInterval(() => {}, 1e6);`,
  ]);
  t.after(() => child.kill('SIGKILL'));
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  await waitFor(() => out.includes('held'), 10_000);
  assert.throws(
    () => openStore(dir, { lock: true }),
    (e: unknown) => e instanceof SwitchyardError && e.code === 'data_dir_locked' && e.message.includes(`(pid ${child.pid})`),
  );
  child.kill('SIGKILL');
  await new Promise((r) => child.once('exit', r));
  const store = openStore(dir, { lock: true }); // no clean-up ran: the kernel let go
  store.close();
});

test('the data directory is 0700 and the database files 0600, an older 0644 set narrowed', (t) => {
  const parent = tmpDir(t);
  const dir = join(parent, 'data');
  const store = openStore(dir, { lock: true });
  store.sqlite!.exec('CREATE TABLE t (x); INSERT INTO t VALUES (1)');
  const mode = (f: string) => (statSync(f).mode & 0o777).toString(8);
  assert.equal(mode(dir), '700');
  for (const f of ['switchyard.db', 'switchyard.db-wal', 'switchyard.db-shm', 'switchyard.lock']) assert.equal(mode(join(dir, f)), '600', f);
  store.close();
  chmodSync(dir, 0o755);
  chmodSync(join(dir, 'switchyard.db'), 0o644);
  openStore(dir).close();
  assert.equal(mode(dir), '700');
  assert.equal(mode(join(dir, 'switchyard.db')), '600');
});

test('an unwritable data directory is a clear error', { skip: process.getuid?.() === 0 ? 'root can write anywhere' : false }, (t) => {
  const dir = tmpDir(t);
  chmodSync(dir, 0o500);
  t.after(() => chmodSync(dir, 0o700));
  assert.throws(
    () => openStore(join(dir, 'sub')),
    (e: unknown) => e instanceof SwitchyardError && e.code === 'data_dir_unwritable',
  );
});

test('read-only mode never creates a database', (t) => {
  const dir = tmpDir(t);
  assert.throws(() => openStore(dir, { readonly: true }), /no database/);
  assert.ok(!existsSync(join(dir, 'switchyard.db')));
});
