/**
 * The corpus of invalid manifests: each file under test/fixtures/manifests/ fails with the message
 * (a regular expression), line and hint listed for it in expected.json. Every problem says
 * file:line:col.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseManifest } from '../src/manifest/index.ts';
import { ROOT } from './helpers/index.ts';

const dir = join(ROOT, 'test/fixtures/manifests');
const expected = JSON.parse(readFileSync(join(dir, 'expected.json'), 'utf8')) as Record<string, { message: string; line: number; hint?: string }>;
const files = readdirSync(dir)
  .filter((f) => f.endsWith('.yaml'))
  .sort();

test('the corpus holds at least 30 invalid manifests, each with an expectation', () => {
  assert.ok(files.length >= 30, `only ${files.length} fixtures`);
  assert.deepEqual(files, Object.keys(expected).sort());
});

for (const file of files) {
  test(`invalid manifest ${file}`, () => {
    const exp = expected[file];
    const r = parseManifest(readFileSync(join(dir, file), 'utf8'), file, {});
    assert.equal(r.manifest, undefined, 'an invalid manifest yields no manifest');
    assert.deepEqual(r.secrets, {});
    for (const p of r.problems) assert.match(p.where, new RegExp(`^${file.replace(/\./g, '\\.')}:\\d+:\\d+$`), `where of ${JSON.stringify(p)}`);
    const errors = r.problems.filter((p) => p.severity !== 'warning');
    const hit = errors.find((p) => new RegExp(exp.message).test(p.message));
    assert.ok(hit, `no error matches /${exp.message}/ in:\n${errors.map((p) => `${p.where} ${p.message}`).join('\n')}`);
    assert.equal(Number(hit.where.split(':')[1]), exp.line, `line of ${hit.where}: ${hit.message}`);
    if (exp.hint) assert.match(hit.hint ?? '', new RegExp(exp.hint.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')));
  });
}

/**
 * Manifests past a limit the spec does not state but GitBook's own validator has (property title
 * and description lengths, the name's form): they load, with a warning at file:line:col citing it.
 */
const warnedDir = join(ROOT, 'test/fixtures/manifests-warned');
const warned = JSON.parse(readFileSync(join(warnedDir, 'expected.json'), 'utf8')) as Record<string, { message: string; line: number; hint?: string }>;
const warnedFiles = readdirSync(warnedDir)
  .filter((f) => f.endsWith('.yaml'))
  .sort();

test('every manifest of the warned corpus has an expectation', () => {
  assert.deepEqual(warnedFiles, Object.keys(warned).sort());
});

for (const file of warnedFiles) {
  test(`manifest ${file} loads, with a warning citing GitBook's validator`, () => {
    const exp = warned[file];
    const r = parseManifest(readFileSync(join(warnedDir, file), 'utf8'), file, {});
    assert.ok(r.manifest, `no manifest: ${r.problems.map((p) => `${p.where} ${p.message}`).join('\n')}`);
    assert.equal(r.problems.length, 1, JSON.stringify(r.problems));
    const [w] = r.problems;
    assert.equal(w.severity, 'warning');
    assert.match(w.message, new RegExp(exp.message));
    assert.equal(w.where, `${file}:${exp.line}:${w.where.split(':')[2]}`);
    assert.match(w.where, /:\d+:\d+$/);
    if (exp.hint) assert.match(w.hint ?? '', new RegExp(exp.hint.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')));
  });
}
