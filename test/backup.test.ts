import { test } from 'node:test';
import assert from 'node:assert/strict';
import Database from 'better-sqlite3';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { samplePayload } from '../src/events/index.ts';
import { ROOT, runCli, startTestServer, tmpDir, tmpfs, waitFor } from './helpers/index.ts';
import { openStore, type Store } from '../src/store/index.ts';
import { allMigrations } from '../src/server/migrations.ts';

const eventsIn = (file: string) => {
  const db = new Database(file, { readonly: true });
  try {
    return (db.prepare('SELECT count(*) AS n FROM events').get() as { n: number }).n;
  } finally {
    db.close();
  }
};

test('backup while the server runs, restore refused while it runs, then restored once it stopped; the replaced database is kept', async (t) => {
  const s = await startTestServer(t);
  const dir = tmpDir(t);
  const cfg = join(dir, 'config.yaml');
  writeFileSync(cfg, `data_dir: ${s.config.data_dir}\n`);
  for (let i = 0; i < 5; i++) assert.equal((await s.api('POST', '/api/v1/events', samplePayload('site_view'))).status, 202);

  const file = join(dir, 'nightly.db');
  const made = await runCli(['backup', file, '--config', cfg, '--json']);
  assert.equal(made.code, 0, made.stderr);
  const report = JSON.parse(made.stdout);
  assert.equal(report.rows.events, 5);
  assert.equal(eventsIn(file), 5);
  assert.equal(statSync(file).mode & 0o777, 0o600, 'it holds secrets');
  assert.deepEqual(readdirSync(dir).sort(), ['config.yaml', 'nightly.db'], 'no partial file left behind');

  // Not over an existing file unless asked.
  const again = await runCli(['backup', file, '--config', cfg]);
  assert.notEqual(again.code, 0);
  assert.match(again.stderr, /exists/);
  assert.match(again.stderr, /--force/);

  // More history after the backup; a restore now is refused: the server holds the data directory.
  for (let i = 0; i < 2; i++) await s.api('POST', '/api/v1/events', samplePayload('site_view'));
  const refused = await runCli(['restore', file, '--config', cfg]);
  assert.notEqual(refused.code, 0);
  assert.match(refused.stderr, /another switchyard server/);
  await s.close();
  assert.equal(eventsIn(join(s.config.data_dir, 'switchyard.db')), 7, 'the refused restore changed nothing');

  const restored = await runCli(['restore', file, '--config', cfg, '--json']);
  assert.equal(restored.code, 0, restored.stderr);
  const r = JSON.parse(restored.stdout);
  assert.equal(eventsIn(r.database), 5);
  assert.equal(eventsIn(r.previous), 7, 'the replaced database is kept whole (its WAL folded in)');
  assert.ok(!existsSync(`${r.database}-wal`) || statSync(`${r.database}-wal`).size === 0);

  // The restored directory serves.
  const back = await startTestServer(t, { data_dir: s.config.data_dir });
  const listed = await back.api('GET', '/api/v1/events?limit=50');
  assert.equal(listed.body.events.length, 5);
});

test('restore refuses what is not a sound Switchyard database, naming the file', async (t) => {
  const dir = tmpDir(t);
  const cfg = join(dir, 'config.yaml');
  writeFileSync(cfg, `data_dir: ${join(dir, 'data')}\n`);
  const text = join(dir, 'notes.txt');
  writeFileSync(text, 'not a database at all, just some words that are long enough to fill a header\n'.repeat(20));
  const a = await runCli(['restore', text, '--config', cfg]);
  assert.notEqual(a.code, 0);
  assert.match(a.stderr, /notes\.txt/);

  const other = join(dir, 'other.sqlite!');
  const db = new Database(other);
  db.exec('CREATE TABLE t (x)');
  db.close();
  const b = await runCli(['restore', other, '--config', cfg]);
  assert.notEqual(b.code, 0);
  assert.match(b.stderr, /not a Switchyard one/);
  assert.ok(!existsSync(join(dir, 'data', 'switchyard.db')), 'nothing was put in place');

  const missing = await runCli(['restore', join(dir, 'nope.db'), '--config', cfg]);
  assert.notEqual(missing.code, 0);
  assert.match(missing.stderr, /no file/);
});

