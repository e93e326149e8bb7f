/**
 * `switchyard store copy --to postgres://…` end to end: a real server writes history on SQLite
 * (installations, deliveries with retried attempts, events, handler runs, invocations), the CLI
 * copies it into a real PostgreSQL (test/helpers/postgres.ts), every row arrives as it was, and a
 * server started on the copy carries on where the SQLite one stopped.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import Database from 'better-sqlite3';
import { createHash } from 'node:crypto';
import { readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { samplePayload } from '../src/events/index.ts';
import { allMigrations } from '../src/server/migrations.ts';
import { openStore } from '../src/store/index.ts';
import { createPostgresDatabase } from '../src/store/postgres/pool.ts';
import { statement } from '../src/store/contract.ts';
import { adminSql } from './helpers/postgres.ts';
import { runCli, tmpDir, waitFor } from './helpers/index.ts';
import { postgresFor, type PgServer } from './helpers/postgres.ts';
import { deliveryServer, scriptedReceiver } from './webhooks-support.ts';

/** These tests are about the copy: room for a first isolate on a busy machine, retries that come quickly. */
const settings = { sandbox: { cpu_time: 5_000, startup_time: 15_000, wall_time: 60_000 }, webhooks: { base_delay: 20, jitter: 0.1 } } as const;

/** A new empty database on `pg`, its URL given a password (trust authentication ignores it; no message may show it). */
function emptyDatabase(pg: PgServer, name: string): string {
  adminSql(pg.url, `CREATE DATABASE ${name}`);
  const url = new URL(pg.url);
  url.password = 's3cret';
  url.pathname = `/${name}`;
  return url.toString();
}

function configFile(dir: string, dataDir: string): string {
  const file = join(dir, `config-${readdirSync(dir).length}.yaml`);
  writeFileSync(file, `data_dir: ${dataDir}\n`);
  return file;
}

type Row = Record<string, unknown>;
/** Rows in an order that does not depend on the engine. */
const sorted = (rows: Row[]) => rows.map((r) => ({ ...r })).sort((a, b) => (JSON.stringify(a) < JSON.stringify(b) ? -1 : 1));

