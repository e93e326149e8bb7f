/**
 * Slots lent between serving processes, with the real parts: two webhooks services
 * (createWebhooks) over one store, the supervisor's real table, and an in-memory link in between
 * (each message a turn later, in order per channel; a process no longer in its slot is not
 * heard), a receiver counting requests open at once. Processes replaced on an edited config, and
 * a borrower that dies: never more in flight than the limits, and no slot lost.
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { connectStore } from '../src/store/index.ts';
import { allMigrations } from '../src/server/migrations.ts';
import { useNodeId } from '../src/store/lease-owner.ts';
import { memoryLogger } from '../src/log/index.ts';
import { createWebhooks } from '../src/webhooks/index.ts';
import { createSupervisorLoans } from '../src/process/slot-loans.ts';
import { createSlots, type ServingProcess } from '../src/process/slots.ts';
import type { ToServing, ToSupervisor } from '../src/process/messages.ts';
import type { LoansLink } from '../src/webhooks/slot-loans.ts';
import { testConfig, tmpDir, waitFor } from './helpers/index.ts';
import { scriptedReceiver } from './webhooks-support.ts';

async function node(t: TestContext, holdMs: number) {
  const dir = tmpDir(t);
  const store = await connectStore(dir, { migrations: allMigrations() });
  t.after(() => store.close());
  useNodeId(dir);
  let open = 0;
  let maxOpen = 0;
  const rx = await scriptedReceiver(t, async () => {
    open++;
    maxOpen = Math.max(maxOpen, open);
    await new Promise((r) => setTimeout(r, holdMs));
    open--;
    return 200;
  });
  const slots = createSlots(2);
  // A dead process's borrowed slots are held back this long (the attempt time-out in the product).
  const sup = createSupervisorLoans(slots, () => 300);
  const services: Array<Awaited<ReturnType<typeof createWebhooks>> | undefined> = [];
  const alive: boolean[] = [];
  let n = 0;

  async function start(index: number, over: Record<string, unknown>) {
    const listeners: { ask: Array<(p: string) => void>; grant: Array<(p: string, n: number) => void>; held: Array<(h: Record<string, number>) => void> } = {
      ask: [],
      grant: [],
      held: [],
    };
    const me = { alive: true };
    const w = {
      isConnected: () => me.alive,
      send: (m: ToServing) =>
        setImmediate(() => {
          if (!me.alive) return;
          if (m.t === 'slots-ask') for (const f of listeners.ask) f(m.pool);
          if (m.t === 'slots-grant') for (const f of listeners.grant) f(m.pool, m.n);
          if (m.t === 'slots-held') for (const f of listeners.held.splice(0)) f(m.held);
        }),
    } as unknown as ServingProcess;
    slots[index].serving = w;
    slots[index].ready = true;
    const toSup = (msg: ToSupervisor) =>
      setImmediate(() => {
        if (slots[index].serving !== w) return;
        if (msg.t === 'slots-held') w.send({ t: 'slots-held', held: sup.heldBy(index) });
        if (msg.t === 'slots-want') sup.want(slots[index], msg.pool);
        if (msg.t === 'slots-lent') sup.lent(slots[index], msg.pool, msg.n);
        if (msg.t === 'slots-return') sup.returned(slots[index], msg.pool, msg.n);
      });
    const loans: LoansLink = {
      held(fn) {
        listeners.held.push(fn);
        toSup({ t: 'slots-held' });
      },
      want: (pool) => toSup({ t: 'slots-want', pool }),
      lent: (pool, n) => toSup({ t: 'slots-lent', pool, n }),
      returned: (pool, n) => toSup({ t: 'slots-return', pool, n }),
      onAsk: (fn) => void listeners.ask.push(fn),
      onGrant: (fn) => void listeners.grant.push(fn),
    };
    const webhooks = { ...testConfig(t).webhooks, ...over };
    const service = await createWebhooks({
      database: store.database,
      log: memoryLogger(),
      config: () => webhooks,
      subscriptions: () => ({ forEventType: () => [{ installationId: 'inst_1', url: rx.url }] }),
      processes: { index, count: 2, onDue() {}, announceDue() {}, loans },
    });
    if (index === 0 && !services.length) await store.database.transaction((tx) => service.webhooks.createSecret(tx, 'inst_1'));
    service.start();
    services[index] = service;
    alive[index] = true;
    return {
      service,
      kill: async () => {
        me.alive = false;
        slots[index].serving = null;
        slots[index].ready = false;
        sup.exited(slots[index]); // as the supervisor does when a serving process exits
        await service.stop(0);
      },
    };
  }
  const send = (index: number, count: number) =>
    store.database.transaction((tx) =>
      services[index]!.deliveries.enqueueEvents(
        tx,
        Array.from({ length: count }, () => ({
          event: { eventId: `evt_${++n}`, type: 'site_view' },
          subscriptions: [{ installationId: 'inst_1', url: rx.url }],
        })),
      ),
    );
  return { start, send, sup, rx, maxOpen: () => maxOpen, open: () => open, resetMax: () => (maxOpen = open) };
}

test('a replacement that reads an edited limit still holds what its predecessor lent: never more in flight than the higher limit', {
  timeout: 60_000,
}, async (t) => {
  const nd = await node(t, 3_000);
  const a = await nd.start(0, { per_endpoint_concurrency: 4 });
  const b = await nd.start(1, { per_endpoint_concurrency: 4 });
  await new Promise((r) => setTimeout(r, 2_500)); // A idle for its peak window
  await nd.send(1, 8); // B takes a batch: 2 of its own, borrows A's 2
  await waitFor(() => nd.open() === 4, 10_000);
  assert.equal(b.service.deliveries.slotsBorrowed(), 2, 'B borrowed the 2 slots of the idle A');
  await a.kill();
  // The config file was edited to 6 before A crashed: its replacement reads it.
  await nd.start(0, { per_endpoint_concurrency: 6 });
  nd.resetMax();
  await nd.send(0, 8);
  await new Promise((r) => setTimeout(r, 1_000));
  assert.ok(nd.maxOpen() <= 6, `${nd.maxOpen()} in flight at once: more than either limit (4 then 6)`);
});

test('a borrower that dies gives its borrowed slots back after the hold, whatever limit its replacement reads', { timeout: 60_000 }, async (t) => {
  const nd = await node(t, 1_500);
  const a = await nd.start(0, { per_endpoint_concurrency: 4 });
  const b = await nd.start(1, { per_endpoint_concurrency: 4 });
  await new Promise((r) => setTimeout(r, 2_500));
  await nd.send(0, 8); // A borrows B's 2
  await waitFor(() => nd.open() === 4, 10_000);
  await a.kill();
  assert.deepEqual(nd.sup.heldBy(1), { [new URL(nd.rx.url).origin]: -2 }, "A's requests may still be running: B's 2 are not back yet");
  await waitFor(() => Object.keys(nd.sup.heldBy(1)).length === 0, 2_000).catch(() => {});
  assert.deepEqual(nd.sup.heldBy(1), {}, 'B has its 2 back after the hold');
  await nd.start(0, { per_endpoint_concurrency: 6 });
  assert.deepEqual(nd.sup.heldBy(0), {}, 'the replacement starts with its own share');
  void b;
});

test('a lender whose borrower died sends with its own slot before any replacement is up', { timeout: 60_000 }, async (t) => {
  const nd = await node(t, 1_500);
  const a = await nd.start(0, { per_endpoint_concurrency: 2 });
  await nd.start(1, { per_endpoint_concurrency: 2 });
  await new Promise((r) => setTimeout(r, 2_500));
  await nd.send(0, 4); // A borrows B's 1
  await waitFor(() => nd.open() === 2, 10_000);
  await a.kill(); // not replaced yet (start-up, or crash-loop back-off up to 10 s)
  const before = nd.rx.requests.length;
  await nd.send(1, 2);
  await waitFor(() => nd.rx.requests.length - before > 0, 3_000).catch(() => {});
  assert.ok(nd.rx.requests.length - before > 0, 'B delivered nothing: its only slot is on loan to a dead slot');
});