test('a restore that the disk cannot hold leaves the database as it was; a backup is never written over the live database', async (t) => {
  const disk = tmpfs(t, 2);
  if (!disk) return t.skip('cannot mount a tmpfs here (needs root)');
  const data = join(disk, 'data');
  const live = openStore(data, { migrations: allMigrations() });
  live
    .sqlite!.prepare('INSERT INTO events (id, type, payload, received_at, delivery_count) VALUES (?, ?, ?, ?, 0)')
    .run('evt_kept', 'site_view', '{}', Date.now());
  live.close();
  const dir = tmpDir(t);
  const cfg = join(dir, 'config.yaml');
  writeFileSync(cfg, `data_dir: ${data}\n`);

  // A sound backup larger than the disk's room.
  const big = join(dir, 'big.db');
  const other = openStore(join(dir, 'other'), { migrations: allMigrations() });
  const insert = other.sqlite!.prepare('INSERT INTO events (id, type, payload, received_at, delivery_count) VALUES (?, ?, ?, ?, 0)');
  other.sqlite!.transaction(() => {
    for (let i = 0; i < 400; i++) insert.run(`evt_${i}`, 'site_view', JSON.stringify({ pad: 'x'.repeat(10_000) }), Date.now());
  })();
  other.close();
  const made = await runCli(['backup', big, '--config', writeConfig(dir, join(dir, 'other'))]);
  assert.equal(made.code, 0, made.stderr);

  const r = await runCli(['restore', big, '--config', cfg]);
  assert.notEqual(r.code, 0);
  assert.match(r.stderr, /the database is unchanged/);
  assert.equal(eventsIn(join(data, 'switchyard.db')), 1, 'the live database is whole, in place');
  assert.deepEqual(
    readdirSync(data).filter((f) => /restoring|before-restore/.test(f)),
    [],
    'no half copy, nothing moved aside',
  );

  // --force or not, the live database is never the backup's destination.
  for (const target of [join(data, 'switchyard.db'), join(data, 'switchyard.db-wal')]) {
    const over = await runCli(['backup', target, '--force', '--config', cfg]);
    assert.notEqual(over.code, 0);
    assert.match(over.stderr, /is the live database/);
  }
  assert.equal(eventsIn(join(data, 'switchyard.db')), 1);
});

function writeConfig(dir: string, dataDir: string): string {
  const file = join(dir, `config-${Math.random().toString(36).slice(2)}.yaml`);
  writeFileSync(file, `data_dir: ${dataDir}\n`);
  return file;
}

/** A data directory holding about 30 MB of events (long enough to copy that a test sees the copy under way). */
function bigDatabase(t: import('node:test').TestContext): { dir: string; cfg: string; store: Store; insert: (id: string) => void } {
  const dir = tmpDir(t);
  const store = openStore(join(dir, 'data'), { migrations: allMigrations() });
  t.after(() => store.close());
  const statement = store.sqlite!.prepare('INSERT INTO events (id, type, payload, received_at, delivery_count) VALUES (?, ?, ?, ?, 0)');
  const insert = (id: string) => void statement.run(id, 'site_view', JSON.stringify({ pad: 'x'.repeat(10_000) }), Date.now());
  store.sqlite!.transaction(() => {
    for (let i = 0; i < 3000; i++) insert(`evt_${i}`);
  })();
  return { dir, cfg: writeConfig(dir, join(dir, 'data')), store, insert };
}

/** Everything under `dir` whose mode lets group or others read, write or enter it. */
function exposed(dir: string, into: Set<string>): void {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return; // removed meanwhile
  }
  for (const name of names) {
    try {
      const st = lstatSync(join(dir, name));
      if (st.mode & 0o077) into.add(`${join(dir, name)} ${(st.mode & 0o777).toString(8)}`);
      if (st.isDirectory()) exposed(join(dir, name), into);
    } catch {
      // removed meanwhile
    }
  }
}

test('a backup of a database the server commits to every 100 ms finishes, and no file of it is ever readable by others', { timeout: 120_000 }, async (t) => {
  const { dir, cfg, insert } = bigDatabase(t);
  let n = 0;
  const writer = setInterval(() => insert(`evt_busy_${n++}`), 100);
  t.after(() => clearInterval(writer));
  const out = join(dir, 'out');
  mkdirSync(out);
  const seen = new Set<string>();
  const watcher = setInterval(() => exposed(out, seen), 2);
  t.after(() => clearInterval(watcher));
  const made = await runCli(['backup', join(out, 'busy.db'), '--config', cfg, '--json'], { timeoutMs: 45_000 });
  clearInterval(watcher);
  clearInterval(writer);
  assert.equal(made.code, 0, `the backup finished (${n} commits meanwhile): ${made.stderr}`);
  assert.ok(n > 0, 'the writer committed during the backup');
  assert.ok(JSON.parse(made.stdout).rows.events >= 3000);
  assert.deepEqual([...seen], [], 'nothing group- or other-accessible while copying');
  assert.deepEqual(readdirSync(out), ['busy.db']);
  assert.equal(statSync(join(out, 'busy.db')).mode & 0o777, 0o600);
});

