// atob / btoa (WPT html/webappapis/atob/base64 style).
const valid = [['', ''], ['abcd', 'i\xb7\x1d'], [' abcd', 'i\xb7\x1d'], ['abcd ', 'i\xb7\x1d'], ['ab', 'i'], ['abc', 'i\xb7'], ['ab==', 'i'], ['abc=', 'i\xb7'], ['a b c d', 'i\xb7\x1d'], ['ab\tcd', 'i\xb7\x1d'], ['ab\ncd', 'i\xb7\x1d'], ['ab\fcd', 'i\xb7\x1d'], ['ab\rcd', 'i\xb7\x1d'], ['//==', '\xff'], ['++==', '\xfb']];
for (const [input, out] of valid) test(() => assert_equals(atob(input), out), `atob(${JSON.stringify(input)})`);
for (const input of ['a', 'abcde', 'ab=', 'ab===', 'a===', 'ab=c', 'ab\vcd', 'ab\u00a0cd', '%', '=', '==', 'abcd=', 'ab*d']) {
  test(() => assert_throws_dom('InvalidCharacterError', () => atob(input)), `atob(${JSON.stringify(input)}) throws InvalidCharacterError`);
}
test(() => {
  assert_equals(btoa(''), '');
  assert_equals(btoa('f'), 'Zg==');
  assert_equals(btoa('fo'), 'Zm8=');
  assert_equals(btoa('foo'), 'Zm9v');
  assert_equals(btoa('\xff\xfe'), '//4=');
  assert_equals(btoa(null), 'bnVsbA==');
  assert_equals(btoa(12), 'MTI=');
  assert_throws_dom('InvalidCharacterError', () => btoa('\u0100'));
  assert_throws_js(TypeError, () => btoa());
}, 'btoa');
test(() => {
  for (let i = 0; i < 256; i++) assert_equals(atob(btoa(String.fromCharCode(i))), String.fromCharCode(i));
}, 'round trip of every byte');
