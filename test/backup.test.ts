import { test } from 'node:test';
import assert from 'node:assert/strict';
import Database from 'better-sqlite3';
import { existsSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { samplePayload } from '../src/events/index.ts';
import { runCli, startTestServer, tmpDir, tmpfs } from './helpers/index.ts';
import { openStore } from '../src/store/index.ts';
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

  const other = join(dir, 'other.db');
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
  live.db.prepare('INSERT INTO events (id, type, payload, received_at, delivery_count) VALUES (?, ?, ?, ?, 0)').run('evt_kept', 'site_view', '{}', Date.now());
  live.close();
  const dir = tmpDir(t);
  const cfg = join(dir, 'config.yaml');
  writeFileSync(cfg, `data_dir: ${data}\n`);

  // A sound backup larger than the disk's room.
  const big = join(dir, 'big.db');
  const other = openStore(join(dir, 'other'), { migrations: allMigrations() });
  const insert = other.db.prepare('INSERT INTO events (id, type, payload, received_at, delivery_count) VALUES (?, ?, ?, ?, 0)');
  other.db.transaction(() => {
    for (let i = 0; i < 400; i++) insert.run(`evt_${i}`, 'site_view', JSON.stringify({ pad: 'x'.repeat(10_000) }), Date.now());
  })();
  other.close();
  const made = await runCli(['backup', big, '--config', writeConfig(dir, join(dir, 'other'))]);
  assert.equal(made.code, 0, made.stderr);

  const r = await runCli(['restore', big, '--config', cfg]);
  assert.notEqual(r.code, 0);
  assert.match(r.stderr, /the database is unchanged/);
  assert.equal(eventsIn(join(data, 'switchyard.db')), 1, 'the live database is whole, in place');
  assert.deepEqual(readdirSync(data).filter((f) => /restoring|before-restore/.test(f)), [], 'no half copy, nothing moved aside');

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