test('store copy: every table and row of a SQLite data directory into PostgreSQL, verified by counts; the copy serves and continues its sequences; a second copy is refused', async (t) => {
  const pg = await postgresFor(t);
  if (!pg) return;

  // History written through the API on SQLite.
  const s = await deliveryServer(t, settings);
  const receiver = await scriptedReceiver(t, (n) => (n <= 3 ? 500 : 200));
  const hook = await s.subscribe(receiver.url, ['site_view', 'space_content_updated']);
  await s.subscribe(receiver.url, ['page_feedback']);
  const hello = await s.api('POST', '/api/v1/installations', { integration: 'hello-components', configuration: { greeting: 'Howdy' } });
  assert.equal(hello.status, 201, JSON.stringify(hello.body));
  for (let i = 0; i < 3; i++) assert.equal((await fetch(hello.body.installation.urls.publicEndpoint, { method: 'POST', body: `call ${i}` })).status, 200);
  const deliveryIds: string[] = [];
  for (const type of ['site_view', 'site_view', 'page_feedback', 'space_content_updated', 'site_view']) {
    const sent = await s.send(samplePayload(type));
    assert.equal(sent.status, 202, JSON.stringify(sent.body));
    deliveryIds.push(...sent.body.deliveries.map((d: { id: string }) => d.id));
  }
  for (const id of deliveryIds) assert.equal((await s.settled(id)).status, 'delivered');
  assert.equal((await s.api('DELETE', '/api/v1/integrations/hello-components/links')).status, 200, 'a revocation of install links');
  await s.close();

  const dataDir = s.config.data_dir;
  const sqliteFile = join(dataDir, 'switchyard.db');
  const dir = tmpDir(t);
  const cfg = configFile(dir, dataDir);
  const url = emptyDatabase(pg, 'moved');
  // The oldest invocation purged (as retention does): rowids start past 1, so a copy that numbered
  // them afresh would not compare equal below.
  const purge = new Database(sqliteFile);
  assert.equal(purge.prepare('DELETE FROM invocations WHERE rowid = (SELECT MIN(rowid) FROM invocations)').run().changes, 1);
  purge.close();
  const before = createHash('sha256').update(readFileSync(sqliteFile)).digest('hex');

  const copied = await runCli(['store', 'copy', '--to', url, '--config', cfg, '--json'], { timeoutMs: 60_000 });
  assert.equal(copied.code, 0, copied.stderr);
  assert.doesNotMatch(copied.stdout + copied.stderr, /s3cret/);
  const report = JSON.parse(copied.stdout) as { tables: Array<{ name: string; source: number; copied: number; mapped: number }>; ms: number };
  assert.equal(typeof report.ms, 'number');
  const count = Object.fromEntries(report.tables.map((x) => [x.name, x.copied]));
  for (const x of report.tables) assert.equal(x.copied, x.source, x.name);
  for (const x of report.tables) assert.equal(x.mapped, 0, `${x.name}: nothing to map`);
  assert.deepEqual(
    report.tables.map((x) => x.name).sort(),
    [
      'console_revocations',
      'event_handler_runs',
      'events',
      'install_links',
      'installations',
      'invocations',
      'oauth_refresh_claims',
      'oauth_states',
      'signing_keys',
      'webhook_attempts',
      'webhook_deliveries',
      'webhook_endpoints',
      'webhook_secrets',
    ],
    'every module table, none of the bookkeeping',
  );
  const names = report.tables.map((x) => x.name);
  assert.ok(names.indexOf('webhook_deliveries') < names.indexOf('webhook_attempts'), 'a delivery before its attempts (foreign key)');
  assert.equal(count.installations, 3);
  assert.equal(count.install_links, 1);
  assert.equal(count.events, 5);
  assert.equal(count.webhook_deliveries, deliveryIds.length);
  assert.equal(count.webhook_attempts, deliveryIds.length + 3, 'the three 500s were retried');
  assert.ok(count.invocations >= 2, `${count.invocations} invocations`);
  assert.ok(count.event_handler_runs >= 1, 'hello-components handled space_content_updated');
  assert.ok(count.signing_keys >= 1 && count.webhook_secrets >= 2);
  assert.equal(createHash('sha256').update(readFileSync(sqliteFile)).digest('hex'), before, 'the SQLite file is not written');

  // Every row, field by field (bytes, doubles, NULLs, rowids), on both sides.
  const lite = new Database(sqliteFile, { readonly: true });
  t.after(() => lite.close());
  const target = createPostgresDatabase({ url, name: 'moved' });
  t.after(() => target.close());
  for (const table of names) {
    const fromSqlite = lite.prepare(`SELECT ${table === 'invocations' ? 'rowid, ' : ''}* FROM ${table}`).all() as Row[];
    const fromPg = (await target.all(statement(`SELECT * FROM ${table}`))) as Row[];
    assert.deepEqual(sorted(fromPg), sorted(fromSqlite), table);
  }
  // The same, spelt out for a retried delivery, the signing key's bytes and an installation's configuration.
  const retried = lite.prepare('SELECT * FROM webhook_deliveries WHERE attempts > 1 ORDER BY seq LIMIT 1').get() as Row;
  assert.deepEqual(await target.get(statement('SELECT * FROM webhook_deliveries WHERE id = ?'), [retried.id]), retried);
  const attempts = lite.prepare('SELECT * FROM webhook_attempts WHERE delivery_seq = ? ORDER BY id').all(retried.seq) as Row[];
  assert.ok(attempts.length > 1);
  assert.deepEqual(await target.all(statement('SELECT * FROM webhook_attempts WHERE delivery_seq = ? ORDER BY id'), [retried.seq]), attempts);
  for (const key of lite.prepare('SELECT name, key FROM signing_keys').all() as Array<{ name: string; key: Buffer }>) {
    const got = (await target.value(statement('SELECT key FROM signing_keys WHERE name = ?'), [key.name])) as Buffer;
    assert.ok(Buffer.isBuffer(got) && got.equals(key.key), `signing key ${key.name}`);
  }
  const installation = (await target.value(statement('SELECT configuration FROM installations WHERE id = ?'), [hook.installationId])) as string;
  assert.deepEqual(
    JSON.parse(installation),
    JSON.parse(lite.prepare('SELECT configuration FROM installations WHERE id = ?').pluck().get(hook.installationId) as string),
  );

  // A server on the copy: the installations deliver, and every sequence continues past the copied rows.
  const max = async (table: string, column: string) => Number(await target.value(statement(`SELECT MAX(${column}) FROM ${table}`)));
  const last = {
    events: await max('events', 'seq'),
    deliveries: await max('webhook_deliveries', 'seq'),
    attempts: await max('webhook_attempts', 'id'),
    invocations: await max('invocations', 'rowid'),
  };
  const p = await deliveryServer(t, { ...settings, store: url });
  const more = await p.send(samplePayload('site_view'));
  assert.equal(more.status, 202, JSON.stringify(more.body));
  assert.equal(more.body.deliveries.length, 1);
  const delivered = await p.settled(more.body.deliveries[0].id);
  assert.equal(delivered.status, 'delivered');
  assert.equal((await fetch(hello.body.installation.urls.publicEndpoint.replace(s.url, p.url), { method: 'POST', body: 'after' })).status, 200);
  assert.ok(Number(await target.value(statement('SELECT seq FROM events WHERE id = ?'), [more.body.eventId])) > last.events);
  assert.ok(Number(await target.value(statement('SELECT seq FROM webhook_deliveries WHERE id = ?'), [delivered.id])) > last.deliveries);
  assert.ok((await max('webhook_attempts', 'id')) > last.attempts);
  await waitFor(async () => (await max('invocations', 'rowid')) > last.invocations);
  await p.close();

  // Into a database that holds data: refused, naming what it holds, never showing the password.
  const again = await runCli(['store', 'copy', '--to', url, '--config', cfg]);
  assert.equal(again.code, 1, again.stderr);
  assert.match(again.stderr, /postgres:\/\/127\.0\.0\.1:\d+\/moved already holds Switchyard data: installations \(3 rows\)/);
  assert.match(again.stderr, /events \(6 rows\)/);
  assert.match(again.stderr, /hint: copy into an empty database/);
  assert.doesNotMatch(again.stdout + again.stderr, /s3cret/);
});

