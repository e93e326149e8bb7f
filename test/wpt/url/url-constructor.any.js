// META: data=url/urltestdata.json
// new URL(input, base) against every case of the data file (WPT url/url-constructor.any.js style).
const attributes = ['href', 'origin', 'protocol', 'username', 'password', 'host', 'hostname', 'port', 'pathname', 'search', 'hash'];
for (const c of WPT_DATA['urltestdata.json']) {
  const name = `Parsing: <${c.input}> ${c.base === null ? 'without base' : `against <${c.base}>`}`;
  test(() => {
    const make = () => (c.base === null ? new URL(c.input) : new URL(c.input, c.base));
    if (c.failure) {
      assert_throws_js(TypeError, make);
      assert_false(c.base === null ? URL.canParse(c.input) : URL.canParse(c.input, c.base), 'canParse');
      return;
    }
    const url = make();
    for (const a of attributes) assert_equals(url[a], c[a], a);
    assert_true(c.base === null ? URL.canParse(c.input) : URL.canParse(c.input, c.base), 'canParse');
  }, name);
}
