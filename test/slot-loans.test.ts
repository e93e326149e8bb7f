/**
 * Slots lent between serving processes (src/webhooks/slot-loans.ts, src/process/slot-loans.ts):
 * the supervisor's table and each process's side, wired by message queues that deliver in order
 * per channel but interleave the channels at random, with processes that die and are replaced.
 * What must hold at every step: the slots the live processes may use add up to no more than the
 * limit; and once the messages settle, to the limit exactly (none lost), whoever holds them.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createSupervisorLoans, MAX_POOLS_ON_LOAN } from '../src/process/slot-loans.ts';
import { createSlots, type ServingProcess } from '../src/process/slots.ts';
import type { ToServing, ToSupervisor } from '../src/process/messages.ts';
import { BUSY_WINDOW_MS, loopBusy } from '../src/lib/loop-busy.ts';
import { ALL, createSlotLoans, type LoansLink, type SlotLoans } from '../src/webhooks/slot-loans.ts';

/** A seeded generator, so a failure names the seed that shows it. */
function random(seed: number) {
  let s = seed >>> 0 || 1;
  return () => {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    return (s >>> 0) / 2 ** 32;
  };
}

const POOL = 'http://127.0.0.1:9';

interface Proc {
  alive: boolean;
  /** Messages on their way to it, and from it, in order. */
  inbox: ToServing[];
  outbox: ToSupervisor[];
  deliver?: (msg: ToServing) => void;
  loans?: SlotLoans;
  share: number;
  /** Slots it uses now (never more than it holds). */
  used: number;
}

async function simulate(seed: number, steps: number) {
  const rnd = random(seed);
  const limit = 8;
  const shares = [4, 4];
  const slots = createSlots(2);
  const procs: Proc[] = [];
  const sup = createSupervisorLoans(slots);

  async function start(index: number) {
    const p: Proc = { alive: true, inbox: [], outbox: [], share: shares[index], used: 0 };
    procs[index] = p;
    slots[index].serving = { isConnected: () => p.alive, send: (m: ToServing) => void p.inbox.push(m) } as unknown as ServingProcess;
    slots[index].ready = true;
    const listeners: { ask?: (pool: string) => void; grant?: (pool: string, n: number) => void; held?: (h: Record<string, number>) => void } = {};
    p.deliver = (m) => {
      if (m.t === 'slots-ask') listeners.ask?.(m.pool);
      if (m.t === 'slots-grant') listeners.grant?.(m.pool, m.n);
      if (m.t === 'slots-held') listeners.held?.(m.held);
    };
    const link: LoansLink = {
      held: (fn) => {
        listeners.held = fn;
        p.outbox.push({ t: 'slots-held' });
      },
      want: (pool) => p.outbox.push({ t: 'slots-want', pool }),
      lent: (pool, n) => p.outbox.push({ t: 'slots-lent', pool, n }),
      returned: (pool, n) => p.outbox.push({ t: 'slots-return', pool, n }),
      onAsk: (fn) => (listeners.ask = fn),
      onGrant: (fn) => (listeners.grant = fn),
    };
    let now = 0;
    const made = createSlotLoans(link, { spare: () => holds(p) - p.used, granted: () => {}, clock: () => (now += 100), busy: () => false });
    // Its question goes out now; the answer comes in a later step, like any message.
    void made.then((l) => (p.loans = l));
  }
  /** The supervisor hears a message from the process in slot `index`. */
  const hear = (index: number, msg: ToSupervisor) => {
    if (msg.t === 'slots-held') slots[index].serving!.send({ t: 'slots-held', held: sup.heldBy(index) });
    if (msg.t === 'slots-want') sup.want(slots[index], msg.pool);
    if (msg.t === 'slots-lent') sup.lent(slots[index], msg.pool, msg.n);
    if (msg.t === 'slots-return') sup.returned(slots[index], msg.pool, msg.n);
  };
  /** What a process may use: nothing until it knows what its slot holds. */
  const holds = (p: Proc) => (p.alive && p.loans ? Math.max(0, p.share + p.loans.held(POOL)) : 0);

  const step = async () => {
    const r = rnd();
    const p = procs[Math.floor(rnd() * procs.length)];
    if (r < 0.3 && p.inbox.length) p.deliver!(p.inbox.shift()!);
    else if (r < 0.6 && p.outbox.length) {
      const msg = p.outbox.shift()!;
      const index = procs.indexOf(p);
      // The supervisor's guard: a process no longer in its slot is not heard.
      if (slots[index].serving && p.alive) {
        hear(index, msg);
      }
    } else if (r < 0.65 && p.loans) p.loans.giveBackUnused();
    else if (r < 0.8 && p.loans) {
      // Work comes and goes: use some of what it holds, and want more when all of it is in use.
      p.used = Math.floor(rnd() * (holds(p) + 1));
      if (p.used === holds(p)) p.loans.want(POOL);
    } else if (r < 0.83 && p.alive) {
      // It dies with whatever was on its way to or from it; the supervisor hears of its exit.
      const index = procs.indexOf(p);
      p.alive = false;
      slots[index].serving = null;
      slots[index].ready = false;
      sup.exited(slots[index]);
    } else if (r < 0.88 && !p.alive) await start(procs.indexOf(p)); // its replacement, some steps later

    await new Promise((r) => setImmediate(r)); // the answer to held() resolves
    const inUse = procs.filter((q) => q.alive).reduce((n, q) => n + holds(q), 0);
    assert.ok(inUse <= limit, `seed ${seed}: ${inUse} slots usable at once, limit ${limit}`);
    return inUse;
  };

  /** Every message delivered, every process answered. */
  const settle = async () => {
    await new Promise((r) => setTimeout(r, 5)); // a dead process's borrowed slots come back (a hold of 0)
    for (const [index, p] of procs.entries()) if (!p.alive) await start(index);
    for (let round = 0; round < 50; round++) {
      for (const [index, p] of procs.entries()) {
        while (p.outbox.length) {
          const msg = p.outbox.shift()!;
          hear(index, msg);
        }
        while (p.inbox.length) p.deliver!(p.inbox.shift()!);
      }
      await new Promise((r) => setImmediate(r));
    }
  };
  await start(0);
  await start(1);
  for (let i = 0; i < steps; i++) await step();
  await settle();
  const total = procs.reduce((n, q) => n + holds(q), 0);
  return { total, moved: sup.moved(), procs, settle };
}

