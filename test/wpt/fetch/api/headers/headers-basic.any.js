// Headers construction, methods and iteration (WPT fetch/api/headers/headers-basic style).
test(() => {
  new Headers();
  new Headers(undefined);
  new Headers({});
  assert_throws_js(TypeError, () => new Headers(null));
  assert_throws_js(TypeError, () => new Headers(1));
}, 'create from nothing, undefined and {}; null and 1 throw');
const dict = { name1: 'value1', name2: 'value2', name3: 'value3', name4: null, name5: undefined, name6: 1, 'Content-Type': 'value4' };
const seq = Object.entries(dict);
test(() => {
  const h = new Headers(seq);
  for (const [k, v] of seq) assert_equals(h.get(k), String(v));
  assert_equals(h.get('length'), null, 'init is a sequence, not a dictionary');
}, 'create from a sequence');
test(() => {
  const h = new Headers(dict);
  for (const [k, v] of seq) assert_equals(h.get(k), String(v));
  const h2 = new Headers(h);
  for (const [k, v] of seq) assert_equals(h2.get(k), String(v));
}, 'create from a record and from another Headers');
test(() => {
  const h = new Headers();
  h[Symbol.iterator] = function* () {
    yield ['test', 'test'];
  };
  assert_equals(new Headers(h).get('test'), 'test');
}, 'create from a Headers with a custom iterator');
test(() => {
  const h = new Headers();
  for (const [k, v] of seq) {
    h.append(k, v);
    assert_equals(h.get(k), String(v));
  }
  const s = new Headers();
  for (const [k, v] of seq) {
    s.set(k, v);
    assert_equals(s.get(k), String(v));
  }
}, 'append and set');
test(() => {
  const h = new Headers(dict);
  for (const k of Object.keys(dict)) assert_true(h.has(k));
  assert_false(h.has('nameNotInHeaders'));
  for (const k of Object.keys(dict)) {
    h.delete(k);
    assert_false(h.has(k));
  }
  assert_equals(h.get('nameNotInHeaders'), null);
}, 'has, delete and get');
const entries = { name1: 'value1', Name2: 'value2', name: 'value3', 'content-Type': 'value4', 'Content-Typ': 'value5', 'Content-Types': 'value6' };
const sortedKeys = Object.keys(entries).map((k) => k.toLowerCase()).sort();
const byLower = Object.fromEntries(Object.entries(entries).map(([k, v]) => [k.toLowerCase(), v]));
test(() => {
  const h = new Headers(entries);
  const it = h.keys();
  const proto = Object.getPrototypeOf(it);
  assert_equals(Object.getPrototypeOf(proto), Object.getPrototypeOf(Object.getPrototypeOf([][Symbol.iterator]())));
  for (const k of sortedKeys) {
    const e = it.next();
    assert_false(e.done);
    assert_equals(e.value, k);
  }
  assert_true(it.next().done);
  assert_true(it.next().done);
}, 'keys() are sorted and lower-cased; the iterator has %IteratorPrototype%');
test(() => {
  const h = new Headers(entries);
  assert_array_equals([...h.values()], sortedKeys.map((k) => byLower[k]));
  assert_array_equals([...h.entries()].map(([k, v]) => `${k}=${v}`), sortedKeys.map((k) => `${k}=${byLower[k]}`));
  assert_array_equals([...h].map(([k]) => k), sortedKeys);
  const seen = [];
  h.forEach((v, k, container) => {
    assert_equals(container, h);
    seen.push(k);
  });
  assert_array_equals(seen, sortedKeys);
}, 'values(), entries(), @@iterator and forEach');
test(() => {
  const h = new Headers({ foo: '2', baz: '1', BAR: '0' });
  const keys = [];
  for (const [k] of h) {
    keys.push(k);
    h.delete('foo');
  }
  assert_array_equals(keys, ['bar', 'baz']);
}, 'iteration skips elements removed while iterating');
test(() => {
  const h = new Headers({ foo: '2', baz: '1', BAR: '0', quux: '3' });
  const keys = [];
  for (const [k] of h) {
    keys.push(k);
    if (k === 'baz') h.append('X-yZ', '4');
  }
  assert_array_equals(keys, ['bar', 'baz', 'foo', 'quux', 'x-yz']);
}, 'a pair appended during iteration is reached');
test(() => {
  const h = new Headers({ foo: '2', baz: '1', BAR: '0', quux: '3' });
  const keys = [];
  for (const [k] of h) {
    keys.push(k);
    if (k === 'baz') h.append('abc', '-1');
  }
  assert_array_equals(keys, ['bar', 'baz', 'baz', 'foo', 'quux']);
}, 'prepending a pair before the current position makes the next step repeat');
test(() => assert_class_string(new Headers(), 'Headers'), 'class string');
