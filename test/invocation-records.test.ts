/**
 * Invocation records on the store's contract (src/runtime/records.ts): the records of one turn
 * are one statement in one commit, in the order they came; a bad row does not lose the others;
 * readers see what was answered. On SQLite, and on PostgreSQL (SWITCHYARD_TEST_PG_URL) through the
 * store's connection and through the asynchronous pool.
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { connectStore } from '../src/store/index.ts';
import { statement, type Database } from '../src/store/contract.ts';
import { createPostgresDatabase } from '../src/store/postgres/pool.ts';
import { allMigrations } from '../src/server/migrations.ts';
import { createInvocationRecords } from '../src/runtime/records.ts';
import { createInvocations } from '../src/runtime/invocations.ts';
import { createLateLogs } from '../src/runtime/late-logs.ts';
import { createOutputPolicy } from '../src/runtime/output.ts';
import { memoryLogger } from '../src/log/index.ts';
import { freshPostgresDatabase, tmpDir } from './helpers/index.ts';
import { counting } from './helpers/counting.ts';
import { postgresFor } from './helpers/postgres.ts';

const pg = process.env.SWITCHYARD_TEST_PG_URL;
const IMPLEMENTATIONS = pg ? (['connection', 'pool'] as const) : (['connection'] as const);

async function open(t: TestContext, using: (typeof IMPLEMENTATIONS)[number]): Promise<Database> {
  const dir = tmpDir(t);
  const url = pg ? freshPostgresDatabase(dir) : undefined;
  const store = await connectStore(dir, { url, migrations: allMigrations() });
  t.after(() => store.close());
  if (using === 'connection') return store.database;
  const pool = createPostgresDatabase({ url: url!, name: 'test' });
  t.after(() => pool.close());
  return pool;
}

const row = (id: string, i: number) => [
  id,
  'hello',
  null,
  'fetch',
  null,
  200,
  1.25 + i,
  0.5,
  null,
  null,
  null,
  null,
  JSON.stringify([{ time: i, level: 'log', message: `line ${i}` }]),
  new Date(1_700_000_000_000 + i).toISOString(),
];
const notice = (id: string) => ({ kind: 'recorded' as const, id, integration: 'hello', installationId: null, status: 200 });

for (const using of IMPLEMENTATIONS) {
  test(`the records of one turn are one commit, one statement on PostgreSQL and a few on SQLite, in the order they came (${using})`, async (t) => {
    const { n, database } = counting(await open(t, using));
    const records = createInvocationRecords(database, memoryLogger());
    const heard: string[] = [];
    records.observe((x) => heard.push(x.id));
    const ids = Array.from({ length: 300 }, (_, i) => `req_turn_${String(i).padStart(3, '0')}`);
    ids.forEach((id, i) => records.record(row(id, i), notice(id), false));
    await records.flushRecords();
    // On PostgreSQL the feed's order lock is one statement more (store/feed-order.ts); SQLite takes
    // multi-row VALUES of 128, 64, ... rows (store/rows-insert.ts): 300 = 128 + 128 + 32 + 8 + 4.
    assert.deepEqual({ commits: n.commits, statements: n.statements }, { commits: 1, statements: database.engine === 'postgres' ? 2 : 5 });
    assert.deepEqual(heard, ids, 'observers hear each record once it is committed, in order');
    const page = await createInvocations(database).list({ limit: 500 });
    assert.deepEqual(
      page.invocations.map((i) => i.requestId),
      [...ids].reverse(),
      'newest first: the rows went in in the order they came',
    );
    const first = page.invocations.at(-1)!;
    assert.equal(first.status, 200);
    assert.equal(first.durationMs, 1.25);
    assert.equal(first.installationId, null);
    assert.deepEqual(
      first.logs.map((l) => l.message),
      ['line 0'],
    );
    assert.equal(first.createdAt, new Date(1_700_000_000_000).toISOString());
    await records.close();
  });

  test(`a record's text is stored alike on either engine: a NUL and a lone surrogate become U+FFFD (${using})`, async (t) => {
    const database = await open(t, using);
    const records = createInvocationRecords(database, memoryLogger());
    const r = row('req_text', 0);
    r[8] = 'exception';
    r[9] = 'bad\u0000byte and \ud800 alone';
    await records.record(r, notice('req_text'), true);
    const stored = await createInvocations(database).get('req_text');
    assert.equal(stored!.error?.message, 'bad\uFFFDbyte and \uFFFD alone');
    await records.close();
  });

  test(`a record that cannot be stored does not lose the others of its turn (${using})`, async (t) => {
    const database = await open(t, using);
    const log = memoryLogger();
    const records = createInvocationRecords(database, log);
    records.record(row('req_dup', 0), notice('req_dup'), false);
    await records.flushRecords();
    // The same id again (its primary key) between two good ones, all waited for.
    // req_a, written alone once its turn failed, keeps text as a turn's rows do (store/text.ts).
    const a = row('req_a', 1);
    a[8] = 'exception';
    a[9] = 'a\u0000b';
    await Promise.all([
      records.record(a, notice('req_a'), true),
      records.record(row('req_dup', 2), notice('req_dup'), true),
      records.record(row('req_b', 3), notice('req_b'), true),
    ]);
    const invocations = createInvocations(database);
    assert.equal((await invocations.get('req_a'))!.error?.message, 'a\uFFFDb');
    assert.ok(await invocations.get('req_b'));
    assert.equal((await invocations.get('req_dup'))!.durationMs, 1.25, 'the first one stays as it was');
    assert.ok(log.lines.some((l) => l.msg === 'recording an invocation failed' && l.request_id === 'req_dup'));
    await records.close();
  });

  test(`a line printed after the answer that is handed over as its result comes joins the record (${using})`, async (t) => {
    const database = await open(t, using);
    const log = memoryLogger();
    const records = createInvocationRecords(database, log);
    const deps = {
      log,
      registry: { get: () => undefined } as never,
      installations: { get: () => undefined, signingSecret: () => 'secret' } as never,
      logBudget: { perInvocation: 1 << 16, perMinute: 1 << 20, diskReserve: 0, dataDir: tmpDir(t), freeBytes: () => Infinity },
    };
    const id = 'req_late_race';
    let committed: Promise<void> | undefined;
    // The result comes just as the line's store looks for its record (after it flushed the records
    // waiting): nothing waits for the line in `early` yet, and the record is queued, not committed.
    const looking: Database = {
      ...database,
      engine: database.engine,
      all: (st, p) => database.all(st, p),
      value: (st, p) => database.value(st, p),
      run: (st, p) => database.run(st, p),
      transaction: (fn) => database.transaction(fn),
      transactionUnlessBusy: (fn) => database.transactionUnlessBusy(fn),
      get: (st, p) => {
        if (!committed) {
          assert.deepEqual(late.takeEarly(id, [], { name: 'hello' } as never), []);
          committed = records.record(row(id, 0), notice(id), true);
        }
        return database.get(st, p);
      },
    };
    const late = createLateLogs(looking, deps, createOutputPolicy(deps), records);
    late.appendLateLog(id, { time: 1, level: 'log', message: 'printed after' });
    await late.settled();
    await committed;
    const inv = await createInvocations(database).get(id);
    assert.deepEqual(
      inv!.logs.map((l) => l.message),
      ['line 0', 'printed after'],
    );
    await records.close();
  });
}

test('PostgreSQL frozen: records and late lines that cannot be stored are given up on after one wait, not one per row or line', async (t) => {
  const server = await postgresFor(t);
  if (!server) return;
  t.after(() => {
    try {
      server.thaw();
    } catch {
      /* not frozen */
    }
  });
  const dir = tmpDir(t);
  const url = freshPostgresDatabase(dir, server.url);
  const store = await connectStore(dir, { url, migrations: allMigrations() });
  t.after(() => store.close());
  const database = createPostgresDatabase({ url, name: 'test', queryTimeoutMs: 300 });
  t.after(() => database.close());
  const log = memoryLogger();
  const records = createInvocationRecords(database, log);
  const deps = {
    log,
    registry: { get: () => undefined } as never,
    installations: { get: () => undefined, signingSecret: () => 'secret' } as never,
    logBudget: { perInvocation: 1 << 16, perMinute: 1 << 20, diskReserve: 0, dataDir: tmpDir(t), freeBytes: () => Infinity },
  };
  const late = createLateLogs(database, deps, createOutputPolicy(deps), records);
  await database.value(statement('SELECT 1')); // connected before the freeze
  server.freeze();
  for (let i = 0; i < 20; i++) records.record(row(`req_frozen_${i}`, i), notice(`req_frozen_${i}`), false);
  await records.flushRecords();
  for (let i = 0; i < 20; i++) late.appendLateLog(`req_frozen_${i}`, { time: i, level: 'log', message: `late ${i}` });
  await late.settled();
  const failures = (msg: string) => log.lines.filter((l) => l.msg === msg).length;
  assert.equal(failures('recording invocations failed'), 1, 'the batch is given up on once');
  assert.equal(failures('recording an invocation failed'), 0, 'not row by row');
  assert.equal(failures('storing a line printed after the answer failed'), 1, 'the first line waits; the others give way');
  assert.ok(log.lines.some((l) => l.msg === 'lines printed after the answer were not stored: too many waited for a slow store' && l.lines === 19));
  server.thaw();
});

