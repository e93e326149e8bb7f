/**
 * The PostgreSQL pool (src/store/postgres/pool.ts) against a real server that misbehaves: frozen
 * (SIGSTOP: connections stay open, nothing answers), stopped, restarted mid-transaction. A
 * statement fails promptly as `storage_unavailable` (never hangs), the event loop keeps turning
 * meanwhile, nothing half-written is kept, and the pool works again once the server is back.
 * Transactions run side by side, each on a connection of its own.
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { statement } from '../src/store/contract.ts';
import { createPostgresDatabase } from '../src/store/postgres/pool.ts';
import { SwitchyardError } from '../src/errors.ts';
import { postgresFor } from './helpers/postgres.ts';

const create = statement('CREATE TABLE IF NOT EXISTS things (id BIGSERIAL PRIMARY KEY, v TEXT NOT NULL)');
const insert = statement('INSERT INTO things (v) VALUES (?)');
const values = statement<{ v: string }>('SELECT v FROM things ORDER BY id');
const one = statement('SELECT 1 AS one');

async function setup(t: TestContext, queryTimeoutMs = 1_000) {
  const server = await postgresFor(t);
  if (!server) return undefined;
  t.after(() => {
    try {
      server.thaw();
    } catch {
      /* not frozen, or gone */
    }
  });
  const db = createPostgresDatabase({ url: server.url, name: `postgres://127.0.0.1:${server.port}/postgres`, queryTimeoutMs });
  t.after(() => db.close());
  await db.run(create);
  return { server, db };
}

/** Counts timer ticks while `work` runs: the event loop's pulse. */
async function ticking<T>(work: () => Promise<T>): Promise<{ value?: T; error?: unknown; ms: number; ticks: number }> {
  let ticks = 0;
  const timer = setInterval(() => ticks++, 10);
  const t0 = performance.now();
  try {
    return { value: await work(), ms: performance.now() - t0, ticks };
  } catch (error) {
    return { error, ms: performance.now() - t0, ticks };
  } finally {
    clearInterval(timer);
  }
}

const unavailable = (e: unknown) => e instanceof SwitchyardError && e.code === 'storage_unavailable';

test('transactions run side by side, each on a connection of its own', async (t) => {
  const s = await setup(t);
  if (!s) return;
  let letGo!: () => void;
  const gate = new Promise<void>((r) => (letGo = r));
  const first = s.db.transaction(async (tx) => {
    await tx.run(insert, ['first']);
    await gate;
  });
  await s.db.transaction(async (tx) => {
    await tx.run(insert, ['second']);
  });
  assert.deepEqual(
    (await s.db.all(values)).map((r) => r.v),
    ['second'],
    'the second committed while the first was still open, which it cannot see',
  );
  letGo();
  await first;
  assert.deepEqual((await s.db.all(values)).map((r) => r.v).sort(), ['first', 'second']);
});

