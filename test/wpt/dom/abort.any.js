// AbortController / AbortSignal and EventTarget (WPT dom/abort style).
test(() => {
  const c = new AbortController();
  const s = c.signal;
  assert_false(s.aborted);
  assert_equals(s.reason, undefined);
  let events = 0;
  s.onabort = (e) => {
    events++;
    assert_equals(e.type, 'abort');
  };
  s.addEventListener('abort', () => events++);
  c.abort();
  c.abort();
  assert_true(s.aborted);
  assert_equals(events, 2, 'abort event fires once per listener');
  assert_class_string(s.reason, 'Error');
  assert_equals(s.reason.name, 'AbortError');
}, 'abort() fires one abort event and sets an AbortError reason');
test(() => {
  const c = new AbortController();
  c.abort('because');
  assert_equals(c.signal.reason, 'because');
  assert_throws_js(TypeError, () => new AbortSignal());
  try {
    c.signal.throwIfAborted();
    assert_unreached('should throw');
  } catch (e) {
    assert_equals(e, 'because');
  }
}, 'abort(reason), throwIfAborted and the illegal constructor');
test(() => {
  const s = AbortSignal.abort();
  assert_true(s.aborted);
  assert_equals(s.reason.name, 'AbortError');
  assert_equals(AbortSignal.abort(42).reason, 42);
}, 'AbortSignal.abort');
promise_test(async () => {
  const s = AbortSignal.timeout(10);
  assert_false(s.aborted);
  await new Promise((r) => s.addEventListener('abort', r));
  assert_true(s.aborted);
  assert_equals(s.reason.name, 'TimeoutError');
}, 'AbortSignal.timeout');
test(() => {
  const a = new AbortController();
  const b = new AbortController();
  const any = AbortSignal.any([a.signal, b.signal]);
  assert_false(any.aborted);
  b.abort('b');
  assert_true(any.aborted);
  assert_equals(any.reason, 'b');
  assert_true(AbortSignal.any([AbortSignal.abort('x')]).aborted);
}, 'AbortSignal.any');
test(() => {
  const t = new EventTarget();
  const calls = [];
  const once = () => calls.push('once');
  t.addEventListener('x', once, { once: true });
  t.addEventListener('x', { handleEvent: () => calls.push('object') });
  t.addEventListener('x', once, { once: true });
  t.dispatchEvent(new Event('x'));
  t.dispatchEvent(new Event('x'));
  assert_array_equals(calls, ['once', 'object', 'object']);
  const c = new AbortController();
  t.addEventListener('y', () => calls.push('y'), { signal: c.signal });
  c.abort();
  t.dispatchEvent(new Event('y'));
  assert_equals(calls.length, 3, 'listener removed by its signal');
  const e = new Event('z', { cancelable: true });
  t.addEventListener('z', (ev) => ev.preventDefault());
  assert_false(t.dispatchEvent(e));
  assert_true(e.defaultPrevented);
}, 'EventTarget: once, handleEvent objects, duplicates, signal removal, preventDefault');
promise_test(async () => {
  const c = new AbortController();
  c.abort();
  await promise_rejects_dom(null, 'AbortError', fetch('https://example.com/', { signal: c.signal }));
}, 'fetch with an aborted signal rejects with AbortError');
promise_test(async () => {
  const order = [];
  queueMicrotask(() => order.push('micro'));
  setTimeout(() => order.push('timeout'), 0);
  await new Promise((r) => setTimeout(r, 5));
  assert_array_equals(order, ['micro', 'timeout']);
  const id = setTimeout(() => order.push('cleared'), 0);
  clearTimeout(id);
  let n = 0;
  await new Promise((r) => {
    const iv = setInterval(() => {
      if (++n === 3) {
        clearInterval(iv);
        r();
      }
    }, 1);
  });
  assert_equals(n, 3);
  assert_false(order.includes('cleared'));
}, 'queueMicrotask, setTimeout, clearTimeout and setInterval');
