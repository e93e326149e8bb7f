/**
 * The delivery queue's statement shapes on a real PostgreSQL (test/helpers/postgres.ts), before
 * the store uses them: a lease claim with FOR UPDATE SKIP LOCKED gives each due row to exactly one
 * of several concurrent claimers; an expired lease is taken over by another claimer (and the first
 * one's completion then changes nothing); LISTEN/NOTIFY wakes a waiting claimer once an insert
 * commits. Skipped, with the reason, where PostgreSQL's binaries are absent.
 */
import assert from 'node:assert/strict';
import { test, type TestContext } from 'node:test';
import pg from 'pg';
import { postgresFor } from './helpers/postgres.ts';

const SCHEMA = `
CREATE TABLE webhook_deliveries (
  seq BIGSERIAL PRIMARY KEY, id TEXT NOT NULL UNIQUE, origin TEXT NOT NULL,
  status TEXT NOT NULL, attempts INTEGER NOT NULL DEFAULT 0,
  next_attempt_at BIGINT, lease_until BIGINT, lease_owner TEXT, completed_at BIGINT);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE next_attempt_at IS NOT NULL;`;

const CLAIM = `UPDATE webhook_deliveries SET lease_until = $1, lease_owner = $2
  WHERE seq IN (SELECT seq FROM webhook_deliveries
                WHERE next_attempt_at <= $3 AND (lease_until IS NULL OR lease_until <= $3)
                ORDER BY next_attempt_at, seq LIMIT $4 FOR UPDATE SKIP LOCKED)
  RETURNING seq, id`;
const COMPLETE = `UPDATE webhook_deliveries SET status = 'delivered', next_attempt_at = NULL, completed_at = $1,
  attempts = attempts + 1, lease_until = NULL, lease_owner = NULL WHERE seq = $2 AND lease_owner = $3`;

/**
 * Run `body` with a fresh server and a way to connect to it; the connections are closed before the
 * server stops (t.after hooks run in the order registered, the server's first).
 */
async function withPostgres(t: TestContext, body: (connect: () => Promise<pg.Client>) => Promise<void>): Promise<void> {
  const server = await postgresFor(t);
  if (!server) return;
  const clients: pg.Client[] = [];
  try {
    await body(async () => {
      const c = new pg.Client({ connectionString: server.url });
      clients.push(c);
      await c.connect();
      return c;
    });
  } finally {
    await Promise.all(clients.map((c) => c.end().catch(() => {})));
  }
}

async function seed(c: pg.Client, n: number, at: number): Promise<void> {
  await c.query(SCHEMA);
  await c.query(
    `INSERT INTO webhook_deliveries (id, origin, status, next_attempt_at)
     SELECT 'dlv_' || i, 'https://r' || (i % 3) || '.example', 'pending', $1 FROM generate_series(1, $2) AS i`,
    [at, n],
  );
}

test('a SKIP LOCKED lease claim gives each due delivery to exactly one of 3 concurrent claimers', { timeout: 60_000 }, async (t) => {
  await withPostgres(t, async (connect) => {
    const setup = await connect();
    const N = 600;
    await seed(setup, N, 0);
    const claimers = await Promise.all([0, 1, 2].map(() => connect()));
    const now = Date.now();
    const got = await Promise.all(
      claimers.map(async (c, i) => {
        const mine: string[] = [];
        for (;;) {
          const { rows } = await c.query(CLAIM, [now + 60_000, `node-${i}`, now, 1 + (i % 3) * 2]);
          if (!rows.length) return mine;
          mine.push(...rows.map((r) => String(r.seq)));
        }
      }),
    );
    const all = got.flat();
    t.diagnostic(`claims per claimer: ${got.map((g) => g.length).join(', ')}`);
    assert.equal(all.length, N, 'every claim is of a distinct row');
    assert.equal(new Set(all).size, N, 'no row was claimed twice');
    const { rows } = await setup.query(`SELECT lease_owner, COUNT(*)::int AS n FROM webhook_deliveries GROUP BY lease_owner ORDER BY lease_owner`);
    assert.deepEqual(
      rows.map((r) => [r.lease_owner, r.n]),
      got.map((g, i) => [`node-${i}`, g.length]).filter(([, n]) => n),
      'each row is leased to the claimer that got it',
    );
  });
});

