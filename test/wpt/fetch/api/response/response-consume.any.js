// Reading responses, clone and streams (WPT response-consume, response-clone, response-consume-empty style).
promise_test(async () => {
  const r = new Response('Ωmega');
  assert_equals(await r.text(), 'Ωmega');
  assert_true(r.bodyUsed);
  await promise_rejects_js(null, TypeError, r.arrayBuffer());
}, 'text() then a second read rejects');
promise_test(async () => {
  for (const m of ['text', 'json', 'arrayBuffer', 'blob', 'bytes']) {
    const r = new Response(null);
    const v = await r[m]().catch((e) => e);
    if (m === 'json') assert_class_string(v, 'Error');
    else if (m === 'text') assert_equals(v, '');
    else if (m === 'blob') assert_equals(v.size, 0);
    else assert_equals(v.byteLength, 0);
  }
}, 'reading an empty body (json rejects)');
promise_test(async () => {
  const r = new Response('cloned', { status: 201, statusText: 'Made', headers: { a: 'b' } });
  const c = r.clone();
  assert_equals(c.status, 201);
  assert_equals(c.statusText, 'Made');
  assert_equals(c.headers.get('a'), 'b');
  c.headers.set('a', 'changed');
  assert_equals(r.headers.get('a'), 'b', 'headers are copied, not shared');
  assert_equals(await r.text(), 'cloned');
  assert_equals(await c.text(), 'cloned');
}, 'clone() copies status, headers and body');
promise_test(async () => {
  const stream = new ReadableStream({
    start(controller) {
      controller.enqueue(new TextEncoder().encode('chunk one, '));
      controller.enqueue(new TextEncoder().encode('chunk two'));
      controller.close();
    },
  });
  const r = new Response(stream);
  const c = r.clone();
  assert_equals(await r.text(), 'chunk one, chunk two');
  assert_equals(await c.text(), 'chunk one, chunk two');
}, 'a ReadableStream body is read to the end, and teed by clone()');
promise_test(async () => {
  const r = new Response('streamed');
  assert_class_string(r.body, 'ReadableStream');
  const chunks = [];
  const reader = r.body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    chunks.push(...value);
  }
  assert_equals(new TextDecoder().decode(new Uint8Array(chunks)), 'streamed');
  assert_true(r.bodyUsed);
}, 'response.body is a ReadableStream of bytes');
promise_test(async () => {
  const r = new Response('locked');
  r.body.getReader();
  await promise_rejects_js(null, TypeError, r.text());
}, 'a locked body cannot be read');
promise_test(async () => {
  const bad = new ReadableStream({
    start(controller) {
      controller.enqueue('not bytes');
      controller.close();
    },
  });
  await promise_rejects_js(null, TypeError, new Response(bad).text());
}, 'a stream of non-bytes rejects');
promise_test(async () => {
  const form = new FormData();
  form.append('a', '1');
  const back = await new Response(form).formData();
  assert_equals(back.get('a'), '1');
}, 'formData() round trip');
