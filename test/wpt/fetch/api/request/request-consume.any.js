// Reading request bodies (WPT fetch/api/request/request-consume and request-init-contenttype style).
const url = 'https://example.com/';
const post = (body, headers) => new Request(url, { method: 'POST', body, headers });
promise_test(async () => {
  const r = post('héllo');
  assert_equals(r.headers.get('content-type'), 'text/plain;charset=UTF-8');
  assert_false(r.bodyUsed);
  assert_equals(await r.text(), 'héllo');
  assert_true(r.bodyUsed);
  await promise_rejects_js(null, TypeError, r.text());
}, 'text() once, then bodyUsed and a TypeError');
promise_test(async () => {
  assert_equals((await post('{"a":[1,2]}').json()).a[1], 2);
  await promise_rejects_js(null, SyntaxError, post('{bad').json());
}, 'json() parses, and rejects with SyntaxError on bad JSON');
promise_test(async () => {
  const bytes = new Uint8Array([0, 1, 2, 254, 255]);
  const buf = await post(bytes).arrayBuffer();
  assert_class_string(buf, 'ArrayBuffer');
  assert_array_equals(new Uint8Array(buf), bytes);
  assert_array_equals(await post(bytes.buffer).bytes(), bytes);
  assert_equals(post(bytes).headers.get('content-type'), null);
}, 'arrayBuffer() and bytes() are byte-exact; binary bodies have no content type');
promise_test(async () => {
  const blob = await post('abc', { 'content-type': 'text/x-test' }).blob();
  assert_equals(blob.type, 'text/x-test');
  assert_equals(blob.size, 3);
  assert_equals(await blob.text(), 'abc');
  const b2 = post(new Blob(['xyz'], { type: 'Application/X-Thing' }));
  assert_equals(b2.headers.get('content-type'), 'application/x-thing');
}, 'blob() keeps the type; a Blob body sets content-type from its type');
promise_test(async () => {
  const r = post(new URLSearchParams({ a: '1', b: 'x y' }));
  assert_equals(r.headers.get('content-type'), 'application/x-www-form-urlencoded;charset=UTF-8');
  const form = await r.formData();
  assert_equals(form.get('b'), 'x y');
}, 'URLSearchParams bodies are urlencoded and read back as FormData');
promise_test(async () => {
  const fd = new FormData();
  fd.append('field', 'value\nline');
  fd.append('file', new Blob(['file content'], { type: 'text/plain' }), 'a "name".txt');
  const r = post(fd);
  assert_true(/^multipart\/form-data; boundary=/.test(r.headers.get('content-type')));
  const back = await r.formData();
  assert_equals(back.get('field'), 'value\r\nline');
  const file = back.get('file');
  assert_class_string(file, 'File');
  assert_equals(file.name, 'a %22name%22.txt');
  assert_equals(file.type, 'text/plain');
  assert_equals(await file.text(), 'file content');
}, 'FormData bodies round-trip through multipart/form-data');
promise_test(async () => {
  await promise_rejects_js(null, TypeError, post('a=1', { 'content-type': 'text/plain' }).formData());
}, 'formData() rejects other content types');
promise_test(async () => {
  const r = post('streamed');
  const reader = r.body.getReader();
  let out = '';
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    out += new TextDecoder().decode(value);
  }
  assert_equals(out, 'streamed');
  assert_true(r.bodyUsed);
}, 'the body can be read as a ReadableStream');
promise_test(async () => {
  const r = post('twice');
  const c = r.clone();
  assert_equals(await r.text(), 'twice');
  assert_equals(await c.text(), 'twice');
  const used = post('x');
  await used.text();
  assert_throws_js(TypeError, () => used.clone());
}, 'clone() before reading gives two readable bodies; cloning a used body throws');
promise_test(async () => {
  const r = post('moved');
  const r2 = new Request(r);
  assert_true(r.bodyUsed);
  assert_equals(await r2.text(), 'moved');
  assert_throws_js(TypeError, () => new Request(r));
}, 'a Request built from another takes its body');
promise_test(async () => {
  const r = new Request(url);
  assert_equals(await r.text(), '');
  assert_equals((await new Request(url).arrayBuffer()).byteLength, 0);
}, 'reading an empty body');