test('a symlink planted where the backup used to put its copy is not followed', async (t) => {
  const dir = tmpDir(t);
  const data = join(dir, 'data');
  openStore(data, { migrations: allMigrations() }).close();
  // Someone else's database, which a followed link would have the backup written over.
  const victim = join(dir, 'victim.db');
  const other = new Database(victim);
  other.exec("CREATE TABLE precious (x); INSERT INTO precious VALUES ('kept')");
  other.close();
  const dest = join(dir, 'nightly.db');
  // The name it was, `<dest>.partial-<pid>`, was known in advance to anyone who can write beside
  // dest: this CLI process plants the link under its own pid before it runs the backup.
  const planting = join(dir, 'plant.mjs');
  writeFileSync(
    planting,
    `import { symlinkSync } from 'node:fs';\nimport { cli } from ${JSON.stringify(pathToFileURL(join(ROOT, 'src/main.ts')).href)};\n` +
      `symlinkSync(${JSON.stringify(victim)}, ${JSON.stringify(dest)} + '.partial-' + process.pid);\nawait cli(process.argv.slice(2));\n`,
  );
  const made = await new Promise<number | null>((resolve) =>
    spawn(process.execPath, ['--no-node-snapshot', planting, 'backup', dest, '--config', writeConfig(dir, data)], { stdio: 'ignore' }).on('exit', resolve),
  );
  assert.equal(made, 0);
  const check = new Database(victim, { readonly: true });
  assert.deepEqual(check.prepare('SELECT x FROM precious').all(), [{ x: 'kept' }], 'the linked file is untouched');
  check.close();
  assert.ok(lstatSync(dest).isFile(), 'the backup is a file of its own');
  assert.equal(eventsIn(dest), 0);
});

test('a backup stopped by SIGTERM or Ctrl-C leaves nothing behind', { timeout: 120_000 }, async (t) => {
  const { dir, cfg } = bigDatabase(t);
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    const out = join(dir, `out-${signal}`);
    mkdirSync(out);
    const child = spawn(process.execPath, ['--no-node-snapshot', join(ROOT, 'src/main.ts'), 'backup', join(out, 'stopped.db'), '--config', cfg], {
      stdio: 'ignore',
    });
    t.after(() => child.kill('SIGKILL'));
    const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
    await waitFor(() => readdirSync(out).length > 0, 30_000, 1);
    child.kill(signal);
    await exited;
    assert.deepEqual(readdirSync(out), [], `${signal}: nothing left, no partial copy`);
  }
});

test('restoring a WAL database copied with its -wal keeps the rows only the -wal holds, and creates nothing beside the source', async (t) => {
  const dir = tmpDir(t);
  // A database whose last rows are committed to its -wal and not yet checkpointed into the file.
  const origin = openStore(join(dir, 'origin'), { migrations: allMigrations() });
  origin.sqlite!.pragma('wal_checkpoint(TRUNCATE)');
  origin.sqlite!.pragma('wal_autocheckpoint = 0');
  const insert = origin.sqlite!.prepare('INSERT INTO events (id, type, payload, received_at, delivery_count) VALUES (?, ?, ?, ?, 0)');
  for (let i = 0; i < 5; i++) insert.run(`evt_wal_${i}`, 'site_view', '{}', Date.now());
  const copied = join(dir, 'copied');
  mkdirSync(copied);
  for (const suffix of ['', '-wal']) copyFileSync(join(dir, 'origin/switchyard.db') + suffix, join(copied, 'b.sqlite!') + suffix);
  origin.close();
  assert.ok(statSync(join(copied, 'b.sqlite!-wal')).size > 0, 'the rows are in the -wal');
  const before = readdirSync(copied).map((f) => [f, readFileSync(join(copied, f)).toString('base64')]);

  const data = join(dir, 'data');
  mkdirSync(data);
  const r = await runCli(['restore', join(copied, 'b.sqlite!'), '--config', writeConfig(dir, data), '--json']);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(JSON.parse(r.stdout).rows.events, 5);
  assert.equal(eventsIn(join(data, 'switchyard.db')), 5, 'what restore reports is what was put in place');
  assert.deepEqual(
    readdirSync(copied).map((f) => [f, readFileSync(join(copied, f)).toString('base64')]),
    before,
    'the source and its -wal as they were, no -shm beside them',
  );
  assert.deepEqual(
    readdirSync(data).filter((f) => f.startsWith('switchyard.db')),
    ['switchyard.db'],
    'one self-contained file',
  );
});