test('a frozen server: statements fail as storage_unavailable within the time-out, the event loop keeps turning, and work resumes once it answers', {
  timeout: 60_000,
}, async (t) => {
  const s = await setup(t, 1_000);
  if (!s) return;
  await s.db.run(insert, ['before']);
  s.server.freeze();
  const during = await ticking(() => s.db.run(insert, ['during']));
  assert.ok(unavailable(during.error), `rejected as storage_unavailable, got ${String(during.error)}`);
  assert.ok(during.ms < 2_500, `within the time-out and its margin (${Math.round(during.ms)} ms)`);
  assert.ok(during.ticks >= during.ms / 10 / 3, `the event loop turned while it waited (${during.ticks} ticks in ${Math.round(during.ms)} ms)`);
  const tx = await ticking(() => s.db.transaction(async (t2) => t2.run(insert, ['in a transaction'])));
  assert.ok(unavailable(tx.error), `a transaction too: ${String(tx.error)}`);
  s.server.thaw();
  const after = await ticking(async () => {
    for (;;) {
      try {
        return await s.db.run(insert, ['after']);
      } catch (e) {
        if (!unavailable(e)) throw e;
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  });
  assert.equal(after.error, undefined);
  const stored = (await s.db.all(values)).map((r) => r.v);
  assert.ok(stored.includes('before') && stored.includes('after') && !stored.includes('in a transaction'), `stored: ${stored.join(', ')}`);
});

test('a stopped server: statements fail at once as storage_unavailable; started again, the pool reconnects', { timeout: 60_000 }, async (t) => {
  const s = await setup(t);
  if (!s) return;
  await s.db.run(insert, ['before']);
  s.server.halt();
  const down = await ticking(() => s.db.value(one));
  assert.ok(unavailable(down.error), `rejected as storage_unavailable, got ${String(down.error)}`);
  assert.ok(down.ms < 1_500, `promptly (${Math.round(down.ms)} ms)`);
  s.server.start();
  assert.equal(Number(await s.db.value(one)), 1, 'the first statement after the start succeeds');
  assert.deepEqual(
    (await s.db.all(values)).map((r) => r.v),
    ['before'],
  );
});

test('a restart in the middle of a transaction: it fails as storage_unavailable, none of it is kept, and the next one commits', {
  timeout: 60_000,
}, async (t) => {
  const s = await setup(t);
  if (!s) return;
  const failed = await ticking(() =>
    s.db.transaction(async (tx) => {
      await tx.run(insert, ['half']);
      s.server.restart();
      await tx.run(insert, ['other half']);
    }),
  );
  assert.ok(unavailable(failed.error), `rejected as storage_unavailable, got ${String(failed.error)}`);
  await s.db.transaction(async (tx) => {
    await tx.run(insert, ['whole']);
  });
  assert.deepEqual(
    (await s.db.all(values)).map((r) => r.v),
    ['whole'],
  );
});

/** The next payload `listen` hands `fn` (undefined: look again), or 'none' after `ms`. */
function nextOn(seen: Array<string | undefined>, from: number, ms: number): Promise<string | undefined | 'none'> {
  const until = Date.now() + ms;
  return new Promise((resolve) => {
    const look = () => {
      if (seen.length > from) return resolve(seen[from]);
      if (Date.now() > until) return resolve('none');
      setTimeout(look, 10);
    };
    look();
  });
}

test('notifications: a NOTIFY sent in a transaction arrives when it commits, never when it rolls back; after a restart listeners are told to look again and hear later ones', {
  timeout: 60_000,
}, async (t) => {
  const s = await setup(t);
  if (!s) return;
  const seen: Array<string | undefined> = [];
  const stop = s.db.notifications!.listen('things_changed', (p) => seen.push(p));
  t.after(stop);
  // The listening connection opens with the first listener; once its LISTEN is in effect, listeners
  // are told to look again (a notification sent while it opened may have been missed).
  await s.db.notifications!.ready('things_changed');
  assert.deepEqual(seen, [undefined]);
  await s.db.notifications!.notify(s.db, 'things_changed', 'ready');
  assert.equal(await nextOn(seen, 1, 5_000), 'ready');
  seen.length = 0;

  let letGo!: () => void;
  const gate = new Promise<void>((r) => (letGo = r));
  const open = s.db.transaction(async (tx) => {
    await s.db.notifications!.notify(tx, 'things_changed', 'committed');
    await gate;
  });
  assert.equal(await nextOn(seen, 0, 300), 'none', 'nothing arrives while the transaction is open');
  letGo();
  await open;
  assert.equal(await nextOn(seen, 0, 5_000), 'committed');

  await assert.rejects(
    s.db.transaction(async (tx) => {
      await s.db.notifications!.notify(tx, 'things_changed', 'rolled back');
      throw new Error('undo');
    }),
    /undo/,
  );
  assert.equal(await nextOn(seen, 1, 300), 'none', 'a rolled-back NOTIFY is never sent');

  s.server.restart();
  assert.equal(await nextOn(seen, 1, 15_000), undefined, 'listeners are told to look again once the listening connection is back');
  await s.db.notifications!.notify(s.db, 'things_changed', 'after').catch(() => s.db.notifications!.notify(s.db, 'things_changed', 'after'));
  assert.equal(await nextOn(seen, 2, 5_000), 'after');
});
