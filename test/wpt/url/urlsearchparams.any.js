// URLSearchParams: constructor forms, mutation, sorting, serialisation, and its link to URL.
test(() => {
  assert_equals(new URLSearchParams().toString(), '');
  assert_equals(new URLSearchParams('').toString(), '');
  assert_equals(new URLSearchParams('a=b').toString(), 'a=b');
  assert_equals(new URLSearchParams('?a=b').toString(), 'a=b');
  assert_equals(new URLSearchParams('??a=b').toString(), '%3Fa=b');
}, 'constructor with a string (leading ? stripped once)');
test(() => {
  assert_equals(new URLSearchParams({ a: '1', b: '2' }).toString(), 'a=1&b=2');
  assert_equals(new URLSearchParams([['a', '1'], ['a', '2']]).toString(), 'a=1&a=2');
  assert_equals(new URLSearchParams(new URLSearchParams('x=y')).toString(), 'x=y');
  assert_throws_js(TypeError, () => new URLSearchParams([['a', 'b', 'c']]));
  assert_throws_js(TypeError, () => new URLSearchParams([['a']]));
}, 'constructor with records, sequences and another URLSearchParams');
test(() => {
  const p = new URLSearchParams({ '\uD835x': '1', xx: '2', '\uD83Dx': '3' });
  assert_array_equals([...p.keys()], ['\uFFFDx', 'xx'], 'record keys that become equal are one entry');
  assert_equals(p.get('\uFFFDx'), '3');
}, 'constructor converts lone surrogates in record keys to U+FFFD');
test(() => {
  const p = new URLSearchParams('a=b&c=d&a=e');
  assert_equals(p.get('a'), 'b');
  assert_array_equals(p.getAll('a'), ['b', 'e']);
  assert_equals(p.get('zz'), null);
  assert_true(p.has('c'));
  assert_true(p.has('a', 'e'));
  assert_false(p.has('a', 'zz'));
  p.append('a', 'f');
  assert_array_equals(p.getAll('a'), ['b', 'e', 'f']);
  p.set('a', 'g');
  assert_equals(p.toString(), 'a=g&c=d');
  p.delete('c');
  assert_equals(p.toString(), 'a=g');
  p.append('a', 'h');
  p.delete('a', 'g');
  assert_equals(p.toString(), 'a=h');
  assert_equals(p.size, 1);
}, 'get, getAll, has, append, set, delete (with and without value), size');
test(() => {
  const p = new URLSearchParams('z=b&a=b&z=a&a=a');
  p.sort();
  assert_equals(p.toString(), 'a=b&a=a&z=b&z=a');
  const q = new URLSearchParams('\uFFFD=x&\uFFFC&\uFFFD=a');
  q.sort();
  assert_array_equals([...q.keys()], ['\uFFFC', '\uFFFD', '\uFFFD']);
  const r = new URLSearchParams('ﬃ&🌈');
  r.sort();
  assert_array_equals([...r.keys()], ['🌈', 'ﬃ']);
}, 'sort() is stable and by code units');
test(() => {
  const p = new URLSearchParams();
  p.append('a', 'b c');
  p.append('d', '+&=%');
  p.append('e', 'é😀');
  p.append('f', "*-._~!'()");
  assert_equals(p.toString(), 'a=b+c&d=%2B%26%3D%25&e=%C3%A9%F0%9F%98%80&f=*-._%7E%21%27%28%29');
  assert_equals(new URLSearchParams('a=b+c%20d').get('a'), 'b c d');
}, 'serialisation percent-encodes per application/x-www-form-urlencoded');
test(() => {
  const url = new URL('https://example.com/?a=1');
  url.searchParams.append('b', '2 3');
  assert_equals(url.href, 'https://example.com/?a=1&b=2+3');
  url.search = '?c=4';
  assert_equals(url.searchParams.get('c'), '4');
  assert_equals(url.searchParams.get('a'), null);
  url.searchParams.delete('c');
  assert_equals(url.href, 'https://example.com/');
  assert_equals(url.search, '');
}, 'URL.searchParams stays in sync with URL.search');
test(() => {
  const p = new URLSearchParams('a=1&b=2');
  const seen = [];
  p.forEach((v, k, obj) => {
    seen.push(`${k}:${v}`);
    assert_equals(obj, p);
  });
  assert_array_equals(seen, ['a:1', 'b:2']);
  assert_array_equals([...p.entries()].flat(), ['a', '1', 'b', '2']);
  assert_array_equals([...p.values()], ['1', '2']);
  assert_class_string(p, 'URLSearchParams');
}, 'iteration and forEach');
