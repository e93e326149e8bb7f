// META: data=url/urlencoded-parser.json
// application/x-www-form-urlencoded parsing through URLSearchParams, Request and Response.
for (const c of WPT_DATA['urlencoded-parser.json']) {
  test(() => {
    assert_array_equals([...new URLSearchParams(c.input)].map((p) => p.join('=')), c.output.map((p) => p.join('=')));
  }, `URLSearchParams constructed with: ${JSON.stringify(c.input)}`);
  promise_test(async () => {
    const form = await new Response(c.input, { headers: { 'content-type': 'application/x-www-form-urlencoded' } }).formData();
    assert_array_equals([...form].map((p) => p.join('=')), c.output.map((p) => p.join('=')));
  }, `response.formData() with input: ${JSON.stringify(c.input)}`);
  promise_test(async () => {
    const form = await new Request('https://example.com/', { method: 'POST', body: c.input, headers: { 'content-type': 'application/x-www-form-urlencoded' } }).formData();
    assert_array_equals([...form].map((p) => p.join('=')), c.output.map((p) => p.join('=')));
  }, `request.formData() with input: ${JSON.stringify(c.input)}`);
}
