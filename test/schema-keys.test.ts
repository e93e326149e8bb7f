import { test } from 'node:test';
import assert from 'node:assert/strict';
import { configSchema } from '../src/config/index.ts';
import { parseSets } from '../src/cli/sets.ts';
import * as s from '../src/schema/index.ts';

test('keys named like Object.prototype members are unknown keys to the schema, and kept as own keys of maps', () => {
  for (const key of ['constructor', 'toString', '__proto__']) {
    const r = s.validate(configSchema, JSON.parse(`{"server":{"${key}":1}}`));
    assert.equal(r.ok, false, key);
    if (!r.ok)
      assert.deepEqual(
        r.issues.map((i) => i.path.join('.')),
        [`server.${key}`],
      );
  }
  const map = s.record(s.number());
  const r = s.validate(map, JSON.parse('{"__proto__":1,"a":2}'));
  assert.ok(r.ok);
  if (r.ok) {
    assert.deepEqual(Object.keys(r.value), ['__proto__', 'a'], 'the key stays a key');
    assert.equal(Object.getPrototypeOf(r.value), Object.prototype);
  }
});

test('--set __proto__.x=1 makes an own key (the server refuses it), never a property of Object.prototype', () => {
  const out = parseSets(['__proto__.polluted=yes', 'constructor=1']);
  assert.equal(({} as any).polluted, undefined);
  assert.deepEqual(Object.keys(out), ['__proto__', 'constructor']);
  assert.equal(JSON.stringify(out), '{"__proto__":{"polluted":"yes"},"constructor":1}');
});
