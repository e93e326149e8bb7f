/**
 * The session lock (src/store/postgres/session-lock.ts) at its start, against a real server, when
 * another session holds it: one that does something is another live process (refused once seen acting); one
 * that does nothing (a frozen backend: its client gone, the server not told yet) is waited for, and
 * never ended from here: the lock is taken if it ends, else refused, naming that session.
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import pg from 'pg';
import { holdSessionLock, type SessionLock } from '../src/store/postgres/session-lock.ts';
import { postgresFor } from './helpers/postgres.ts';

const KEY = 42;
const NAME = 'session-lock-test';

/** A plain session that holds the lock (another process, as the server sees it). */
async function holder(t: TestContext, url: string): Promise<{ c: pg.Client; pid: number }> {
  const c = new pg.Client({ connectionString: url, application_name: 'another holder' });
  c.on('error', () => {});
  await c.connect();
  t.after(() => c.end().catch(() => {}));
  const r = await c.query('SELECT pg_backend_pid() AS pid, pg_try_advisory_lock($1::integer, hashtext($2)) AS got', [KEY, NAME]);
  assert.equal(r.rows[0].got, true);
  return { c, pid: r.rows[0].pid };
}

const take = (url: string, silentWaitMs?: number) =>
  holdSessionLock({ url, key: KEY, name: NAME, applicationName: 'test lock', lost: () => assert.fail('lost'), ...(silentWaitMs ? { silentWaitMs } : {}) });

test('a holder that does something is refused once seen acting (not silent), named by its session', async (t) => {
  const server = await postgresFor(t);
  if (!server) return;
  const h = await holder(t, server.url);
  const busy = setInterval(() => void h.c.query('SELECT 1').catch(() => {}), 300);
  t.after(() => clearInterval(busy));
  const got = await take(server.url);
  assert.ok('refused' in got);
  assert.equal(got.silent, false);
  assert.equal(got.holder?.pid, h.pid);
  assert.equal(got.holder?.applicationName, 'another holder');
  assert.equal(got.holder?.clientAddr, '127.0.0.1');
});

test('a holder that does nothing at the start is waited for and never ended: refused as silent if it outlasts the wait; taken once it ends', async (t) => {
  const server = await postgresFor(t);
  if (!server) return;
  const h = await holder(t, server.url);
  process.kill(h.pid, 'SIGSTOP');
  try {
    const got = await take(server.url, 1_000);
    assert.ok('refused' in got);
    assert.equal(got.silent, true);
    assert.equal(got.holder?.pid, h.pid);
    assert.ok(got.holder?.lastActive instanceof Date);
  } finally {
    process.kill(h.pid, 'SIGCONT');
  }
  // Not ended by the one that waited: the session answers once thawed, and still holds the lock.
  assert.equal((await h.c.query('SELECT 1 AS one')).rows[0].one, 1);

  // A holder that ends while it is waited for: the lock is taken then.
  process.kill(h.pid, 'SIGSTOP');
  const ends = setTimeout(() => {
    process.kill(h.pid, 'SIGTERM');
    process.kill(h.pid, 'SIGCONT');
  }, 2_000);
  t.after(() => clearTimeout(ends));
  let lock: SessionLock | undefined;
  try {
    const got = await take(server.url);
    assert.ok(!('refused' in got), `refused: ${JSON.stringify(got)}`);
    lock = got;
  } finally {
    clearTimeout(ends);
    try {
      process.kill(h.pid, 'SIGCONT');
    } catch {
      /* ended */
    }
  }
  await lock.release();
});
