// Response.json and Response.redirect (WPT response-static-json / response-static-redirect style).
const INIT = [
  [undefined, 200, '', 'application/json', {}],
  [{ status: 400 }, 400, '', 'application/json', {}],
  [{ statusText: 'foo' }, 200, 'foo', 'application/json', {}],
  [{ headers: {} }, 200, '', 'application/json', {}],
  [{ headers: { 'content-type': 'foo/bar' } }, 200, '', 'foo/bar', {}],
  [{ headers: { 'x-foo': 'bar' } }, 200, '', 'application/json', { 'x-foo': 'bar' }],
];
for (const [init, status, statusText, type, headers] of INIT) {
  promise_test(async () => {
    const r = Response.json('hello world', init);
    assert_equals(r.type, 'default');
    assert_equals(r.status, status);
    assert_equals(r.statusText, statusText);
    assert_equals(r.headers.get('content-type'), type);
    for (const [k, v] of Object.entries(headers)) assert_equals(r.headers.get(k), v);
    assert_equals(await r.json(), 'hello world');
  }, `Response.json with init ${JSON.stringify(init)}`);
}
for (const status of [204, 205, 304]) test(() => assert_throws_js(TypeError, () => Response.json('x', { status })), `Response.json with a null body status ${status} throws`);
test(() => assert_throws_js(TypeError, () => Response.json(Symbol('x'))), 'Response.json of a symbol throws');
test(() => {
  const a = {};
  a.a = a;
  assert_throws_js(TypeError, () => Response.json(a));
}, 'Response.json of a cycle throws');
test(() => {
  class CustomError extends Error {}
  assert_throws_js(CustomError, () => Response.json({ get foo() { throw new CustomError('x'); } }));
}, 'Response.json propagates serializer errors');
for (const [input, bytes] of [['𝌆', [34, 240, 157, 140, 134, 34]], ['\uDEAD', [34, 92, 117, 100, 101, 97, 100, 34]]]) {
  promise_test(async () => assert_array_equals(new Uint8Array(await Response.json(input).arrayBuffer()), bytes), `Response.json encodes ${JSON.stringify(input)}`);
}
test(() => {
  const h = Response.json(null).headers;
  h.set('x-custom', 'v');
  assert_equals(h.get('x-custom'), 'v');
  h.delete('content-type');
  assert_equals(h.get('content-type'), null);
}, 'headers of Response.json are mutable');
test(() => {
  const r = Response.redirect('https://example.com/next');
  assert_equals(r.status, 302);
  assert_equals(r.headers.get('location'), 'https://example.com/next');
  assert_equals(r.body, null);
  for (const s of [301, 302, 303, 307, 308]) assert_equals(Response.redirect('https://example.com/', s).status, s);
  for (const s of [200, 300, 304, 309, 400]) assert_throws_js(RangeError, () => Response.redirect('https://example.com/', s));
  assert_throws_js(TypeError, () => Response.redirect('/relative'));
  assert_equals(Response.redirect(new URL('https://example.com/a b')).headers.get('location'), 'https://example.com/a%20b');
}, 'Response.redirect');
