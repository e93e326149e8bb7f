// A small testharness.js work-alike that runs inside the sandbox isolate: test(), promise_test(),
// the assert_* family, and runTests() which answers [{ name, status, message }].
const wptTests = [];

function test(fn, name) {
  wptTests.push({ name, fn, async: false });
}
function promise_test(fn, name) {
  wptTests.push({ name, fn, async: true });
}

class AssertionError extends Error {}
function fail(message) {
  throw new AssertionError(message);
}
function fmt(v) {
  try {
    return typeof v === 'string' ? JSON.stringify(v) : typeof v === 'object' && v !== null ? JSON.stringify(v) : String(v);
  } catch {
    return String(v);
  }
}
function same(a, b) {
  return a === b ? a !== 0 || 1 / a === 1 / b : a !== a && b !== b;
}
function assert_equals(actual, expected, description = '') {
  if (!same(actual, expected)) fail(`${description} expected ${fmt(expected)} but got ${fmt(actual)}`);
}
function assert_not_equals(actual, expected, description = '') {
  if (same(actual, expected)) fail(`${description} got disallowed value ${fmt(actual)}`);
}
function assert_true(v, description = '') {
  if (v !== true) fail(`${description} expected true got ${fmt(v)}`);
}
function assert_false(v, description = '') {
  if (v !== false) fail(`${description} expected false got ${fmt(v)}`);
}
function assert_array_equals(actual, expected, description = '') {
  if (actual === null || typeof actual !== 'object' || actual.length !== expected.length) fail(`${description} lengths differ: expected ${fmt([...expected])} got ${fmt(actual && [...actual])}`);
  for (let i = 0; i < expected.length; i++) if (!same(actual[i], expected[i])) fail(`${description} property ${i}: expected ${fmt(expected[i])} got ${fmt(actual[i])}`);
}
function assert_in_array(v, list, description = '') {
  if (!list.includes(v)) fail(`${description} ${fmt(v)} not in ${fmt(list)}`);
}
function assert_throws_js(Ctor, fn, description = '') {
  try {
    fn();
  } catch (e) {
    if (!(e instanceof Ctor) || e.constructor !== Ctor) fail(`${description} expected ${Ctor.name} but got ${e && e.constructor && e.constructor.name}: ${e && e.message}`);
    return;
  }
  fail(`${description} expected ${Ctor.name} to be thrown`);
}
function assert_throws_dom(name, fn, description = '') {
  try {
    fn();
  } catch (e) {
    if (!(e instanceof DOMException) || e.name !== name) fail(`${description} expected DOMException ${name} but got ${e && e.name}: ${e && e.message}`);
    return;
  }
  fail(`${description} expected DOMException ${name} to be thrown`);
}
async function promise_rejects_js(t, Ctor, promise, description = '') {
  try {
    await promise;
  } catch (e) {
    if (!(e instanceof Ctor)) fail(`${description} expected rejection with ${Ctor.name} but got ${e && e.constructor && e.constructor.name}: ${e && e.message}`);
    return;
  }
  fail(`${description} expected a rejection with ${Ctor.name}`);
}
async function promise_rejects_dom(t, name, promise, description = '') {
  try {
    await promise;
  } catch (e) {
    if (!(e instanceof DOMException) || e.name !== name) fail(`${description} expected rejection with DOMException ${name} but got ${e && e.name}`);
    return;
  }
  fail(`${description} expected a rejection with ${name}`);
}
function assert_class_string(obj, cls, description = '') {
  assert_equals(Object.prototype.toString.call(obj), `[object ${cls}]`, description);
}
function assert_own_property(obj, prop, description = '') {
  if (!Object.prototype.hasOwnProperty.call(obj, prop)) fail(`${description} expected own property ${prop}`);
}
function assert_unreached(description = '') {
  fail(`reached unreachable code ${description}`);
}

async function runTests() {
  const results = [];
  const t = { step_func: (f) => f, unreached_func: (d) => () => assert_unreached(d), add_cleanup() {} };
  for (const { name, fn, async } of wptTests) {
    try {
      const r = fn(t);
      if (async) await r;
      results.push({ name, status: 'PASS' });
    } catch (e) {
      results.push({ name, status: 'FAIL', message: String(e && e.message ? e.message : e).slice(0, 300) });
    }
  }
  return results;
}
