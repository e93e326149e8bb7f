/**
 * The guest library's type-check (tsconfig.guest.json, run by `npm run typecheck`) sees the
 * isolate's environment: the language, the guest's own files, src/lib/ and the declared package
 * types, and no Node. A package whose types reference Node's (`/// <reference types="node" />`, as
 * @exodus/bytes's do) would bring Node's globals back without a single error: Request, URL or
 * ReadableStream would then silently mean Node's, as they did before the guest had its own check.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join, relative } from 'node:path';
import { test } from 'node:test';

const ROOT = join(import.meta.dirname, '..');

test("the guest type-checks without Node: the files its tsconfig takes in are the guest's, src/lib/, the language's and declared packages'", () => {
  const r = spawnSync(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', join(ROOT, 'tsconfig.guest.json'), '--listFilesOnly'], {
    encoding: 'utf8',
  });
  assert.equal(r.status, 0, `${r.stdout}${r.stderr}`);
  const files = r.stdout
    .split('\n')
    .filter(Boolean)
    .map((f) => relative(ROOT, f));
  assert.ok(files.includes('src/sandbox/guest/index.ts'), files.join('\n'));
  const foreign = files.filter((f) => {
    if (f.startsWith('src/sandbox/guest/') || f.startsWith('src/lib/')) return false;
    if (/^node_modules\/@typescript\/[^/]+\/lib\/lib\.[\w.]+\.d\.ts$/.test(f) || /^node_modules\/typescript\/lib\//.test(f)) return false;
    return !['node_modules/web-streams-polyfill/types/ponyfill.d.ts', 'node_modules/@exodus/bytes/whatwg.d.ts'].includes(f);
  });
  assert.deepEqual(
    foreign,
    [],
    'declare what the guest uses of a package in src/sandbox/guest/vendor/ rather than letting its types (and whatever they reference) in',
  );
});
