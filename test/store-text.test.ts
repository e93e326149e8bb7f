/**
 * Text as the store keeps it (src/store/text.ts), and the JSON arrays a turn's rows travel in
 * (jsonRows): written fast when nothing needs mapping, with each NUL and lone surrogate replaced
 * by U+FFFD when something does: the same text either way as mapping every string would give.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { jsonRows } from '../src/store/leased-queue.ts';
import { storableText } from '../src/store/text.ts';

const mapped = (rows: unknown[]) => JSON.stringify(rows, (_k, v) => (typeof v === 'string' ? storableText(v) : v));

test('jsonRows writes what mapping every string would, for NULs, lone surrogates, pairs, backslashes and look-alike text', () => {
  const cases = [
    'plain',
    'a\u0000b',
    '\uD800',
    'x\uDC00y',
    '\uDBFF',
    '\uD83D\uDE00',
    'text \\u0000 that looks like an escape',
    '\\ud800',
    'q"uote',
    'é',
    '\u0001',
  ];
  for (const c of cases) {
    const rows = [{ s: c, n: 1, nested: { list: [c] } }];
    assert.equal(jsonRows(rows), mapped(rows), `for ${JSON.stringify(c)}`);
  }
  assert.equal(jsonRows(['a\u0000b']), '["a\uFFFDb"]');
  assert.equal(jsonRows(['\uD800x']), '["\uFFFDx"]');
});

test('jsonRows on random strings over the characters that matter gives the mapped text', () => {
  const alphabet = [0, 0x41, 0xd800, 0xdbff, 0xdc00, 0xdfff, 0x5c, 0x75, 0x30, 0x64, 0x38, 0xe9];
  let seed = 7;
  const next = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
  for (let i = 0; i < 5000; i++) {
    let s = '';
    for (let j = 0; j < 8; j++) s += String.fromCharCode(alphabet[Math.floor(next() * alphabet.length)]);
    assert.equal(jsonRows([s, { s }]), mapped([s, { s }]), `for ${JSON.stringify(s)}`);
  }
});
