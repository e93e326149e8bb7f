import { test } from 'node:test';
import assert from 'node:assert/strict';
import Database from 'better-sqlite3';
import { existsSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { samplePayload } from '../src/events/index.ts';
import { runCli, startTestServer, tmpDir } from './helpers/index.ts';

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
