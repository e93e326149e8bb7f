import { test } from 'node:test';
import assert from 'node:assert/strict';
import { BoundedMap } from '../src/lib/bounded-map.ts';

test('a bounded map keeps at least its size of the latest entries, and forgets the older ones', () => {
  const m = new BoundedMap<number, string>(3);
  for (let i = 0; i < 10; i++) m.set(i, `v${i}`);
  // The three latest are always there; nothing older than the last six is.
  for (let i = 7; i < 10; i++) assert.equal(m.get(i), `v${i}`, `kept ${i}`);
  for (let i = 0; i < 4; i++) assert.equal(m.has(i), false, `forgotten ${i}`);
  // Setting an entry again makes it latest; delete and clear reach both generations.
  m.set(7, 'again');
  for (let i = 10; i < 12; i++) m.set(i, `v${i}`);
  assert.equal(m.get(7), 'again');
  m.delete(7);
  assert.equal(m.get(7), undefined);
  m.clear();
  assert.equal(m.has(11), false);
});
