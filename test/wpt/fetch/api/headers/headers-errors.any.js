// Invalid names and values throw TypeError (WPT fetch/api/headers/headers-errors style).
const badNames = ['', 'invalidĀ', 'inva lid', 'inva(lid', 'inva:lid', 'invalid\u0000', '\u00e9', 'a\nb', '"', '{'];
for (const name of badNames) {
  test(() => {
    assert_throws_js(TypeError, () => new Headers([[name, 'v']]));
    assert_throws_js(TypeError, () => new Headers().append(name, 'v'));
    assert_throws_js(TypeError, () => new Headers().set(name, 'v'));
    assert_throws_js(TypeError, () => new Headers().get(name));
    assert_throws_js(TypeError, () => new Headers().has(name));
    assert_throws_js(TypeError, () => new Headers().delete(name));
  }, `header name ${JSON.stringify(name)} is rejected`);
}
for (const value of ['invalidĀ', 'invalid\nvalue', 'invalid\rvalue', 'invalid\u0000value']) {
  test(() => {
    assert_throws_js(TypeError, () => new Headers({ name: value }));
    assert_throws_js(TypeError, () => new Headers().append('name', value));
    assert_throws_js(TypeError, () => new Headers().set('name', value));
  }, `header value ${JSON.stringify(value)} is rejected`);
}
test(() => {
  assert_throws_js(TypeError, () => new Headers([['a']]));
  assert_throws_js(TypeError, () => new Headers([['a', 'b', 'c']]));
  assert_throws_js(TypeError, () => new Headers([1]));
}, 'sequence items must be pairs');
test(() => {
  assert_throws_js(TypeError, () => new Headers().append('a'));
  assert_throws_js(TypeError, () => new Headers().set('a'));
  assert_throws_js(TypeError, () => new Headers().forEach());
  assert_throws_js(TypeError, () => new Headers().forEach(1));
}, 'missing arguments and non-callable forEach');
test(() => {
  const h = Response.redirect('https://example.com/').headers;
  assert_throws_js(TypeError, () => h.set('a', 'b'));
  assert_throws_js(TypeError, () => h.append('a', 'b'));
  assert_throws_js(TypeError, () => h.delete('location'));
  assert_equals(h.get('location'), 'https://example.com/');
}, 'immutable headers refuse changes');
