// Values lose leading and trailing HTTP whitespace; names are case-insensitive; values combine.
const expectations = {
  name1: [' space ', 'space'],
  name2: ['\ttab\t', 'tab'],
  name3: [' spaceAndTab\t', 'spaceAndTab'],
  name4: ['\r\n newLine', 'newLine'],
  name5: ['newLine\r\n ', 'newLine'],
  name6: ['\r\n\tnewLine', 'newLine'],
  name7: ['\t\f\tnewLine\n', '\f\tnewLine'],
  name8: ['newLine\xa0', 'newLine\xa0'],
  name9: ['in  side', 'in  side'],
};
for (const [name, [input, output]] of Object.entries(expectations)) {
  test(() => {
    assert_equals(new Headers({ [name]: input }).get(name), output);
    const h = new Headers();
    h.append(name, input);
    assert_equals(h.get(name), output);
    h.set(name, input);
    assert_equals(h.get(name), output);
  }, `value ${JSON.stringify(input)} is normalised to ${JSON.stringify(output)}`);
}
test(() => {
  const h = new Headers([['Single', 'a'], ['single', 'b'], ['SINGLE', 'c']]);
  assert_equals(h.get('single'), 'a, b, c');
  assert_array_equals([...h].map(([k, v]) => `${k}=${v}`), ['single=a, b, c']);
  assert_equals(h.get('sInGlE'), 'a, b, c');
}, 'names are case-insensitive and values combine with ", "');
test(() => {
  const h = new Headers([['a', '']]);
  assert_true(h.has('a'));
  assert_equals(h.get('a'), '');
  h.append('a', '');
  assert_equals(h.get('a'), ', ');
}, 'empty values are kept and combined');