test('an expired lease is reclaimed by another claimer; the first one can no longer complete it', { timeout: 60_000 }, async (t) => {
  await withPostgres(t, async (connect) => {
    const a = await connect();
    const b = await connect();
    const t0 = 1_000_000;
    await seed(a, 1, t0);
    const first = await a.query(CLAIM, [t0 + 30_000, 'node-a', t0, 1]);
    assert.equal(first.rows.length, 1, 'node-a takes the due delivery');
    // While the lease holds (any time before t0 + 30 s), nobody else gets it.
    assert.equal((await b.query(CLAIM, [t0 + 10_000 + 30_000, 'node-b', t0 + 10_000, 1])).rows.length, 0);
    assert.equal((await b.query(CLAIM, [t0 + 29_999 + 30_000, 'node-b', t0 + 29_999, 1])).rows.length, 0);
    // Once it has run out, node-b reclaims it.
    const again = await b.query(CLAIM, [t0 + 30_000 + 30_000, 'node-b', t0 + 30_000, 1]);
    assert.deepEqual(
      again.rows.map((r) => String(r.seq)),
      first.rows.map((r) => String(r.seq)),
    );
    // node-a's late outcome is not recorded over node-b's lease; node-b's is.
    assert.equal((await a.query(COMPLETE, [t0 + 31_000, first.rows[0].seq, 'node-a'])).rowCount, 0);
    assert.equal((await b.query(COMPLETE, [t0 + 31_000, first.rows[0].seq, 'node-b'])).rowCount, 1);
    const { rows } = await a.query('SELECT status, attempts, lease_owner, next_attempt_at FROM webhook_deliveries');
    assert.deepEqual(rows, [{ status: 'delivered', attempts: 1, lease_owner: null, next_attempt_at: null }]);
  });
});

test('LISTEN/NOTIFY wakes a waiting claimer when an insert commits, not before', { timeout: 60_000 }, async (t) => {
  await withPostgres(t, async (connect) => {
    const inserter = await connect();
    const claimer = await connect();
    await seed(inserter, 0, 0);
    await claimer.query('LISTEN webhook_deliveries_due');
    let commitSent = Infinity;
    const woken = new Promise<{ at: number; payload: string | undefined }>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('the claimer was not woken within 5 s')), 5000);
      claimer.once('notification', (n) => {
        clearTimeout(timer);
        resolve({ at: performance.now(), payload: n.payload });
      });
    });
    await inserter.query('BEGIN');
    await inserter.query(`INSERT INTO webhook_deliveries (id, origin, status, next_attempt_at) VALUES ('dlv_1', 'https://r.example', 'pending', 0)`);
    await inserter.query(`SELECT pg_notify('webhook_deliveries_due', 'https://r.example')`);
    // Not delivered while the transaction is open.
    await new Promise((r) => setTimeout(r, 200));
    commitSent = performance.now();
    await inserter.query('COMMIT');
    const w = await woken;
    assert.ok(w.at >= commitSent, 'the notification came after COMMIT was sent');
    assert.equal(w.payload, 'https://r.example');
    t.diagnostic(`woken ${(w.at - commitSent).toFixed(2)} ms after COMMIT was sent`);
    // The woken claimer finds the committed row.
    const now = Date.now();
    const { rows } = await claimer.query(CLAIM, [now + 30_000, 'node-b', now, 10]);
    assert.deepEqual(
      rows.map((r) => r.id),
      ['dlv_1'],
    );
  });
});
