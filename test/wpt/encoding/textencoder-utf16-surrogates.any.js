// Lone surrogates become U+FFFD when encoding (WPT encoding/textencoder-utf16-surrogates style).
const cases = [
  ['\uD800', [0xef, 0xbf, 0xbd], 'lone lead surrogate'],
  ['\uDC00', [0xef, 0xbf, 0xbd], 'lone trail surrogate'],
  ['\uD800\uDC00', [0xf0, 0x90, 0x80, 0x80], 'surrogate pair'],
  ['\uDC00\uD800', [0xef, 0xbf, 0xbd, 0xef, 0xbf, 0xbd], 'swapped pair'],
  ['a\uD800b', [0x61, 0xef, 0xbf, 0xbd, 0x62], 'lead surrogate between letters'],
  ['\uD800\uD800\uDC00', [0xef, 0xbf, 0xbd, 0xf0, 0x90, 0x80, 0x80], 'lead then pair'],
];
for (const [input, bytes, name] of cases) test(() => assert_array_equals(new TextEncoder().encode(input), bytes), `encode: ${name}`);
test(() => {
  const out = new Uint8Array(8);
  const r = new TextEncoder().encodeInto('a\u00e9\u6c34\ud83d\ude00', out);
  assert_equals(r.read, 3);
  assert_equals(r.written, 6);
  assert_array_equals(out, [0x61, 0xc3, 0xa9, 0xe6, 0xb0, 0xb4, 0, 0]);
}, 'encodeInto stops before a character that does not fit');
test(() => {
  const out = new Uint8Array(4);
  const r = new TextEncoder().encodeInto('\ud83d\ude00', out);
  assert_equals(r.read, 2);
  assert_equals(r.written, 4);
  const none = new TextEncoder().encodeInto('x', new Uint8Array(0));
  assert_equals(none.read, 0);
  assert_equals(none.written, 0);
}, 'encodeInto counts UTF-16 code units read');
