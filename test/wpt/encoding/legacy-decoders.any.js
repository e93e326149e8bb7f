// Single- and multi-byte legacy decoders (spot checks from the Encoding standard's index tables).
const cases = [
  ['windows-1252', [0x80, 0x81, 0x9f, 0xe9], '\u20AC\u0081\u0178\u00E9'],
  ['iso-8859-2', [0xa1, 0xb1, 0xe8], '\u0104\u0105\u010D'],
  ['koi8-r', [0xc1, 0xe1], '\u0430\u0410'],
  ['windows-1251', [0xc0, 0xff], '\u0410\u044F'],
  ['iso-8859-15', [0xa4], '\u20AC'],
  ['macintosh', [0x80, 0xa5], '\u00C4\u2022'],
  ['x-user-defined', [0x41, 0x80, 0xff], 'A\uF780\uF7FF'],
  ['shift_jis', [0x82, 0xa0, 0x88, 0x9f], '\u3042\u4E9C'],
  ['euc-jp', [0xa4, 0xa2], '\u3042'],
  ['iso-2022-jp', [0x1b, 0x24, 0x42, 0x24, 0x22, 0x1b, 0x28, 0x42, 0x41], '\u3042A'],
  ['gbk', [0xc4, 0xe3, 0xba, 0xc3], '\u4F60\u597D'],
  ['gb18030', [0x81, 0x30, 0x81, 0x30], '\u0080'],
  ['big5', [0xa4, 0x40], '\u4E00'],
  ['euc-kr', [0xb0, 0xa1], '\uAC00'],
];
for (const [enc, bytes, out] of cases) test(() => assert_equals(new TextDecoder(enc).decode(new Uint8Array(bytes)), out), `${enc} decodes ${bytes.map((b) => b.toString(16)).join(' ')}`);
test(() => assert_throws_js(TypeError, () => new TextDecoder('shift_jis', { fatal: true }).decode(new Uint8Array([0x82]))), 'shift_jis fatal on a truncated sequence');
test(() => assert_equals(new TextDecoder('shift_jis').decode(new Uint8Array([0x82])), '\uFFFD'), 'shift_jis replaces a truncated sequence');
test(() => {
  const d = new TextDecoder('gbk');
  assert_equals(d.decode(new Uint8Array([0xc4]), { stream: true }) + d.decode(new Uint8Array([0xe3])), '\u4F60');
}, 'gbk streaming across a split sequence');
