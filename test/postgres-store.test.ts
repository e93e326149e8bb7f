/**
 * The PostgreSQL store under the modules: SQLite's SQL translated, the pool's transactions
 * (savepoints, hooks, a connection lost mid-transaction), types as SQLite gives them, migrations
 * under the advisory lock, and a `store:` value that is refused without repeating it.
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { bind, translate } from '../src/store/postgres/dialect.ts';
import { connectStore, openStore } from '../src/store/index.ts';
import { statement } from '../src/store/contract.ts';
import { allMigrations } from '../src/server/migrations.ts';
import { chmodSync, chownSync, existsSync, mkdirSync, rmSync, statSync, symlinkSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { adminSql, initializedCluster, postgresBinaries, postgresFor, runAs, type PgServer } from './helpers/postgres.ts';
import { samplePayload } from '../src/events/index.ts';
import { freshPostgresDatabase, tmpDir, waitFor } from './helpers/index.ts';
import { configSchema } from '../src/config/schema.ts';
import { memoryLogger } from '../src/log/index.ts';
import { validate } from '../src/schema/index.ts';

test('translate: numbered parameters (a name keeps its number), quoted aliases, SQLite-only syntax rewritten, literals untouched', () => {
  const t = translate(
    "SELECT a AS fooBar, b AS plain FROM t INDEXED BY t_i WHERE x = @x AND y = @x AND +d.s = 'a' AND q IS NOT (SELECT 1) AND z = ? AND s = '@no ? :no' AND c::text = :c",
  );
  assert.equal(
    t.text,
    `SELECT a AS "fooBar", b AS plain FROM t WHERE x = $1 AND y = $1 AND d.s = 'a' AND q IS DISTINCT FROM (SELECT 1) AND z = $2 AND s = '@no ? :no' AND c::text = $3`,
  );
  assert.deepEqual(t.slots, [{ name: 'x' }, { index: 0 }, { name: 'c' }]);
  assert.equal(translate('INSERT OR IGNORE INTO k (n) VALUES (?)').text, 'INSERT INTO k (n) VALUES ($1) ON CONFLICT DO NOTHING');
  assert.equal(translate('INSERT INTO events (id) VALUES (?)').rowid, 'seq', 'a row number is returned as lastInsertRowid');
  assert.equal(translate('INSERT INTO events (id) VALUES (?) RETURNING id').rowid, undefined);
  assert.deepEqual(bind(t.slots, [7, { x: 'a', c: 'b' }]), ['a', 7, 'b']);
  assert.throws(() => bind(t.slots, [7, { x: 'a' }]), /Missing named parameter "c"/);
  assert.throws(() => bind([{ index: 0 }], []), /Too few parameter values/);
  assert.throws(() => bind([{ index: 0 }], [true]), /can only bind/, 'as better-sqlite3: booleans are refused, not guessed');
  assert.deepEqual(bind([{ index: 0 }], ['a\u0000b']), ['a\uFFFDb'], 'a NUL, which PostgreSQL text cannot hold, is replaced rather than failing the write');
});

test('store: a value that is not a postgres:// URL is refused by its field, and the message never repeats it', () => {
  for (const bad of ['mysql://u:hunter22@h/db', 'postgres://u:hunter22@/db', 'postgres://u:hunter22@h', 'not a url hunter22']) {
    const r = validate(configSchema, { store: bad });
    assert.equal(r.ok, false, bad);
    const issue = !r.ok ? r.issues.find((i) => i.path.join('.') === 'store') : undefined;
    assert.ok(issue, `store is named for ${bad}`);
    assert.doesNotMatch(JSON.stringify(issue), /hunter22/);
  }
  const ok = validate(configSchema, { store: 'postgresql://u:p@db.internal:5432/switchyard' });
  assert.equal(ok.ok, true);
  const none = validate(configSchema, {});
  assert.equal(none.ok && none.value.store, '', 'absent: the SQLite file');
});

test('the pool behind the store on a real server: types as SQLite gives them, savepoints, hooks, and a lost connection fails the transaction instead of autocommitting the rest', async (t) => {
  const pg = await postgresFor(t);
  if (!pg) return;
  const url = freshPostgresDatabase(tmpDir(t), pg.url);
  const store = await connectStore(tmpDir(t), { url, migrations: allMigrations() });
  t.after(() => store.close());
  const db = store.database;
  assert.equal(store.engine, 'postgres');
  assert.doesNotMatch(store.file, /@/, 'no credentials in what is shown');

  await db.run(statement('CREATE TABLE things (id BIGSERIAL PRIMARY KEY, n BIGINT, f DOUBLE PRECISION, b BYTEA, s TEXT)'));
  const ins = statement('INSERT INTO things (n, f, b, s) VALUES (@n, @f, @b, @s)');
  assert.deepEqual(
    await db.run(ins, { n: 2 ** 40, f: 1.5, b: Buffer.from([0, 1, 255]), s: 'x' }),
    { changes: 1, lastId: 0 },
    'a table with no known row number',
  );
  const event = statement("INSERT INTO events (id, type, payload, received_at) VALUES (?, 'site_view', '{}', 1)");
  assert.deepEqual(await db.run(event, ['evt_1']), { changes: 1, lastId: 1 });
  assert.deepEqual(await db.run(event, ['evt_2']), { changes: 1, lastId: 2 }, 'lastId is the new seq');
  const row = (await db.get(statement('SELECT id, n, f, b, s, COUNT(*) OVER () AS total FROM things'))) as Record<string, unknown>;
  assert.deepEqual(row, { id: 1, n: 2 ** 40, f: 1.5, b: Buffer.from([0, 1, 255]), s: 'x', total: 1 });
  assert.ok(Buffer.isBuffer(row.b));
  assert.equal(await db.value(statement('SELECT COALESCE(?, n) AS v FROM things'), [null]), 2 ** 40, 'a null parameter in COALESCE takes the column type');
  const texts = statement<{ s: string }>('SELECT s FROM things ORDER BY id');
  const count = (where: string) => db.value<number>(statement(`SELECT COUNT(*) FROM things WHERE ${where}`));

  // A nested transaction is a savepoint: its failure undoes only its own writes and runs its rollback hooks.
  const seen: string[] = [];
  await db.transaction(async (tx) => {
    await tx.run(ins, { n: 1, f: 0, b: null, s: 'kept' });
    tx.afterCommit(() => seen.push('committed'));
    await assert.rejects(
      tx.transaction(async (inner) => {
        await inner.run(ins, { n: 1, f: 0, b: null, s: 'undone' });
        inner.onRollback(() => seen.push('inner rolled back'));
        throw new Error('inner');
      }),
    );
    await tx.run(ins, { n: 1, f: 0, b: null, s: 'after' });
  });
  assert.deepEqual(seen, ['inner rolled back', 'committed']);
  assert.deepEqual(
    (await db.all(texts)).map((r) => r.s),
    ['x', 'kept', 'after'],
  );

  // A statement error inside a transaction rolls the whole of it back, as the caller sees it.
  await assert.rejects(
    db.transaction(async (tx) => {
      await tx.run(ins, { n: 9, f: 0, b: null, s: 'lost' });
      await tx.all(statement('SELECT * FROM no_such_table'));
    }),
    /no_such_table/,
  );
  assert.equal(await count("s = 'lost'"), 0);

  // The connection dies mid-transaction: the next statements fail; nothing after the loss commits.
  await assert.rejects(
    db.transaction(async (tx) => {
      await tx.run(ins, { n: 5, f: 0, b: null, s: 'before loss' });
      const pid = await tx.value<number>(statement('SELECT pg_backend_pid() AS pid'));
      adminSql(url, `SELECT pg_terminate_backend(${pid})`);
      await tx.run(ins, { n: 5, f: 0, b: null, s: 'after loss' });
    }),
  );
  assert.equal(await count('n = 5'), 0, 'neither half of the broken transaction is stored');
  assert.equal(await count('TRUE'), 3, 'the store reconnects for the next statement');
});

test('migrations: two stores opening one empty database at once migrate it once', async (t) => {
  const pg = await postgresFor(t);
  if (!pg) return;
  const url = freshPostgresDatabase(tmpDir(t), pg.url);
  const { spawn } = await import('node:child_process');
  const script = `import { connectStore } from ${JSON.stringify(new URL('../src/store/index.ts', import.meta.url).pathname)};
import { allMigrations } from ${JSON.stringify(new URL('../src/server/migrations.ts', import.meta.url).pathname)};
await (await connectStore(process.argv[1], { url: process.argv[2], migrations: allMigrations() })).close();`;
  const run = (dir: string) =>
    new Promise<number | null>((resolve) => {
      const c = spawn(process.execPath, ['--no-node-snapshot', '--input-type=module', '-e', script, dir, url], { stdio: 'inherit' });
      c.on('close', resolve);
    });
  assert.deepEqual(await Promise.all([run(tmpDir(t)), run(tmpDir(t)), run(tmpDir(t))]), [0, 0, 0]);
  const versions = adminSql(url, 'SELECT module, version FROM schema_migrations ORDER BY module')
    .split('\n')
    .map((l) => ({ module: l.split('|')[0]!, version: Number(l.split('|')[1]) }));
  assert.deepEqual(
    versions.map((v) => v.module),
    ['console', 'events', 'installations', 'oauth', 'runtime', 'webhooks'],
  );
  const steps = new Map(allMigrations().map((m) => [m.module, m.postgres?.length ?? 0]));
  for (const v of versions) assert.equal(Number(v.version), steps.get(v.module), `${v.module}: each PostgreSQL step once`);
});

test("migrations are not bound by the serving statements' time-out: a step that takes longer, and the wait for another node's migrations, end in a started store", {
  timeout: 60_000,
}, async (t) => {
  const pg = await postgresFor(t);
  if (!pg) return;
  const url = freshPostgresDatabase(tmpDir(t), pg.url);
  // A step over a large table, stood for by a sleep past the 3 s statement time-out.
  const slow = { module: 'slow', steps: [], postgres: ['SELECT pg_sleep(3.5)', 'CREATE TABLE slow_done (x INT)'] };
  const store = await connectStore(tmpDir(t), { url, migrations: [slow] });
  await store.close();
  assert.match(adminSql(url, "SELECT to_regclass('slow_done') IS NOT NULL"), /t/);
  // Another node holds the migration lock for 3.5 s (as while it migrates): this one waits for it.
  const holder = new (await import('pg')).default.Client({ connectionString: url, application_name: 'switchyard 4242' });
  await holder.connect();
  t.after(() => holder.end());
  await holder.query('SELECT pg_advisory_lock(1937209700)');
  const released = setTimeout(() => void holder.query('SELECT pg_advisory_unlock(1937209700)'), 3_500);
  t.after(() => clearTimeout(released));
  const started = performance.now();
  const log = memoryLogger();
  const second = await connectStore(tmpDir(t), { url, migrations: [slow], log });
  await second.close();
  assert.ok(performance.now() - started >= 3_000, 'it waited for the lock');
  // And said so, at once, naming who holds the lock; then that the wait ended.
  const waiting = log.lines.find((l) => l.msg === "waiting for another node's migrations of the store");
  assert.ok(waiting, JSON.stringify(log.lines));
  assert.match(String(waiting.holder), /switchyard 4242/);
  assert.ok(log.lines.some((l) => l.msg === "another node's migrations ended; this one goes on" && Number(l.waited_ms) >= 3_000));
});

test('backup and restore refuse a PostgreSQL store and name its tools; no password in what they print', async (t) => {
  const { runCli } = await import('./helpers/index.ts');
  const { writeFileSync } = await import('node:fs');
  const { join } = await import('node:path');
  const dir = tmpDir(t);
  const cfg = join(dir, 'config.yaml');
  writeFileSync(cfg, `store: postgres://u:hunter22@127.0.0.1:9/none\ndata_dir: ${join(dir, 'data')}\n`);
  for (const args of [
    ['backup', join(dir, 'b.db')],
    ['restore', join(dir, 'b.db')],
  ]) {
    const r = await runCli([...args, '--config', cfg]);
    assert.notEqual(r.code, 0, args[0]);
    assert.match(r.stderr, /PostgreSQL/);
    assert.match(r.stderr, /pg_dump|pg_restore/);
    assert.doesNotMatch(r.stdout + r.stderr, /hunter22/);
  }
});

test('a store-wide job (retention) runs on one node at a time: the second node is refused until the first releases, or its lease runs out', async (t) => {
  const pg = await postgresFor(t);
  if (!pg) return;
  const { tryStoreWideLock, STORE_WIDE_LEASE_MS } = await import('../src/store/lock.ts');
  const url = freshPostgresDatabase(tmpDir(t), pg.url);
  const [a, b] = [await connectStore(tmpDir(t), { url, migrations: allMigrations() }), await connectStore(tmpDir(t), { url, migrations: allMigrations() })];
  t.after(() => (a.close(), b.close()));
  const lockA = await tryStoreWideLock(a.database, 'job');
  assert.ok(lockA, 'the first node takes it');
  assert.equal(await tryStoreWideLock(b.database, 'job'), undefined, 'the second is refused, without waiting');
  assert.ok(await tryStoreWideLock(b.database, 'another job'), 'another job is another lock');
  await lockA!.release();
  const lockB = await tryStoreWideLock(b.database, 'job');
  assert.ok(lockB, 'free again once released');
  // A holder that died: its lease runs out, then another node takes it.
  const later = () => Date.now() + STORE_WIDE_LEASE_MS + 1;
  assert.equal(await tryStoreWideLock(a.database, 'job'), undefined, 'held while its lease runs');
  const lockA2 = await tryStoreWideLock(a.database, 'job', later);
  assert.ok(lockA2, 'taken once the lease ran out');
  await lockB!.release();
  assert.equal(await tryStoreWideLock(b.database, 'job'), undefined, "the old holder's release does not free the new holder's lease");
  await lockA2!.release();
  const sqlite = openStore(tmpDir(t), { migrations: allMigrations() });
  t.after(() => sqlite.close());
  assert.ok(
    (await tryStoreWideLock(sqlite.database, 'job')) && (await tryStoreWideLock(sqlite.database, 'job')),
    'SQLite: one node owns the file, always this one',
  );
});

test('a process that opened a PostgreSQL store and forgot to close it still ends (idle connections do not hold it)', async (t) => {
  const pg = await postgresFor(t);
  if (!pg) return;
  const { spawnSync } = await import('node:child_process');
  const url = freshPostgresDatabase(tmpDir(t), pg.url);
  const script = `import { connectStore } from ${JSON.stringify(new URL('../src/store/index.ts', import.meta.url).pathname)};
import { statement } from ${JSON.stringify(new URL('../src/store/contract.ts', import.meta.url).pathname)};
const store = await connectStore(process.argv[1], { url: process.argv[2] });
console.log(await store.database.value(statement('SELECT 41 + 1 AS n')));`;
  const r = spawnSync(process.execPath, ['--no-node-snapshot', '--input-type=module', '-e', script, tmpDir(t), url], { encoding: 'utf8', timeout: 15_000 });
  assert.equal(r.stdout.trim(), '42', r.stderr);
  assert.equal(r.status, 0, `ended by itself (signal ${r.signal}): ${r.stderr}`);
});

test('two live nodes may not share a node id (a copied data_dir): the second is refused, naming the file; free again once the first stops', async (t) => {
  const pg = await postgresFor(t);
  if (!pg) return;
  const { claimNodeId, useNodeId } = await import('../src/store/lease-owner.ts');
  const { copyFileSync } = await import('node:fs');
  const { join } = await import('node:path');
  const url = freshPostgresDatabase(tmpDir(t), pg.url);
  const [dirA, dirB] = [tmpDir(t), tmpDir(t)];
  const a = await connectStore(dirA, { url, migrations: allMigrations() });
  const b = await connectStore(dirB, { url, migrations: allMigrations() });
  t.after(() => (a.close(), b.close()));
  const id = useNodeId(dirA);
  copyFileSync(join(dirA, 'node-id'), join(dirB, 'node-id'));
  const held = await claimNodeId(a, dirA);
  await assert.rejects(
    claimNodeId(b, dirB),
    (e: Error & { code?: string; hint?: string }) =>
      e.code === 'conflict' && e.message.includes(id) && e.message.includes(join(dirB, 'node-id')) && /delete/.test(String(e.hint)),
  );
  await held.release();
  await (await claimNodeId(b, dirB)).release();
});

test('two nodes configure one installation in the same moment: neither edit is lost (the row is read locked, not from a cache)', async (t) => {
  const pg = await postgresFor(t);
  if (!pg) return;
  const { createInstallations } = await import('../src/installations/service.ts');
  const { builtinManifest } = await import('../src/registry/shipped.ts');
  const { parseManifest } = await import('../src/manifest/parse.ts');
  const parsed = parseManifest(builtinManifest('webhook'), 'webhook', {}) as { manifest?: unknown };
  const manifest = (parsed.manifest ?? parsed) as never;
  const url = freshPostgresDatabase(tmpDir(t), pg.url);
  const { generationsFor } = await import('../src/store/generations.ts');
  const node = async () => {
    const s = await connectStore(tmpDir(t), { url, migrations: allMigrations() });
    t.after(() => s.close());
    return { s, inst: await createInstallations({ database: s.database, generations: generationsFor(s), manifestOf: () => manifest } as never) };
  };
  const [a, b] = [await node(), await node()];
  const id = (
    await a.inst.install({
      integration: 'webhook',
      configuration: { webhook_url: 'https://a.example/1', event_types: 'site_view' },
      by: { kind: 'admin' },
    } as never)
  ).installation.id;
  await new Promise((r) => setTimeout(r, 100));
  assert.equal((await a.inst.find(id))!.configuration.event_types, 'site_view', 'node A has the row in memory (as a public request leaves it)');
  await b.inst.configure(id, { event_types: 'page_feedback' } as never);
  // At once: A has not been told of B's edit yet (its notification is still on the way).
  await a.inst.configure(id, { webhook_url: 'https://a.example/2' } as never);
  const stored = JSON.parse(String(await b.s.database.value(statement('SELECT configuration FROM installations WHERE id = ?'), [id])));
  // signature_scheme: the manifest's default, stored at install.
  assert.deepEqual(stored, { webhook_url: 'https://a.example/2', event_types: 'page_feedback', signature_scheme: 'platform' });
});

test('a pause on one node while another stores a delivery for the same installation: the pause waits for that commit and holds the delivery', async (t) => {
  const pg = await postgresFor(t);
  if (!pg) return;
  const { spawn } = await import('node:child_process');
  const { createQueue } = await import('../src/webhooks/queue.ts');
  const url = freshPostgresDatabase(tmpDir(t), pg.url);
  const store = await connectStore(tmpDir(t), { url, migrations: allMigrations() });
  t.after(() => store.close());
  await store.database.run(statement('INSERT INTO webhook_endpoints (installation_id, created_at) VALUES (?, ?)'), ['inst_race', Date.now()]);
  // The other node: stores a delivery as ingest does (the INSERT reads the flag), then keeps its transaction open a moment.
  const src = (f: string) => JSON.stringify(new URL(`../src/${f}`, import.meta.url).pathname);
  const script = `import { connectStore } from ${src('store/index.ts')};
import { allMigrations } from ${src('server/migrations.ts')};
import { createQueue } from ${src('webhooks/queue.ts')};
const store = await connectStore(process.argv[2], { url: process.argv[1], migrations: allMigrations() });
const queue = createQueue(store.database, { maxAttempts: () => 4 });
await store.database.transaction(async (tx) => {
  const stored = await queue.enqueue(tx, { eventId: 'evt_race', eventType: 'site_view', installationId: 'inst_race', url: 'http://127.0.0.1:9/hook', body: '{}', now: Date.now() });
  process.stdout.write('stored ' + stored.status + '\\n');
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1500);
});
await store.close();`;
  const other = spawn(process.execPath, ['--no-node-snapshot', '--input-type=module', '-e', script, url, tmpDir(t)], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  other.stdout.on('data', (d) => (out += d));
  const ended = new Promise((resolve) => other.on('close', resolve));
  await waitFor(() => out.includes('stored pending'), 15_000);
  // This node pauses now, as the installations service does: the flag, then the queued deliveries held.
  const queue = createQueue(store.database, { maxAttempts: () => 4 });
  await store.database.transaction(async (tx) => {
    await tx.run(statement('UPDATE webhook_endpoints SET paused = 1 WHERE installation_id = ?'), ['inst_race']);
    await queue.holdInstallation(tx, 'inst_race', Date.now());
  });
  assert.equal(await ended, 0);
  assert.equal(
    await store.database.value(statement("SELECT status FROM webhook_deliveries WHERE event_id = 'evt_race'")),
    'held',
    'stored while the pause was being made, and held by it',
  );
});

test("on SQLite too, claiming the node id sets the lease owners, so the supervisor gives back a dead process's leases by their prefix", async (t) => {
  const { claimNodeId, leaseOwner, processLeases } = await import('../src/store/lease-owner.ts');
  const { readFileSync } = await import('node:fs');
  const { join } = await import('node:path');
  const dir = tmpDir(t);
  const store = openStore(dir, { migrations: allMigrations() });
  t.after(() => store.close());
  await claimNodeId(store, dir);
  const id = readFileSync(join(dir, 'node-id'), 'utf8').trim();
  assert.match(id, /^[0-9a-f]{12}$/);
  assert.equal(processLeases(process.pid), `${id}.${process.pid}.`);
  assert.ok(leaseOwner().startsWith(processLeases(process.pid)), "a worker's owner falls under its process's prefix");
});

/**
 * A server on its own database of `pg`, its store URL carrying a password that trust
 * authentication ignores (no message may show it).
 */
