// META: data=url/setters_tests.json
// URL attribute setters (WPT url/url-setters.any.js style).
for (const c of WPT_DATA['setters_tests.json']) {
  test(() => {
    const url = new URL(c.href);
    url[c.setter] = c.new_value;
    for (const [attribute, value] of Object.entries(c.expected)) assert_equals(url[attribute], value, attribute);
  }, `Setting <${c.href}>.${c.setter} = ${JSON.stringify(c.new_value)}`);
}
