/**
 * The store's health (src/store/health.ts) on the store's contract: the read /healthz asks answers
 * at once whatever the store does (a PostgreSQL server frozen: "not readable", the event loop never
 * held), and the write probe sees recovery by itself, on SQLite and on PostgreSQL's pool.
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
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
