/**
 * The shared per-turn batcher and coalescer (src/lib/batch.ts) and the observer set
 * (src/lib/observers.ts) the group commits, IPC writes and notices are built on.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { atMostEvery, batchPerTurn, oncePerTurn } from '../src/lib/batch.ts';
import { createObservers } from '../src/lib/observers.ts';
import type { Logger } from '../src/log/index.ts';

const turn = () => new Promise<void>((r) => setImmediate(r));

test('oncePerTurn: many calls in a turn run the function once, in the next turn; a call from it queues another', async () => {
  let runs = 0;
  const soon = oncePerTurn(() => {
    runs++;
    if (runs === 1) soon();
  });
  soon();
  soon();
  soon();
  assert.equal(runs, 0);
  await turn();
  assert.equal(runs, 1);
  await turn();
  assert.equal(runs, 2);
});

test('batchPerTurn: items pushed in one turn are written together, once, in the next', async () => {
  const writes: Array<[number[], boolean]> = [];
  const b = batchPerTurn<number>((batch, scheduled) => writes.push([batch, scheduled]));
  b.push(1);
  b.push(2);
  b.push(3);
  assert.equal(b.size, 3);
  assert.deepEqual(writes, []);
  await turn();
  assert.deepEqual(writes, [[[1, 2, 3], true]]);
  await turn();
  assert.equal(writes.length, 1, 'nothing waiting: no empty write');
});

test('batchPerTurn: flush() writes now (not scheduled); items added without asking wait for soon/within/flush', async () => {
  const writes: Array<[number[], boolean]> = [];
  const b = batchPerTurn<number>((batch, scheduled) => writes.push([batch, scheduled]));
  b.add(1);
  await turn();
  assert.deepEqual(writes, []);
  b.flush();
  assert.deepEqual(writes, [[[1], false]]);
  b.add(2);
  // Long enough that a process held up between these lines (a loaded machine) still reaches the
  // next turn before the timer (5 ms did not, once, in CI).
  b.within(300);
  await turn();
  assert.equal(writes.length, 1, 'within: not this turn');
  await new Promise((r) => setTimeout(r, 350));
  assert.deepEqual(writes[1], [[2], true]);
  b.add(3);
  b.within(1_000);
  b.soon();
  await turn();
  assert.deepEqual(writes[2], [[3], true], 'a flush asked this turn goes before the timer');
});

test('batchPerTurn: take() splits what waits; the rest is written the turn after, in order', async () => {
  const writes: number[][] = [];
  const b = batchPerTurn<number>((batch) => writes.push(batch), { take: (w) => Math.min(w.length, 2) });
  for (const n of [1, 2, 3, 4, 5]) b.push(n);
  await turn();
  assert.deepEqual(writes, [[1, 2]]);
  await turn();
  await turn();
  assert.deepEqual(writes, [[1, 2], [3, 4], [5]]);
  const one = batchPerTurn<number>((batch) => writes.push(batch), { take: () => 0 });
  one.push(9);
  await turn();
  assert.deepEqual(writes.at(-1), [9], 'at least one item per write');
});

test('batchPerTurn: putBack waits a turn ahead of newer items; with ms, no turn flushes before it', async () => {
  const writes: number[][] = [];
  let refuse = 1;
  const b = batchPerTurn<number>((batch) => {
    if (refuse-- > 0) return b.putBack(batch);
    writes.push(batch);
  });
  b.push(1);
  await turn();
  b.push(2);
  await turn();
  assert.deepEqual(writes, [[1, 2]], 'the refused batch went again with what arrived meanwhile, first');

  const held: number[][] = [];
  let failing = true;
  const h = batchPerTurn<number>((batch) => {
    if (failing) return h.putBack(batch, 30);
    held.push(batch);
  });
  h.push(1);
  await turn();
  failing = false;
  h.push(2);
  await turn();
  await turn();
  assert.deepEqual(held, [], 'held until the timer');
  await new Promise((r) => setTimeout(r, 50));
  assert.deepEqual(held, [[1, 2]]);
});

test('batchPerTurn: hold keeps a batch ahead of newer items and asks no turn until soon(): a write in flight is waited for, not polled', async () => {
  const writes: number[][] = [];
  let inFlight: Promise<void> | undefined;
  let release!: () => void;
  let calls = 0;
  const b = batchPerTurn<number>((batch) => {
    calls++;
    if (inFlight) return b.hold(batch);
    inFlight = new Promise<void>((r) => (release = r)).then(() => {
      inFlight = undefined;
      if (b.size) b.soon();
    });
    writes.push(batch);
  });
  b.push(1);
  await turn();
  b.push(2);
  await turn();
  b.push(3);
  for (let i = 0; i < 5; i++) await turn();
  assert.equal(calls, 3, 'each push asked one write; the held ones were not tried again turn after turn');
  assert.deepEqual(writes, [[1]]);
  assert.equal(b.size, 2);
  release();
  await turn();
  await turn();
  assert.deepEqual(writes, [[1], [2, 3]], 'after the write in flight, what was held goes first, with what arrived meanwhile');
});

test('batchPerTurn: a write that pushes during itself gets a turn of its own', async () => {
  const writes: number[][] = [];
  const b = batchPerTurn<number>((batch) => {
    writes.push(batch);
    if (batch[0] === 1) b.push(2);
  });
  b.push(1);
  await turn();
  await turn();
  assert.deepEqual(writes, [[1], [2]]);
});

test('batchPerTurn: the turn can be a microtask', async () => {
  const writes: number[][] = [];
  const b = batchPerTurn<number>((batch) => writes.push(batch), { turn: queueMicrotask });
  b.push(1);
  b.push(2);
  await Promise.resolve();
  assert.deepEqual(writes, [[1, 2]]);
});

test('atMostEvery: the first call runs at once, the calls within the window once at its end, a call after it at once; cancel drops the one waiting', async () => {
  let runs = 0;
  const a = atMostEvery(50, () => void runs++);
  a.call();
  assert.equal(runs, 1, 'at once');
  a.call();
  a.call();
  assert.equal(runs, 1, 'within the window: waits');
  await new Promise((r) => setTimeout(r, 80));
  assert.equal(runs, 2, 'once at the window end, for both calls');
  await new Promise((r) => setTimeout(r, 60));
  a.call();
  assert.equal(runs, 3, 'past the window: at once');
  a.call();
  a.cancel();
  await new Promise((r) => setTimeout(r, 80));
  assert.equal(runs, 3, 'cancelled: the waiting run never comes');
});

test('observers: every listener hears; one that throws is logged with the fields, the others still hear; removal', () => {
  const logged: Array<[string, Record<string, unknown> | undefined]> = [];
  const log = { error: (m: string, f?: Record<string, unknown>) => logged.push([m, f]) } as unknown as Logger;
  const o = createObservers<[string, number]>(log, 'a listener failed', (name) => ({ integration: name }));
  const heard: string[] = [];
  o.add(() => {
    throw new Error('boom');
  });
  const off = o.add((name, n) => heard.push(`${name}:${n}`));
  assert.equal(o.size, 2);
  o.notify('hello', 1);
  assert.deepEqual(heard, ['hello:1']);
  assert.equal(logged.length, 1);
  assert.equal(logged[0][0], 'a listener failed');
  assert.equal(logged[0][1]?.integration, 'hello');
  assert.equal((logged[0][1]!.error as Error).message, 'boom');
  off();
  o.notify('again', 2);
  assert.deepEqual(heard, ['hello:1']);
  assert.equal(o.size, 1);
});