test('slots lent between serving processes: never more usable at once than the limit, through random interleavings and deaths; none lost once the messages settle', async () => {
  let moved = 0;
  for (let seed = 1; seed <= 60; seed++) {
    const r = await simulate(seed, 400);
    assert.equal(r.total, 8, `seed ${seed}: the processes hold ${r.total} of 8 once settled`);
    moved += r.moved;
  }
  assert.ok(moved > 100, `slots were lent in the runs (${moved} moved): the loans were exercised, not idle`);
});

test('a process that wants slots gets what the one beside it does not use, and none of what it does', async () => {
  const r = await simulate(7, 0);
  const [a, b] = r.procs;
  b.used = 1; // one of its four in use
  a.used = 4;
  a.loans!.want(POOL);
  await r.settle(); // want -> supervisor -> ask -> b lends its 3 spare -> supervisor -> grant -> a
  assert.equal(a.loans!.held(POOL), 3);
  assert.equal(b.loans!.held(POOL), -3);
  assert.equal(a.loans!.borrowed(), 3);
  assert.equal(b.loans!.borrowed(), 0);
});

test('the supervisor takes no malformed loan, and no new pool past its bound', () => {
  const slots = createSlots(2);
  const sent: ToServing[][] = [[], []];
  for (const s of slots) {
    s.serving = { isConnected: () => true, send: (m: ToServing) => void sent[s.index].push(m) } as unknown as ServingProcess;
    s.ready = true;
  }
  const sup = createSupervisorLoans(slots);
  for (const n of [0, -1, 1.5, '2', 1e9]) sup.lent(slots[1], POOL, n);
  sup.lent(slots[1], 42, 1);
  sup.lent(slots[1], 'x'.repeat(5000), 1);
  assert.equal(sup.moved(), 0);
  assert.deepEqual(sup.heldBy(0), {});
  // Pools up to the bound can be lent; past it a loan is handed straight back to its lender.
  for (let i = 0; i < MAX_POOLS_ON_LOAN; i++) {
    sup.want(slots[0], `http://h${i}`);
    sup.lent(slots[1], `http://h${i}`, 1);
  }
  assert.equal(Object.keys(sup.heldBy(0)).length, MAX_POOLS_ON_LOAN);
  sent[1].length = 0;
  sup.want(slots[0], 'http://one-more');
  assert.equal(sent[1].length, 0, 'no ask for a pool past the bound');
  sup.lent(slots[1], 'http://one-more', 2);
  assert.deepEqual(sent[1].at(-1), { t: 'slots-grant', pool: 'http://one-more', n: 2 }, 'its own slots back');
  assert.equal(sup.heldBy(1)['http://one-more'], undefined);
});