test("an event's invocations are found through the event index, which leaves out the invocations no event made", async (t) => {
  const store = await connectStore(tmpDir(t), { migrations: allMigrations() });
  t.after(() => store.close());
  const db = store.sqlite!;
  const insert = db.prepare(
    `INSERT INTO invocations (id, integration, installation_id, event_type, event_id, status, duration_ms, cpu_ms, created_at) VALUES (?, 'a', NULL, ?, ?, 200, 1, 1, '2026-11-28T00:00:00.000Z')`,
  );
  insert.run('req_1', 'fetch', null);
  insert.run('req_2', 'space_view', 'evt_1');
  insert.run('req_3', 'fetch', null);
  const indexes = db.prepare('PRAGMA index_list(invocations)').all() as Array<{ name: string; partial: number }>;
  assert.equal(indexes.find((i) => i.name === 'invocations_by_event')?.partial, 1, 'a partial index: event-made invocations only');
  const { invocations } = await createInvocations(store.database).list({ event: 'evt_1' });
  assert.deepEqual(
    invocations.map((i) => i.requestId),
    ['req_2'],
  );
  const plan = db
    .prepare('EXPLAIN QUERY PLAN SELECT id FROM invocations WHERE event_id = ? ORDER BY rowid DESC LIMIT 50')
    .all('evt_1')
    .map((r) => (r as { detail: string }).detail)
    .join(' | ');
  assert.match(plan, /USING INDEX invocations_by_event \(event_id=\?\)/, plan);
});
