// Set-Cookie is never combined when iterating; getSetCookie() lists every value.
test(() => {
  const h = new Headers([['set-cookie', 'foo=bar'], ['Set-Cookie', 'fizz=buzz; domain=example.com'], ['x', '1']]);
  assert_array_equals([...h].map(([k, v]) => `${k}: ${v}`), ['set-cookie: foo=bar', 'set-cookie: fizz=buzz; domain=example.com', 'x: 1']);
  assert_equals(h.get('set-cookie'), 'foo=bar, fizz=buzz; domain=example.com');
  assert_array_equals(h.getSetCookie(), ['foo=bar', 'fizz=buzz; domain=example.com']);
}, 'set-cookie pairs are iterated separately and getSetCookie lists them');
test(() => {
  assert_array_equals(new Headers().getSetCookie(), []);
  assert_array_equals(new Headers({ 'set-cookie': '' }).getSetCookie(), ['']);
  assert_array_equals(new Headers({ 'Set-Cookie': 'a=1' }).getSetCookie(), ['a=1']);
}, 'getSetCookie with none, an empty and one value');
test(() => {
  const h = new Headers([['set-cookie', 'a=1'], ['set-cookie', 'b=2']]);
  h.set('set-cookie', 'c=3');
  assert_array_equals(h.getSetCookie(), ['c=3']);
  h.delete('Set-Cookie');
  assert_array_equals(h.getSetCookie(), []);
}, 'set and delete replace every set-cookie value');
test(() => {
  const res = new Response(null, { headers: [['set-cookie', 'a=1'], ['set-cookie', 'b=2']] });
  assert_array_equals(res.headers.getSetCookie(), ['a=1', 'b=2']);
}, 'response headers keep several set-cookie values');
