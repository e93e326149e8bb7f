// TextEncoder / TextDecoder basics (WPT encoding/api-basics style).
const sample = 'z\xA2\u6C34\uD834\uDD1E\uF8FF\uDBFF\uDFFD\uFFFE';
const utf8 = [0x7a, 0xc2, 0xa2, 0xe6, 0xb0, 0xb4, 0xf0, 0x9d, 0x84, 0x9e, 0xef, 0xa3, 0xbf, 0xf4, 0x8f, 0xbf, 0xbd, 0xef, 0xbf, 0xbe];
test(() => {
  assert_equals(new TextEncoder().encoding, 'utf-8');
  assert_equals(new TextDecoder().encoding, 'utf-8');
  assert_false(new TextDecoder().fatal);
  assert_false(new TextDecoder().ignoreBOM);
}, 'default encodings and options');
test(() => {
  assert_array_equals(new TextEncoder().encode(), []);
  assert_array_equals(new TextEncoder().encode(undefined), []);
  assert_array_equals(new TextEncoder().encode(''), []);
  assert_equals(new TextDecoder().decode(), '');
  assert_equals(new TextDecoder().decode(undefined), '');
}, 'empty and undefined inputs');
test(() => {
  assert_array_equals(new TextEncoder().encode(sample), utf8);
  assert_equals(new TextDecoder().decode(new Uint8Array(utf8)), sample);
  assert_equals(new TextDecoder('utf-8').decode(new Uint8Array(utf8).buffer), sample);
  assert_equals(new TextDecoder().decode(new DataView(new Uint8Array(utf8).buffer)), sample);
}, 'UTF-8 round trip from Uint8Array, ArrayBuffer and DataView');
test(() => {
  const le = [0x7a, 0x00, 0xa2, 0x00, 0x34, 0x6c, 0x34, 0xd8, 0x1e, 0xdd, 0xff, 0xf8, 0xff, 0xdb, 0xfd, 0xdf, 0xfe, 0xff];
  assert_equals(new TextDecoder('utf-16le').decode(new Uint8Array(le)), sample);
  const be = [];
  for (let i = 0; i < le.length; i += 2) be.push(le[i + 1], le[i]);
  assert_equals(new TextDecoder('utf-16be').decode(new Uint8Array(be)), sample);
  assert_equals(new TextDecoder('utf-16').decode(new Uint8Array(le)), sample);
}, 'UTF-16LE, UTF-16BE and utf-16 (=LE) decoding');
test(() => {
  assert_throws_js(TypeError, () => new TextEncoder().encode.call({}, 'x'));
  assert_throws_js(RangeError, () => new TextDecoder('nonsense'));
  assert_throws_js(RangeError, () => new TextDecoder('replacement'));
  assert_throws_js(RangeError, () => new TextDecoder('utf-7'));
}, 'invalid receivers and labels');
test(() => {
  assert_class_string(new TextEncoder(), 'TextEncoder');
  assert_class_string(new TextDecoder(), 'TextDecoder');
}, 'class strings');
