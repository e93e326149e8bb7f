// Response constructor (WPT fetch/api/response/response-init-001/002 and response-error style).
test(() => {
  const r = new Response();
  assert_equals(r.type, 'default');
  assert_equals(r.url, '');
  assert_false(r.redirected);
  assert_equals(r.status, 200);
  assert_true(r.ok);
  assert_equals(r.statusText, '');
  assert_equals(r.body, null);
  assert_false(r.bodyUsed);
  assert_class_string(r, 'Response');
}, 'defaults');
for (const status of [200, 204, 299, 300, 404, 599]) test(() => assert_equals(new Response(null, { status }).status, status), `status ${status} is accepted`);
for (const status of [0, 100, 199, 600, 1000, -1]) test(() => assert_throws_js(RangeError, () => new Response(null, { status })), `status ${status} throws RangeError`);
for (const [status, ok] of [[200, true], [299, true], [300, false], [199 + 101, false], [404, false]]) test(() => assert_equals(new Response(null, { status }).ok, ok), `ok for ${status}`);
test(() => {
  assert_equals(new Response(null, { statusText: 'Fine \u00ff' }).statusText, 'Fine \u00ff');
  assert_throws_js(TypeError, () => new Response(null, { statusText: 'bad\n' }));
  assert_throws_js(TypeError, () => new Response(null, { statusText: '\u0100' }));
}, 'statusText must be a reason-phrase');
for (const status of [204, 205, 304]) {
  test(() => {
    assert_throws_js(TypeError, () => new Response('body', { status }));
    assert_throws_js(TypeError, () => new Response('', { status }));
    assert_equals(new Response(null, { status }).status, status);
  }, `a null body status (${status}) refuses a body`);
}
test(() => {
  assert_equals(new Response('x').headers.get('content-type'), 'text/plain;charset=UTF-8');
  assert_equals(new Response('x', { headers: { 'content-type': 'text/html' } }).headers.get('content-type'), 'text/html');
  assert_equals(new Response(new Uint8Array(1)).headers.get('content-type'), null);
  assert_equals(new Response(new URLSearchParams('a=b')).headers.get('content-type'), 'application/x-www-form-urlencoded;charset=UTF-8');
}, 'content-type defaults by body type');
test(() => {
  const r = Response.error();
  assert_equals(r.type, 'error');
  assert_equals(r.status, 0);
  assert_equals(r.statusText, '');
  assert_false(r.ok);
  assert_equals(r.body, null);
  assert_throws_js(TypeError, () => r.headers.set('a', 'b'));
}, 'Response.error()');