test('backup --force replaces a regular file only: a FIFO, a device node, a folder or a symlink is refused with exit 2 and left as it was', async (t) => {
  const dir = tmpDir(t);
  const data = join(dir, 'data');
  openStore(data, { migrations: allMigrations() }).close();
  const cfg = writeConfig(dir, data);
  const fifo = join(dir, 'pipe');
  execFileSync('mkfifo', [fifo]);
  const folder = join(dir, 'folder');
  mkdirSync(folder);
  const link = join(dir, 'link-to-pipe');
  symlinkSync(fifo, link);
  const targets: Array<[string, RegExp, (p: string) => boolean]> = [
    [fifo, /is a FIFO \(named pipe\)/, (p) => lstatSync(p).isFIFO()],
    [folder, /is a folder/, (p) => lstatSync(p).isDirectory()],
    [link, /is a symlink/, (p) => lstatSync(p).isSymbolicLink() && lstatSync(fifo).isFIFO()],
  ];
  // A character device of its own, the numbers of /dev/null (1, 3): the machine's one is never a target here.
  const device = join(dir, 'null');
  if (spawnSync('mknod', [device, 'c', '1', '3']).status === 0) targets.push([device, /is a character device/, (p) => lstatSync(p).isCharacterDevice()]);
  else t.diagnostic('mknod is not permitted here: no device node tried');
  for (const [target, says, intact] of targets) {
    const r = await runCli(['backup', target, '--force', '--config', cfg], { timeoutMs: 15_000 });
    assert.equal(r.code, 2, `${target}: ${r.stderr}`);
    assert.match(r.stderr, says);
    assert.match(r.stderr, /a backup only ever replaces a regular file\nhint: give the path of/);
    assert.ok(intact(target), `${target} is as it was`);
  }
  assert.deepEqual(
    readdirSync(dir).filter((f) => f.includes('partial')),
    [],
    'no partial copy left',
  );

  // A regular file is still replaced with --force.
  const earlier = join(dir, 'earlier.db');
  writeFileSync(earlier, 'an earlier backup');
  const r = await runCli(['backup', earlier, '--force', '--config', cfg]);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(eventsIn(earlier), 0);
});

test('restore refuses a FIFO or a device at once, before opening it (open() of a FIFO would wait for a writer), and a FIFO beside it as its -wal', async (t) => {
  const dir = tmpDir(t);
  const cfg = writeConfig(dir, join(dir, 'data'));
  const fifo = join(dir, 'backup.db');
  execFileSync('mkfifo', [fifo]);
  const r = await runCli(['restore', fifo, '--config', cfg], { timeoutMs: 15_000 });
  assert.equal(r.code, 2, `exits by itself: ${r.stderr}`);
  assert.match(r.stderr, /backup\.db is a FIFO \(named pipe\), not a file written by `switchyard backup`/);
  assert.match(r.stderr, /hint: give the path of a backup file/);

  // A sound backup whose -wal is a FIFO: that too would be opened.
  const source = join(dir, 'sound.db');
  const made = openStore(join(dir, 'other'), { migrations: allMigrations() });
  made.close();
  copyFileSync(join(dir, 'other', 'switchyard.db'), source);
  execFileSync('mkfifo', [`${source}-wal`]);
  const wal = await runCli(['restore', source, '--config', cfg], { timeoutMs: 15_000 });
  assert.equal(wal.code, 2, `exits by itself: ${wal.stderr}`);
  assert.match(wal.stderr, /sound\.db-wal is a FIFO/);

  const device = join(dir, 'null');
  if (spawnSync('mknod', [device, 'c', '1', '3']).status === 0) {
    const dev = await runCli(['restore', device, '--config', cfg], { timeoutMs: 15_000 });
    assert.equal(dev.code, 2, dev.stderr);
    assert.match(dev.stderr, /is a character device/);
  }
  assert.ok(!existsSync(join(dir, 'data', 'switchyard.db')), 'nothing was put in place');
});
