// Labels map to encoding names (WPT encoding/textdecoder-labels style).
const names = {
  'utf-8': ['unicode-1-1-utf-8', 'unicode11utf8', 'unicode20utf8', 'utf-8', 'utf8', 'x-unicode20utf8', 'UTF-8', ' utf-8 ', '\tutf8\n'],
  'windows-1252': ['ansi_x3.4-1968', 'ascii', 'cp1252', 'cp819', 'csisolatin1', 'ibm819', 'iso-8859-1', 'iso-ir-100', 'iso8859-1', 'iso88591', 'iso_8859-1', 'iso_8859-1:1987', 'l1', 'latin1', 'us-ascii', 'windows-1252', 'x-cp1252'],
  'iso-8859-2': ['csisolatin2', 'iso-8859-2', 'iso-ir-101', 'iso8859-2', 'iso88592', 'iso_8859-2', 'iso_8859-2:1987', 'l2', 'latin2'],
  'iso-8859-15': ['csisolatin9', 'iso-8859-15', 'iso8859-15', 'iso885915', 'iso_8859-15', 'l9'],
  'koi8-r': ['cskoi8r', 'koi', 'koi8', 'koi8-r', 'koi8_r'],
  'windows-1251': ['cp1251', 'windows-1251', 'x-cp1251'],
  macintosh: ['csmacintosh', 'mac', 'macintosh', 'x-mac-roman'],
  gbk: ['chinese', 'csgb2312', 'csiso58gb231280', 'gb2312', 'gb_2312', 'gb_2312-80', 'gbk', 'iso-ir-58', 'x-gbk'],
  gb18030: ['gb18030'],
  big5: ['big5', 'big5-hkscs', 'cn-big5', 'csbig5', 'x-x-big5'],
  'euc-jp': ['cseucpkdfmtjapanese', 'euc-jp', 'x-euc-jp'],
  'iso-2022-jp': ['csiso2022jp', 'iso-2022-jp'],
  shift_jis: ['csshiftjis', 'ms932', 'ms_kanji', 'shift-jis', 'shift_jis', 'sjis', 'windows-31j', 'x-sjis'],
  'euc-kr': ['cseuckr', 'csksc56011987', 'euc-kr', 'iso-ir-149', 'korean', 'ks_c_5601-1987', 'ks_c_5601-1989', 'ksc5601', 'ksc_5601', 'windows-949'],
  'utf-16be': ['unicodefffe', 'utf-16be'],
  'utf-16le': ['csunicode', 'iso-10646-ucs-2', 'ucs-2', 'unicode', 'unicodefeff', 'utf-16', 'utf-16le'],
  'x-user-defined': ['x-user-defined'],
};
for (const [name, labels] of Object.entries(names)) {
  for (const label of labels) test(() => assert_equals(new TextDecoder(label).encoding, name), `${JSON.stringify(label)} => ${name}`);
}
for (const label of ['csiso2022kr', 'hz-gb-2312', 'iso-2022-cn', 'iso-2022-cn-ext', 'iso-2022-kr', 'replacement', 'utf-7', 'utf-32', '', 'foo', 'utf-8\u0000']) {
  test(() => assert_throws_js(RangeError, () => new TextDecoder(label)), `${JSON.stringify(label)} is not a label of a decoder`);
}