async function serverWithPassword(t: TestContext, pg: PgServer) {
  const { startTestServer } = await import('./helpers/index.ts');
  const dataDir = tmpDir(t);
  const base = new URL(freshPostgresDatabase(dataDir, pg.url));
  base.password = 's3cret';
  const s = await startTestServer(t, { data_dir: dataDir, store: base.toString() });
  return { dataDir, base, s };
}

test('a write the PostgreSQL store refuses is answered naming that database (postgres://host:port/db, no credentials), never the data directory; /healthz says the same', async (t) => {
  const pg = await postgresFor(t);
  if (!pg) return;
  const { dataDir, base, s } = await serverWithPassword(t, pg);
  const database = base.pathname.slice(1);
  const shown = `postgres://127.0.0.1:${pg.port}/${database}`;
  // The database turned read-only (as a standby is): sessions opened from now on cannot write.
  const setReadOnly = (on: boolean) => {
    adminSql(pg.url, `ALTER DATABASE ${database} SET default_transaction_read_only = ${on ? 'on' : 'off'}`);
    adminSql(pg.url, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '${database}' AND pid != pg_backend_pid()`);
  };
  setReadOnly(true);
  let refused: { status: number; body: any } | undefined;
  for (let i = 0; i < 20 && !refused; i++) {
    const r = await s.api('POST', '/api/v1/events', samplePayload('site_view'));
    if (r.status !== 202) refused = r;
  }
  assert.ok(refused, 'an event is refused while the database is read-only');
  assert.equal(refused.status, 503, JSON.stringify(refused.body));
  const { message, hint } = refused.body.error;
  assert.ok(message.includes(shown), message);
  for (const text of [message, hint]) {
    assert.ok(!text.includes(dataDir), `${text} names the data directory`);
    assert.doesNotMatch(text, /check the disk|file system|s3cret/);
  }
  const health = (await (await fetch(`${s.url}/healthz`)).json()) as { store: string; store_error: { message: string; hint: string } };
  assert.equal(health.store, 'failing');
  assert.ok(health.store_error.message.includes(shown), health.store_error.message);
  assert.ok(!`${health.store_error.message} ${health.store_error.hint}`.includes(dataDir));
  assert.doesNotMatch(JSON.stringify(health), /s3cret/);
  setReadOnly(false);
});

test('PostgreSQL stopped under a running server: reads and writes are answered 503 storage_unavailable, "cannot be reached", naming the database (no credentials); /healthz says the same; back once it starts', async (t) => {
  const pg = await postgresFor(t);
  if (!pg) return;
  const { dataDir, base, s } = await serverWithPassword(t, pg);
  const shown = `postgres://127.0.0.1:${pg.port}/${base.pathname.slice(1)}`;
  assert.equal((await s.api('GET', '/api/v1/installations')).status, 200);

  pg.halt();
  try {
    // The first statement may meet the connection the stop ended, the next ones a refused connect: both the same answer.
    for (const [method, path, body] of [
      ['GET', '/api/v1/installations'],
      ['POST', '/api/v1/events', samplePayload('site_view')],
      ['GET', '/api/v1/installations'],
      ['POST', '/api/v1/events', samplePayload('site_view')],
    ] as const) {
      const r = await s.api(method, path, body);
      assert.equal(r.status, 503, `${method} ${path}: ${JSON.stringify(r.body)}`);
      assert.equal(r.body.error.code, 'storage_unavailable', `${method} ${path}: ${JSON.stringify(r.body)}`);
      const { message, hint } = r.body.error;
      assert.ok(message.includes(shown), message);
      assert.match(message, /cannot be reached/);
      assert.doesNotMatch(message, /failed to write/);
      assert.ok(r.headers.get('retry-after'));
      for (const text of [message, hint]) {
        assert.ok(!text.includes(dataDir), `${text} names the data directory`);
        assert.doesNotMatch(text, /s3cret/);
      }
    }
    const health = (await (await fetch(`${s.url}/healthz`)).json()) as { store: string; store_error?: { code: string; message: string } };
    assert.equal(health.store, 'unavailable');
    assert.equal(health.store_error?.code, 'storage_unavailable');
    assert.doesNotMatch(JSON.stringify(health), /s3cret/);
  } finally {
    pg.start();
  }
  await waitFor(async () => (await s.api('GET', '/api/v1/installations')).status === 200, 15_000, 100);
  assert.equal((await s.api('POST', '/api/v1/events', samplePayload('site_view'))).status, 202);
});

test('the initdb template in the shared temp folder is used only when it is a folder of the account PostgreSQL runs as, closed to others: a planted one gets a cluster of its own instead', async (t) => {
  const b = postgresBinaries();
  const who = runAs();
  if ('absent' in b || 'absent' in who) return t.skip('absent' in b ? b.absent : (who as { absent: string }).absent);
  // A temp folder of this test's own, standing for the shared one.
  const root = tmpDir(t);
  chmodSync(root, 0o755);
  const run = (cmd: string, args: string[]) => {
    const r = spawnSync(join(b.bin, cmd), args, { encoding: 'utf8', ...(who.uid !== undefined ? { uid: who.uid, gid: who.gid } : {}) });
    assert.equal(r.status, 0, r.stderr);
    return r.stdout;
  };
  const dataDir = (name: string) => {
    const dir = join(root, name);
    mkdirSync(dir);
    if (who.uid !== undefined) chownSync(dir, who.uid, who.gid!);
    return join(dir, 'data');
  };
  const template = initializedCluster(b.bin, who, run, dataDir('a'), root);
  assert.match(template, /switchyard-pg-template-[0-9a-f]{16}$/, 'made once, in the temp folder');
  assert.equal(initializedCluster(b.bin, who, run, dataDir('b'), root), template, 'and found again');

  // Open to others: anyone could have written its postgresql.conf.
  chmodSync(template, 0o777);
  const own = dataDir('c');
  assert.equal(initializedCluster(b.bin, who, run, own, root), own, 'not used: a cluster of its own instead');
  assert.ok(existsSync(join(own, 'PG_VERSION')), 'made by initdb');
  assert.equal(statSync(template).mode & 0o777, 0o777, 'and the planted one left as it was');

  // A link in its place, to a folder that would pass: not followed.
  rmSync(template, { recursive: true });
  symlinkSync(dirname(own), template);
  const other = dataDir('d');
  assert.equal(initializedCluster(b.bin, who, run, other, root), other);
});
