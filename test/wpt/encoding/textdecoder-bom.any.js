// BOM handling (WPT encoding/textdecoder-ignorebom and api-replacement-encodings style).
const text = 'abc';
const boms = {
  'utf-8': [0xef, 0xbb, 0xbf, 0x61, 0x62, 0x63],
  'utf-16le': [0xff, 0xfe, 0x61, 0x00, 0x62, 0x00, 0x63, 0x00],
  'utf-16be': [0xfe, 0xff, 0x00, 0x61, 0x00, 0x62, 0x00, 0x63],
};
for (const [enc, bytes] of Object.entries(boms)) {
  test(() => assert_equals(new TextDecoder(enc).decode(new Uint8Array(bytes)), text), `BOM is stripped by default: ${enc}`);
  test(() => assert_equals(new TextDecoder(enc, { ignoreBOM: true }).decode(new Uint8Array(bytes)), `\uFEFF${text}`), `BOM is kept with ignoreBOM: ${enc}`);
  test(() => {
    const d = new TextDecoder(enc);
    assert_equals(d.decode(new Uint8Array(bytes)), text);
    assert_equals(d.decode(new Uint8Array(bytes)), text, 'second call is a new stream');
  }, `BOM is stripped at the start of each stream: ${enc}`);
}
test(() => {
  assert_equals(new TextDecoder('utf-8').decode(new Uint8Array(boms['utf-16le'])), '\uFFFD\uFFFDa\u0000b\u0000c\u0000');
}, 'a UTF-16 BOM does not switch a UTF-8 decoder');
test(() => {
  const d = new TextDecoder();
  assert_equals(d.decode(new Uint8Array([0xef]), { stream: true }), '');
  assert_equals(d.decode(new Uint8Array([0xbb]), { stream: true }), '');
  assert_equals(d.decode(new Uint8Array([0xbf, 0x61])), 'a');
}, 'a BOM split across chunks is still stripped');
