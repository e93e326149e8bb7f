// Invalid UTF-8 throws in fatal mode and becomes U+FFFD otherwise (WPT encoding/textdecoder-fatal style).
const bad = [
  [[0xff], 'invalid code'], [[0xc0], 'ends early'], [[0xe0], 'ends early 2'], [[0xc0, 0x00], 'invalid trail'], [[0xc0, 0xc0], 'invalid trail 2'],
  [[0xe0, 0x00], 'invalid trail 3'], [[0xe0, 0xc0], 'invalid trail 4'], [[0xe0, 0x80, 0x00], 'invalid trail 5'], [[0xe0, 0x80, 0xc0], 'invalid trail 6'],
  [[0xfc, 0x80, 0x80, 0x80, 0x80, 0x80], '> 0x10FFFF'], [[0xfe, 0x80, 0x80, 0x80, 0x80, 0x80], 'obsolete lead byte'],
  [[0xc0, 0x80], 'overlong U+0000 - 2 bytes'], [[0xe0, 0x80, 0x80], 'overlong U+0000 - 3 bytes'], [[0xf0, 0x80, 0x80, 0x80], 'overlong U+0000 - 4 bytes'],
  [[0xc1, 0xbf], 'overlong U+007F - 2 bytes'], [[0xe0, 0x81, 0xbf], 'overlong U+007F - 3 bytes'], [[0xe0, 0x9f, 0xbf], 'overlong U+07FF - 3 bytes'],
  [[0xf0, 0x8f, 0xbf, 0xbf], 'overlong U+FFFF - 4 bytes'], [[0xed, 0xa0, 0x80], 'lead surrogate'], [[0xed, 0xb0, 0x80], 'trail surrogate'],
  [[0xed, 0xa0, 0x80, 0xed, 0xb0, 0x80], 'surrogate pair'], [[0xf4, 0x90, 0x80, 0x80], 'beyond U+10FFFF'],
];
for (const [bytes, name] of bad) {
  test(() => assert_throws_js(TypeError, () => new TextDecoder('utf-8', { fatal: true }).decode(new Uint8Array(bytes))), `fatal flag: utf-8 - ${name}`);
}
const replaced = [
  [[0xf0, 0x80, 0x80], '\uFFFD\uFFFD\uFFFD'], [[0xf0, 0x90, 0x80], '\uFFFD'], [[0xf0, 0x90, 0x80, 0x41], '\uFFFDA'], [[0xc3, 0x41], '\uFFFDA'],
  [[0xed, 0xa0, 0x80], '\uFFFD\uFFFD\uFFFD'], [[0x41, 0xff, 0x42], 'A\uFFFDB'], [[0xe2, 0x82], '\uFFFD'], [[0xe2, 0x82, 0xac], '\u20AC'],
];
for (const [bytes, out] of replaced) {
  test(() => assert_equals(new TextDecoder().decode(new Uint8Array(bytes)), out), `replacement: ${bytes.map((b) => b.toString(16)).join(' ')}`);
}
test(() => {
  assert_throws_js(TypeError, () => new TextDecoder('utf-16le', { fatal: true }).decode(new Uint8Array([0x00])));
  assert_throws_js(TypeError, () => new TextDecoder('utf-16le', { fatal: true }).decode(new Uint8Array([0x00, 0xd8])));
  assert_equals(new TextDecoder('utf-16le').decode(new Uint8Array([0x00, 0xd8])), '\uFFFD');
  assert_equals(new TextDecoder('utf-16le').decode(new Uint8Array([0x41, 0x00, 0x42])), 'A\uFFFD');
}, 'fatal flag: utf-16le - truncated code unit and lone surrogate');
test(() => {
  const d = new TextDecoder('utf-8', { fatal: true });
  assert_throws_js(TypeError, () => d.decode(new Uint8Array([0xff]), { stream: true }));
  assert_equals(d.decode(new Uint8Array([0x41])), 'A');
}, 'a fatal decoder can be reused after an error');
