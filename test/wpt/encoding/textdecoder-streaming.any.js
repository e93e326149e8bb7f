// Streaming decode in every chunk size (WPT encoding/textdecoder-streaming style).
const string = '\x00123ABCabc\x80\xFF\u0100\u1000\uFFFD\uD800\uDC00\uDBFF\uDFFF';
const encodings = {
  'utf-8': [0x00, 0x31, 0x32, 0x33, 0x41, 0x42, 0x43, 0x61, 0x62, 0x63, 0xc2, 0x80, 0xc3, 0xbf, 0xc4, 0x80, 0xe1, 0x80, 0x80, 0xef, 0xbf, 0xbd, 0xf0, 0x90, 0x80, 0x80, 0xf4, 0x8f, 0xbf, 0xbf],
  'utf-16le': [0x00, 0x00, 0x31, 0x00, 0x32, 0x00, 0x33, 0x00, 0x41, 0x00, 0x42, 0x00, 0x43, 0x00, 0x61, 0x00, 0x62, 0x00, 0x63, 0x00, 0x80, 0x00, 0xff, 0x00, 0x00, 0x01, 0x00, 0x10, 0xfd, 0xff, 0x00, 0xd8, 0x00, 0xdc, 0xff, 0xdb, 0xff, 0xdf],
};
encodings['utf-16be'] = [];
for (let i = 0; i < encodings['utf-16le'].length; i += 2) encodings['utf-16be'].push(encodings['utf-16le'][i + 1], encodings['utf-16le'][i]);
for (const [enc, bytes] of Object.entries(encodings)) {
  for (let size = 1; size <= 5; size++) {
    test(() => {
      const d = new TextDecoder(enc);
      let out = '';
      for (let i = 0; i < bytes.length; i += size) out += d.decode(new Uint8Array(bytes.slice(i, i + size)), { stream: true });
      out += d.decode();
      assert_equals(out, string);
    }, `Streaming decode: ${enc}, ${size} byte window`);
  }
}
test(() => {
  const d = new TextDecoder();
  assert_equals(d.decode(new Uint8Array([0xf0, 0x9f]), { stream: true }), '');
  assert_equals(d.decode(), '\uFFFD');
}, 'an unfinished sequence at the end of a stream becomes U+FFFD');
