// structuredClone for the types a server script passes around.
test(() => {
  const o = { a: 1, b: 'x', c: [1, { d: true }], e: null, f: undefined, g: -0, h: NaN, big: 10n };
  const c = structuredClone(o);
  assert_not_equals(c, o);
  assert_not_equals(c.c, o.c);
  assert_equals(JSON.stringify({ ...c, big: 0 }), JSON.stringify({ ...o, big: 0 }));
  assert_true('f' in c);
  assert_equals(1 / c.g, -Infinity);
  assert_true(Number.isNaN(c.h));
  assert_equals(c.big, 10n);
}, 'plain values');
test(() => {
  const d = new Date(1234567890);
  assert_equals(structuredClone(d).getTime(), 1234567890);
  const r = structuredClone(/a+b/gi);
  assert_equals(r.source, 'a+b');
  assert_equals(r.flags, 'gi');
  const m = structuredClone(new Map([[1, { x: 2 }]]));
  assert_equals(m.get(1).x, 2);
  const s = structuredClone(new Set([1, 2]));
  assert_true(s.has(2));
  const bytes = structuredClone(new Uint8Array([1, 2, 3]));
  assert_array_equals(bytes, [1, 2, 3]);
  assert_class_string(bytes, 'Uint8Array');
  const e = structuredClone(new RangeError('bad'));
  assert_class_string(e, 'Error');
  assert_true(e instanceof RangeError);
  assert_equals(e.message, 'bad');
}, 'Date, RegExp, Map, Set, typed arrays and errors');
test(() => {
  const o = { name: 'loop' };
  o.self = o;
  o.list = [o];
  const c = structuredClone(o);
  assert_equals(c.self, c);
  assert_equals(c.list[0], c);
}, 'cycles are kept');
test(() => {
  assert_throws_dom('DataCloneError', () => structuredClone(() => 1));
  assert_throws_dom('DataCloneError', () => structuredClone({ f() {} }));
  assert_throws_dom('DataCloneError', () => structuredClone(Symbol('s')));
  assert_throws_js(TypeError, () => structuredClone());
}, 'functions and symbols throw DataCloneError');
