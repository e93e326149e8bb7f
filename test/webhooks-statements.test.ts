/**
 * What one delivery costs the store, held to a budget: one event with one subscriber, its attempt
 * started at commit and answered 200, recorded in one commit of two statements (the delivery's
 * state, the attempt's row, and on PostgreSQL the feed's order lock), with no read of the store to
 * arm the scheduler's timer, however many events go by. Runs on PostgreSQL too
 * (SWITCHYARD_TEST_PG_URL).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { connectStore } from '../src/store/index.ts';
import { allMigrations } from '../src/server/migrations.ts';
import { createWebhooks } from '../src/webhooks/service.ts';
import { memoryLogger } from '../src/log/index.ts';
import { freshPostgresDatabase, testConfig, tmpDir, waitFor } from './helpers/index.ts';
import { counting } from './helpers/counting.ts';
import { useNodeId } from '../src/store/lease-owner.ts';

test('a delivered event costs one commit and a fixed few statements after its ingest, and the scheduler asks the store nothing to arm its timer', async (t) => {
  const dir = tmpDir(t);
  const store = await connectStore(dir, { migrations: allMigrations(), url: process.env.SWITCHYARD_TEST_PG_URL ? freshPostgresDatabase(dir) : undefined });
  t.after(() => store.close());
  useNodeId(dir); // this process's lease owner (a server claims its node id first)
  let arrived = 0;
  const rx = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      arrived++;
      res.end('ok');
    });
  });
  await new Promise<void>((r) => rx.listen(0, '127.0.0.1', r));
  t.after(() => rx.close());
  const url = `http://127.0.0.1:${(rx.address() as AddressInfo).port}/hook`;

  const { n, database, reset } = counting(store.database);
  const config = testConfig(t).webhooks;
  const service = await createWebhooks({
    database,
    log: memoryLogger(),
    config: () => config,
    subscriptions: () => ({ forEventType: () => [{ installationId: 'inst_1', url }] }),
  });
  t.after(() => service.stop(0));
  await store.database.transaction((tx) => service.webhooks.createSecret(tx, 'inst_1'));
  service.start();

  let recorded = 0;
  service.deliveries.onAttempt(() => recorded++);
  const send = async (i: number) => {
    const event = { eventId: `evt_${i}`, type: 'site_view' };
    await store.database.transaction((tx) => service.deliveries.enqueueEvents(tx, [{ event, subscriptions: [{ installationId: 'inst_1', url }] }]));
  };
  await send(0); // the first one also reads the installation's signing secret into its cache
  await waitFor(() => recorded === 1);

  const EVENTS = 20;
  for (let i = 1; i <= EVENTS; i++) {
    await send(i);
    reset(); // from here: what the sender does for it
    await waitFor(() => recorded === i + 1);
    await new Promise((r) => setTimeout(r, 20)); // and anything it does after its record
    const budget = store.database.engine === 'postgres' ? 3 : 2;
    assert.equal(n.commits, 1, `event ${i}: one commit records its attempt (${n.sql.join(' | ')})`);
    assert.ok(
      n.statements <= budget,
      `event ${i}: at most ${budget} statements (the state, the attempt${budget > 2 ? ', the feed order lock' : ''}), got ${n.statements}: ${n.sql.join(' | ')}`,
    );
  }
  assert.equal(arrived, EVENTS + 1);
});