test('a serving process that exits gives back what it borrowed once its exchanges can no longer be running (the hold), to the slots owed the most; nobody uses them meanwhile; what it lent stays lent', async () => {
  const slots = createSlots(3);
  const sent: ToServing[][] = [[], [], []];
  for (const s of slots) {
    s.serving = { isConnected: () => true, send: (m: ToServing) => void sent[s.index].push(m) } as unknown as ServingProcess;
    s.ready = true;
  }
  const sup = createSupervisorLoans(slots, () => 50);
  // Slot 0 borrows 3 of POOL (2 from slot 1, 1 from slot 2), and lends 1 of another pool to slot 2.
  sup.want(slots[0], POOL);
  sup.lent(slots[1], POOL, 2);
  sup.lent(slots[2], POOL, 1);
  sup.want(slots[2], 'http://other');
  sup.lent(slots[0], 'http://other', 1);
  assert.deepEqual(sup.heldBy(0), { [POOL]: 3, 'http://other': -1 });
  for (const s of sent) s.length = 0;
  slots[0].serving = null; // it died
  sup.exited(slots[0]);
  assert.deepEqual(sup.heldBy(0), { 'http://other': -1 }, 'its replacement starts with its own share, short of what slot 2 still uses');
  assert.deepEqual(sent, [[], [], []], 'its borrowed slots are held back: its requests may still be running at the endpoint');
  assert.deepEqual(sup.heldBy(1), { [POOL]: -2 });
  await new Promise((r) => setTimeout(r, 80));
  assert.deepEqual(sent[1], [{ t: 'slots-grant', pool: POOL, n: 2 }]);
  assert.deepEqual(sent[2], [{ t: 'slots-grant', pool: POOL, n: 1 }]);
  assert.deepEqual(sup.heldBy(1), {});
  assert.deepEqual(sup.heldBy(2), { 'http://other': 1 });
});

test('a process whose event loop ran 80 % of the last half second or more is busy, and idle again once it waits', async () => {
  const busy = loopBusy();
  const spinUntil = performance.now() + BUSY_WINDOW_MS + 100;
  while (performance.now() < spinUntil); // the loop held
  assert.equal(busy(), true);
  await new Promise((r) => setTimeout(r, BUSY_WINDOW_MS + 100)); // the loop idle
  assert.equal(busy(), false);
});

test('a replacement of a process that died with exchanges in flight holds its share back for the wait the supervisor names: it lends nothing meanwhile, then wakes its sender', async () => {
  let ask: ((pool: string) => void) | undefined;
  const lent: Array<[string, number]> = [];
  const link: LoansLink = {
    held: (fn) => setImmediate(() => fn({}, 200)),
    want: () => {},
    lent: (pool, n) => void lent.push([pool, n]),
    returned: () => {},
    onAsk: (fn) => (ask = fn),
    onGrant: () => {},
  };
  const granted: string[] = [];
  const loans = await createSlotLoans(link, { spare: () => 2, granted: (pool) => void granted.push(pool), busy: () => false });
  assert.equal(loans.holdingBack(), true, 'holding back at once');
  ask!(POOL);
  assert.deepEqual(lent, [], 'nothing lent while its predecessor may still have requests running');
  await new Promise((r) => setTimeout(r, 300));
  assert.equal(loans.holdingBack(), false);
  assert.deepEqual(granted, [ALL], 'its sender is woken once its share is its own again');
  ask!(POOL);
  assert.deepEqual(lent, [[POOL, 2]], 'then it lends as any process does');
  loans.stop();
  // A slot whose predecessor exited cleanly (no wait named) holds nothing back.
  const plain = await createSlotLoans({ ...link, held: (fn) => setImmediate(() => fn({})) }, { spare: () => 0, granted: () => {}, busy: () => false });
  assert.equal(plain.holdingBack(), false);
  plain.stop();
});
