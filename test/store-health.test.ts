/**
 * The store's health (src/store/health.ts) on the store's contract: the read /healthz asks answers
 * at once whatever the store does (a PostgreSQL server frozen: "not readable", the event loop never
 * held), and the write probe sees recovery by itself, on SQLite and on PostgreSQL's pool.
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import { linkSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { errorAnswer, type HttpServices } from '../src/http/app.ts';
import { memoryLogger } from '../src/log/index.ts';
import { statement } from '../src/store/contract.ts';
import { createStoreHealth, storeHealthMigrationPostgres } from '../src/store/health.ts';
import { openStore } from '../src/store/index.ts';
import { createPostgresDatabase } from '../src/store/postgres/pool.ts';
import { allMigrations } from '../src/server/migrations.ts';
import { postgresFor } from './helpers/postgres.ts';
import { tmpDir, waitFor } from './helpers/index.ts';

const unreachable = Object.assign(new Error('connection lost'), { code: '08006' });

/** Counts timer ticks while `work` runs: the event loop's pulse. */
async function ticking<T>(work: () => Promise<T>): Promise<{ value: T; ticks: number }> {
  let ticks = 0;
  const timer = setInterval(() => ticks++, 10);
  try {
    return { value: await work(), ticks };
  } finally {
    clearInterval(timer);
  }
}

test('SQLite: the store reads; a failed write is reported until the probe writes again', async (t) => {
  const store = openStore(tmpDir(t), { migrations: allMigrations() });
  t.after(() => store.close());
  const health = createStoreHealth(store.database, { engine: 'sqlite', dataDir: 'x' }, { probeEveryMs: 20 });
  t.after(() => health.close());
  assert.equal(await health.readable(), true);
  health.failed(Object.assign(new Error('disk I/O error'), { code: 'SQLITE_IOERR' }));
  assert.equal(health.status().ok, false);
  await waitFor(() => health.status().ok);
});

async function frozenSetup(t: TestContext) {
  const server = await postgresFor(t);
  if (!server) return undefined;
  t.after(() => {
    try {
      server.thaw();
    } catch {
      /* not frozen */
    }
  });
  const database = createPostgresDatabase({ url: server.url, name: 'postgres://test', queryTimeoutMs: 2_000 });
  t.after(() => database.close());
  await database.run(statement(storeHealthMigrationPostgres));
  return { server, database };
}

test('PostgreSQL frozen: the store is said unreadable at once (the event loop turning), and readable and writable again once it answers', async (t) => {
  const s = await frozenSetup(t);
  if (!s) return;
  const health = createStoreHealth(s.database, { engine: 'postgres', database: 'postgres://test' }, { probeEveryMs: 50 });
  t.after(() => health.close());
  assert.equal(await health.readable(), true);
  s.server.freeze();
  health.failed(unreachable);
  // Answers without waiting for the store's own statement time-out; asked again while the first
  // read is out, it shares that read rather than sending another.
  const first = await ticking(() => health.readable());
  assert.equal(first.value, false, 'a frozen server is not readable');
  assert.ok(first.ticks > 0, 'the event loop turned meanwhile');
  assert.equal(await health.readable(), false);
  assert.equal(health.status().ok, false);
  s.server.thaw();
  await waitFor(() => health.readable(), 10_000);
  await waitFor(() => health.status().ok, 10_000);
});

/** A real socket error: the server beside it resets the connection (ECONNRESET, no file named). */
async function socketReset(t: TestContext): Promise<NodeJS.ErrnoException> {
  const server = net.createServer((socket) => socket.resetAndDestroy());
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.after(() => server.close());
  const { port } = server.address() as net.AddressInfo;
  return new Promise((resolve) => {
    const req = http.get({ host: '127.0.0.1', port, path: '/' }, () => {});
    req.on('error', resolve);
  });
}

/** A real file-system error, EPERM (a hard link to a directory), on `dir`. */
function linkRefused(dir: string): NodeJS.ErrnoException {
  mkdirSync(join(dir, 'sub'), { recursive: true });
  try {
    linkSync(join(dir, 'sub'), join(dir, 'sub-link'));
  } catch (e) {
    return e as NodeJS.ErrnoException;
  }
  throw new Error('a hard link to a directory was allowed');
}

test("a route's error with an operating system's code is the store's only for a file of the store's: a reset by another server or a file elsewhere is a 500 and /healthz stays ok", async (t) => {
  const dataDir = tmpDir(t);
  const store = openStore(dataDir, { migrations: allMigrations() });
  t.after(() => store.close());
  const log = memoryLogger();
  const services = { store, log } as unknown as HttpServices;
  const answer = async (error: unknown) => {
    const r = errorAnswer(error, services, 'GET', 'http://127.0.0.1/api/v1/x');
    return { status: r.status, code: ((await r.json()) as { error: { code: string } }).error.code };
  };

  const reset = await socketReset(t);
  assert.equal(reset.code, 'ECONNRESET');
  assert.deepEqual(await answer(reset), { status: 500, code: 'internal' });
  const elsewhere = linkRefused(tmpDir(t));
  assert.equal(elsewhere.code, 'EPERM');
  assert.deepEqual(await answer(elsewhere), { status: 500, code: 'internal' });
  // h3 hands the route's error over as the cause of its own.
  assert.deepEqual(await answer(Object.assign(new Error('wrapped'), { cause: elsewhere })), { status: 500, code: 'internal' });
  assert.equal(store.health.status().ok, true, 'the store was never at fault');

  // The same code on a file in the store's directory is the store's: 503 with its hint, and failing.
  const own = linkRefused(dataDir);
  const refused = await answer(own);
  assert.equal(refused.status, 503);
  assert.equal(refused.code, 'storage_read_only');
  assert.equal(store.health.status().ok, false);
});

test('PostgreSQL over a Unix socket that is not there: a statement fails as storage_unavailable (worded by the store), not as a raw ENOENT a route would answer 500', async (t) => {
  const dir = tmpDir(t); // no .s.PGSQL.5432 in it
  const db = createPostgresDatabase({ url: `postgres://u@/db?host=${encodeURIComponent(dir)}`, name: 'socketless', queryTimeoutMs: 2_000 });
  t.after(() => db.close());
  const failed = await db.value(statement('SELECT 1')).then(
    () => undefined,
    (e: { code?: string; message?: string }) => e,
  );
  assert.equal(failed?.code, 'storage_unavailable', String(failed?.message));
  assert.match(String(failed?.message), /cannot be reached/);
});
