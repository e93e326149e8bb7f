/** One error-code table: every code src/ uses is in it, each with one status, and docs/operations.md lists it as it is. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { ERROR_CODES, errorCodeOf, isUsageError, SwitchyardError, type ErrorCode } from '../src/errors.ts';
import { ROOT } from './helpers/index.ts';

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return sources(path);
    return name.endsWith('.ts') ? [path] : [];
  });
}

/** Codes written as literals where an error is made or answered, or compared with an error's code. */
function codesUsed(text: string): string[] {
  const out: string[] = [];
  for (const re of [/SwitchyardError\(\s*'([a-z_]+)'/g, /jsonError\(\s*'([a-z_]+)'/g, /(?<!typeof [\w.?]*)\.code [!=]== '([a-z]+(?:_[a-z]+)*)'/g])
    for (const m of text.matchAll(re)) out.push(m[1]);
  return out;
}

test('every error code src/ uses is in the table', () => {
  const used = new Map<string, string>();
  for (const file of sources(join(ROOT, 'src'))) for (const code of codesUsed(readFileSync(file, 'utf8'))) used.set(code, file);
  assert.ok(used.size > 15, `found ${used.size} codes`);
  const unknown = [...used].filter(([code]) => !(code in ERROR_CODES)).map(([code, file]) => `${code} (${file})`);
  assert.deepEqual(unknown, [], 'codes missing from ERROR_CODES in src/errors.ts');
});

test('the reader finds codes made, answered and compared, and nothing else', () => {
  const text = `throw new SwitchyardError(\n 'gone', 'x');\nreturn jsonError('no_route', m);\nif (e.code === 'server_unreachable') 1;\nif (e.code === 'ERR_MODULE_NOT_FOUND') 2;\nif (typeof e.code !== 'string') 3;`;
  assert.deepEqual(codesUsed(text), ['gone', 'no_route', 'server_unreachable']);
});

test('docs/operations.md lists every code with its HTTP status and exit code, and no other', () => {
  const doc = readFileSync(join(ROOT, 'docs/operations.md'), 'utf8');
  const section = doc.slice(doc.indexOf('## Error codes'), doc.indexOf('\n## ', doc.indexOf('## Error codes') + 1));
  const rows = [...section.matchAll(/^\| `([a-z_]+)` \| (\d{3}) \| ([12]) \|/gm)].map((m) => `${m[1]} ${m[2]} ${m[3]}`);
  const table = (Object.keys(ERROR_CODES) as ErrorCode[]).map((c) => `${c} ${ERROR_CODES[c].status} ${isUsageError(c) ? 2 : 1}`);
  assert.deepEqual(rows, table, 'the Error codes table of docs/operations.md, in the order of ERROR_CODES');
});

test("an error's status is its code's; a server's answer keeps its code, and an unknown one falls back by status", () => {
  for (const code of Object.keys(ERROR_CODES) as ErrorCode[]) assert.equal(new SwitchyardError(code, 'x').status, ERROR_CODES[code].status, code);
  assert.equal(errorCodeOf('paused', 503), 'paused');
  assert.equal(errorCodeOf('from_a_newer_server', 409), 'conflict');
  assert.equal(errorCodeOf('from_a_newer_server', 418), 'bad_request');
  assert.equal(errorCodeOf(undefined, 503), 'internal');
});
