// Request attributes, defaults and init handling (WPT fetch/api/request/request-structure and request-init style).
const url = 'https://example.com/path?x=1#frag';
test(() => {
  const r = new Request(url);
  assert_equals(r.method, 'GET');
  assert_equals(r.url, url);
  assert_equals(r.destination, '');
  assert_equals(r.referrer, 'about:client');
  assert_equals(r.referrerPolicy, '');
  assert_equals(r.mode, 'cors');
  assert_equals(r.credentials, 'same-origin');
  assert_equals(r.cache, 'default');
  assert_equals(r.redirect, 'follow');
  assert_equals(r.integrity, '');
  assert_false(r.keepalive);
  assert_false(r.isReloadNavigation);
  assert_false(r.isHistoryNavigation);
  assert_equals(r.body, null);
  assert_false(r.bodyUsed);
  assert_false(r.signal.aborted);
  assert_class_string(r, 'Request');
  assert_class_string(r.headers, 'Headers');
}, 'default attribute values');
for (const [given, expected] of [['get', 'GET'], ['post', 'POST'], ['delete', 'DELETE'], ['head', 'HEAD'], ['options', 'OPTIONS'], ['put', 'PUT'], ['patch', 'patch'], ['PaTcH', 'PaTcH'], ['custom', 'custom']]) {
  test(() => assert_equals(new Request(url, { method: given }).method, expected), `method ${given} becomes ${expected}`);
}
for (const method of ['CONNECT', 'connect', 'TRACE', 'track', 'bad method', 'a\u00e9', '']) {
  test(() => assert_throws_js(TypeError, () => new Request(url, { method })), `method ${JSON.stringify(method)} throws`);
}
for (const [attr, values, bad] of [
  ['mode', ['same-origin', 'no-cors', 'cors'], ['navigate', 'xyz']],
  ['credentials', ['omit', 'same-origin', 'include'], ['xyz']],
  ['cache', ['default', 'no-store', 'reload', 'no-cache', 'force-cache'], ['xyz']],
  ['redirect', ['follow', 'error', 'manual'], ['xyz']],
  ['referrerPolicy', ['', 'no-referrer', 'origin', 'unsafe-url', 'strict-origin-when-cross-origin'], ['xyz']],
]) {
  for (const v of values) test(() => assert_equals(new Request(url, { [attr]: v })[attr], v), `${attr} ${JSON.stringify(v)} is kept`);
  for (const v of bad) test(() => assert_throws_js(TypeError, () => new Request(url, { [attr]: v })), `${attr} ${JSON.stringify(v)} throws`);
}
test(() => {
  assert_throws_js(TypeError, () => new Request(url, { cache: 'only-if-cached' }));
  assert_equals(new Request(url, { cache: 'only-if-cached', mode: 'same-origin' }).cache, 'only-if-cached');
}, "only-if-cached needs mode 'same-origin'");
test(() => {
  assert_throws_js(TypeError, () => new Request('/relative'));
  assert_throws_js(TypeError, () => new Request('https://user:pass@example.com/'));
  assert_throws_js(TypeError, () => new Request('http://[::1'));
  assert_throws_js(TypeError, () => new Request(url, { window: {} }));
  assert_equals(new Request(url, { window: null }).url, url);
  assert_throws_js(TypeError, () => new Request());
}, 'invalid URLs and init members throw');
test(() => {
  assert_throws_js(TypeError, () => new Request(url, { method: 'GET', body: 'x' }));
  assert_throws_js(TypeError, () => new Request(url, { method: 'HEAD', body: 'x' }));
  assert_equals(new Request(url, { method: 'GET', body: null }).body, null);
}, 'GET and HEAD cannot have a body');
test(() => {
  const r = new Request(url, { headers: { 'X-A': '1' }, referrer: '' });
  assert_equals(r.headers.get('x-a'), '1');
  assert_equals(r.referrer, '');
  const r2 = new Request(url, { referrer: 'https://example.com/ref' });
  assert_equals(r2.referrer, 'https://example.com/ref');
  assert_throws_js(TypeError, () => new Request(url, { referrer: 'http://[' }));
}, 'headers and referrer from init');
test(() => {
  const r = new Request(url, { method: 'POST', headers: { a: '1' }, redirect: 'manual', cache: 'no-store' });
  const r2 = new Request(r);
  assert_equals(r2.method, 'POST');
  assert_equals(r2.headers.get('a'), '1');
  assert_equals(r2.redirect, 'manual');
  assert_equals(r2.cache, 'no-store');
  const r3 = new Request(r, { method: 'PUT', headers: { b: '2' } });
  assert_equals(r3.method, 'PUT');
  assert_false(r3.headers.has('a'));
  assert_equals(r3.headers.get('b'), '2');
  assert_equals(new Request(new URL(url)).url, url);
}, 'a Request from another Request, with init overriding');
test(() => {
  const c = new AbortController();
  const r = new Request(url, { signal: c.signal });
  assert_false(r.signal.aborted);
  c.abort('why');
  assert_true(r.signal.aborted);
  assert_equals(r.signal.reason, 'why');
  const r2 = new Request(r);
  assert_true(r2.signal.aborted);
  assert_throws_js(TypeError, () => new Request(url, { signal: {} }));
}, 'the signal follows init.signal and the input request');
