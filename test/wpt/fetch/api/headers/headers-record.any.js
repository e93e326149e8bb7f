// Record initialisers: own enumerable string keys in order, getters invoked, symbols refused.
test(() => {
  const h = new Headers({ b: '1', a: '2' });
  assert_array_equals([...h.keys()], ['a', 'b']);
}, 'record keys end up sorted when iterating');
test(() => {
  const record = {};
  Object.defineProperty(record, 'hidden', { value: 'x', enumerable: false });
  record.shown = 'y';
  const h = new Headers(record);
  assert_false(h.has('hidden'));
  assert_equals(h.get('shown'), 'y');
}, 'non-enumerable keys are skipped');
test(() => {
  let calls = 0;
  const record = {
    get a() {
      calls++;
      return 'v';
    },
  };
  assert_equals(new Headers(record).get('a'), 'v');
  assert_equals(calls, 1);
}, 'getters are called once');
test(() => {
  const proto = { inherited: 'x' };
  const record = Object.create(proto);
  record.own = 'y';
  const h = new Headers(record);
  assert_false(h.has('inherited'));
  assert_true(h.has('own'));
}, 'inherited keys are skipped');
test(() => {
  const record = { a: 'b', [Symbol('s')]: 'c' };
  assert_throws_js(TypeError, () => new Headers(record));
}, 'a symbol key throws');
test(() => {
  const p = new Proxy({ a: 'b' }, {});
  assert_equals(new Headers(p).get('a'), 'b');
}, 'a proxy works as a record');