test('store copy: a row PostgreSQL cannot hold stops the copy with the row named and the target left empty; NUL characters older versions stored are copied as U+FFFD and counted; no database, a non-postgres URL and no URL are refused', async (t) => {
  const pg = await postgresFor(t);
  if (!pg) return;
  const dir = tmpDir(t);
  const dataDir = join(dir, 'data');
  const store = openStore(dataDir, { migrations: allMigrations() });
  const insert = store.sqlite!.prepare('INSERT INTO events (id, type, installation_id, payload, received_at) VALUES (?, ?, ?, ?, ?)');
  insert.run('evt_fine', 'site_view', null, '{}', Date.now());
  // As older versions stored them on SQLite (a receiver's answer, a printed line): a NUL as it came.
  insert.run('evt_nul', 'site_view', 'inst_\u0000x', '{"a":"x\u0000y"}', Date.now());
  insert.run('evt_half', 'site_view', null, '{}', 1.5);
  store.close();
  const cfg = configFile(dir, dataDir);
  const url = emptyDatabase(pg, 'atomic');

  const failed = await runCli(['store', 'copy', '--to', url, '--config', cfg]);
  assert.equal(failed.code, 2, failed.stderr);
  assert.match(failed.stderr, /events \(id evt_half\), column received_at: 1\.5 is not a whole number, and the PostgreSQL column is bigint/);
  assert.match(failed.stderr, /nothing was copied/);
  const target = createPostgresDatabase({ url, name: 'atomic' });
  t.after(() => target.close());
  assert.equal(Number(await target.value(statement('SELECT count(*) FROM events'))), 0, 'the transaction rolled back');
  assert.equal(Number(await target.value(statement('SELECT count(*) FROM signing_keys'))), 0);

  // Mended, the same database takes the copy: the failed one left nothing behind.
  const mend = new Database(join(dataDir, 'switchyard.db'));
  mend.prepare("DELETE FROM events WHERE id = 'evt_half'").run();
  mend.close();
  const ok = await runCli(['store', 'copy', '--to', url, '--config', cfg]);
  assert.equal(ok.code, 0, ok.stderr);
  assert.match(ok.stdout, /^events\s+2\s+2$/m);
  assert.match(ok.stdout, /copied 2 rows from .* into postgres:\/\/127\.0\.0\.1:\d+\/atomic in \d+ ms .*every table's count matches/);
  assert.match(ok.stdout, /^events: 2 text values held a NUL character, which PostgreSQL cannot store: copied with U\+FFFD in its place/m);
  assert.doesNotMatch(ok.stdout, /^(?!events)\w+: \d+ text values? held a NUL/m, 'only the table that had them');
  assert.match(ok.stdout, /stop the server before the copy you switch over with/);
  assert.deepEqual(await target.get(statement("SELECT installation_id, payload FROM events WHERE id = 'evt_nul'")), {
    installation_id: 'inst_\uFFFDx',
    payload: '{"a":"x\uFFFDy"}',
  });
  // The same count in --json, per table.
  const json = await runCli(['store', 'copy', '--to', emptyDatabase(pg, 'atomic_json'), '--config', cfg, '--json']);
  assert.equal(json.code, 0, json.stderr);
  const mapped = Object.fromEntries((JSON.parse(json.stdout) as { tables: Array<{ name: string; mapped: number }> }).tables.map((x) => [x.name, x.mapped]));
  assert.equal(mapped.events, 2);
  assert.equal(mapped.installations, 0);

  // No SQLite database in the configuration's data_dir.
  const empty = join(dir, 'nothing-here');
  const missing = await runCli(['store', 'copy', '--to', url, '--config', configFile(dir, empty)]);
  assert.equal(missing.code, 1);
  assert.match(missing.stderr, /no SQLite database at .*nothing-here\/switchyard\.db/);

  // Not PostgreSQL, or no URL at all: refused before anything is opened, the value not repeated.
  const mysql = await runCli(['store', 'copy', '--to', 'mysql://root:hunter22@127.0.0.1/db', '--config', cfg]);
  assert.equal(mysql.code, 2);
  assert.match(mysql.stderr, /--to must be a postgres:\/\/ URL/);
  assert.doesNotMatch(mysql.stderr, /hunter22/);
  const none = await runCli(['store', 'copy', '--config', cfg], { env: { DATABASE_URL: '' } });
  assert.equal(none.code, 2);
  assert.match(none.stderr, /say which PostgreSQL database to copy into/);
});
