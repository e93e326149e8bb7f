// URL statics and stringification.
test(() => {
  assert_true(URL.canParse('https://example.com/'));
  assert_false(URL.canParse('/relative'));
  assert_true(URL.canParse('/relative', 'https://example.com/'));
  assert_false(URL.canParse('https://ex ample.com/'));
}, 'URL.canParse');
test(() => {
  assert_equals(URL.parse('https://example.com/a').href, 'https://example.com/a');
  assert_equals(URL.parse('b', 'https://example.com/a/').href, 'https://example.com/a/b');
  assert_equals(URL.parse('nope'), null);
  assert_equals(URL.parse('https://[::1'), null);
}, 'URL.parse');
test(() => {
  const u = new URL('https://example.com/?q=1#h');
  assert_equals(String(u), 'https://example.com/?q=1#h');
  assert_equals(u.toJSON(), 'https://example.com/?q=1#h');
  assert_equals(JSON.stringify({ u }), '{"u":"https://example.com/?q=1#h"}');
  assert_class_string(u, 'URL');
}, 'stringifier and toJSON');
test(() => {
  assert_throws_js(TypeError, () => new URL());
  assert_throws_js(TypeError, () => new URL('relative'));
  assert_throws_js(TypeError, () => new URL('a', 'not a base'));
  assert_equals(new URL('https://example.com', undefined).href, 'https://example.com/');
  assert_equals(new URL(new URL('https://example.com/x')).href, 'https://example.com/x');
}, 'constructor errors and inputs');
