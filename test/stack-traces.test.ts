/**
 * Stack traces of integration code point at the author's TypeScript files (through the bundle's
 * source map, kept on the host), wherever they are reported: the invocation's record and its
 * `uncaught` line, what the code printed (also after the answer), the server's log line about
 * the 500, and `switchyard logs`.
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { join } from 'node:path';
import { runCli, startTestServer, tmpDir, waitFor, type TestServer } from './helpers/index.ts';
import { mapStackTrace } from '../src/runtime/stack-trace.ts';
import { bundleScript } from '../src/registry/index.ts';
import { capabilityOf } from '../src/server/capabilities.ts';

const MANIFEST = `name: thrower
title: Thrower
description: Throws from a TypeScript module
organization: o
visibility: private
scopes: []
script: src/index.ts
`;

// Types and blank lines above the throw, so the bundle's line differs from the source's.
const HANDLER = `/** Kept apart from the entry, as authors do. */
export interface Order {
  id: string;
  total: number;
}

type Checked = Order & { checked: true };

export function check(order: Order): Checked {
  if (order.total < 0) {
    throw new Error(\`order \${order.id} has a negative total\`);
  }
  return { ...order, checked: true };
}

export function describe(order: Order): string {
  return \`\${order.id}: \${check(order).total}\`;
}
`;

const INDEX = `import { createIntegration } from '@switchyard/runtime';
import { check, describe } from './handler.ts';

export default createIntegration({
  fetch: async (request: Request, context: any) => {
    const path = new URL(request.url).pathname.split('/').pop();
    const bad = { id: 'o-1', total: -5 };
    if (path === 'throw') return new Response(describe(bad));
    if (path === 'printed') {
      try {
        check(bad);
      } catch (e) {
        console.error(e);
      }
      return new Response('printed');
    }
    if (path === 'later') {
      context.waitUntil(
        (async () => {
          await new Promise((r) => setTimeout(r, 5));
          try {
            check(bad);
          } catch (e) {
            console.error(e);
          }
        })(),
      );
      return new Response('answered');
    }
    return new Response('?', { status: 404 });
  },
});
`;

/** 1-based line and column of `needle` in `text`. */
function position(text: string, needle: string): { line: number; column: number } {
  const at = text.indexOf(needle);
  assert.ok(at >= 0, needle);
  const before = text.slice(0, at).split('\n');
  return { line: before.length, column: before.at(-1)!.length + 1 };
}

const THROW = position(HANDLER, 'new Error(');
const THROW_AT = `src/handler.ts:${THROW.line}:${THROW.column}`;
const CALLER_AT = `src/handler.ts:${position(HANDLER, 'check(order).total').line}:`;

async function thrower(t: TestContext): Promise<TestServer & { base: string }> {
  const dir = tmpDir(t);
  mkdirSync(join(dir, 'thrower/src'), { recursive: true });
  writeFileSync(join(dir, 'thrower/platform-manifest.yaml'), MANIFEST);
  writeFileSync(join(dir, 'thrower/src/handler.ts'), HANDLER);
  writeFileSync(join(dir, 'thrower/src/index.ts'), INDEX);
  const s = await startTestServer(t, { integrations_dir: dir, sandbox: { cpu_time: 1000 } as never });
  const inst = await s.api('POST', '/api/v1/installations', { integration: 'thrower' });
  assert.equal(inst.status, 201, JSON.stringify(inst.body));
  return Object.assign(s, { base: `${s.url}/v1/integrations/thrower/installations/${inst.body.installation.id}` });
}

test('a handler that throws in src/handler.ts: the record, its uncaught line, the server log and `switchyard logs` name that file and line', async (t) => {
  const s = await thrower(t);
  const res = await fetch(`${s.base}/throw`);
  assert.equal(res.status, 500);
  assert.deepEqual(await res.json(), { error: 'Internal server error' }, 'no stack in the answer');
  const id = res.headers.get('x-request-id')!;

  const record = (await s.api('GET', `/api/v1/logs/${id}`)).body;
  assert.equal(record.error.kind, 'exception');
  const frames = record.error.stack.split('\n');
  assert.match(frames[0], /order o-1 has a negative total/);
  assert.match(frames[1], new RegExp(`^\\s+at check \\(${THROW_AT}\\)$`), record.error.stack);
  assert.match(frames[2], new RegExp(`^\\s+at describe \\(${CALLER_AT}\\d+\\)$`), record.error.stack);
  assert.match(frames[3], /^\s+at Object\.fetch \(src\/index\.ts:8:\d+\)$/, record.error.stack);
  assert.doesNotMatch(record.error.stack, /integration:thrower@/, 'no frame left pointing at the bundle');
  const uncaught = record.logs.find((l: { message: string }) => l.message.startsWith('uncaught '));
  assert.ok(uncaught.message.includes(`(${THROW_AT})`), uncaught.message);

  const logged = s.logs.find((l) => l.msg === 'integration code threw: Error: order o-1 has a negative total');
  assert.ok(logged, 'the server logs the 500');
  assert.ok(String(logged.stack).includes(`(${THROW_AT})`), String(logged.stack));

  const cli = await runCli(['logs', '--integration', 'thrower'], { env: { SWITCHYARD_URL: s.url, SWITCHYARD_ADMIN_TOKEN: s.token } });
  assert.equal(cli.code, 0, cli.stderr);
  assert.ok(cli.stdout.includes(THROW_AT), cli.stdout);
  assert.doesNotMatch(cli.stdout, /integration:thrower@/);
});

test('an error the code prints (console.error), before or after its answer, is mapped too', async (t) => {
  const s = await thrower(t);
  const printed = await fetch(`${s.base}/printed`);
  assert.equal(printed.status, 200);
  const record = (await s.api('GET', `/api/v1/logs/${printed.headers.get('x-request-id')}`)).body;
  assert.equal(record.logs.length, 1);
  assert.equal(record.logs[0].level, 'error');
  assert.ok(record.logs[0].message.includes(`(${THROW_AT})`), record.logs[0].message);

  const later = await fetch(`${s.base}/later`);
  assert.equal(await later.text(), 'answered');
  const laterId = later.headers.get('x-request-id')!;
  const late = await waitFor(async () => (await s.api('GET', `/api/v1/logs/${laterId}`)).body.logs.find((l: { level: string }) => l.level === 'error'));
  assert.ok(late.message.includes(`(${THROW_AT})`), late.message);
  assert.doesNotMatch(late.message, /integration:thrower@/);
});

test('the source map stays on the host: the script the sandbox gets is the bundle alone', async (t) => {
  const s = await thrower(t);
  const loaded = capabilityOf(s.services, 'registry').get('thrower')!;
  assert.deepEqual(Object.keys(loaded.script!).sort(), ['code', 'name', 'version']);
  assert.doesNotMatch(loaded.script!.code, /sourceMappingURL/);
  assert.deepEqual(JSON.parse(loaded.sourceMap!).sources, ['src/index.ts', 'src/handler.ts'], 'paths relative to the folder');

  // Only this bundle's frames are rewritten; another version's, and positions with no mapping, stay.
  const version = loaded.script!.version;
  const other = `at x (integration:thrower@${'0'.repeat(16)}:12:5)`;
  assert.equal(mapStackTrace(other, loaded), other);
  const unmapped = `at y (integration:thrower@${version}:9999:1)`;
  assert.equal(mapStackTrace(unmapped, loaded), unmapped);
});

// What an integration's own files can make of the source map. A `sourceMappingURL` comment is
// followed by esbuild when it bundles with a map: one pointing outside the folder would make the
// host read any file (a FIFO hangs the load, /dev/zero fills memory), and a map's `sources` can
// name anything.

/** `frame` of the bundle at the first occurrence of `needle` in its code (V8's 1-based line and column). */
function frameAt(code: string, needle: string, name: string, version: string): string {
  const p = position(code, needle);
  return `    at f (integration:${name}@${version}:${p.line}:${p.column})`;
}

const dataMap = (map: object) => `data:application/json;base64,${Buffer.from(JSON.stringify(map)).toString('base64')}`;

test("a sourceMappingURL pointing outside the integration folder is not followed: no file there is read (a FIFO would hang the load, a token file would be quoted in the load error)", { timeout: 30_000 }, async (t) => {
  const root = tmpDir(t);
  const outside = join(root, 'outside');
  const dir = join(root, 'integration');
  mkdirSync(outside);
  mkdirSync(join(dir, 'src'), { recursive: true });
  mkdirSync(join(dir, 'lib'));
  execFileSync('mkfifo', [join(outside, 'hang.map')]);
  writeFileSync(join(outside, 'evil.map'), JSON.stringify({ version: 3, sources: ['/etc/host-secret.ts'], names: [], mappings: 'AAAA' }));
  symlinkSync(join(outside, 'evil.map'), join(dir, 'src/link.map'));
  writeFileSync(join(dir, 'src/a.js'), `export const a = () => 1;\n//# sourceMappingURL=../../outside/hang.map\n`);
  writeFileSync(join(dir, 'src/b.js'), `export const b = () => 2;\n//# sourceMappingURL=${pathToFileURL(join(outside, 'evil.map')).href}\n`);
  writeFileSync(join(dir, 'src/c.js'), `export const c = () => 3;\n/*# sourceMappingURL=link.map */\n`);
  // A file that is not a map: esbuild's complaint would quote its first word (the admin token's file is one word).
  writeFileSync(join(outside, 'admin-token'), 'sya_0123456789abcdef0123456789abcdef');
  writeFileSync(join(dir, 'src/e.js'), `export const e = () => 5;\n//# sourceMappingURL=${pathToFileURL(join(outside, 'admin-token')).href}\n`);
  // A compiled file with its map inside the folder (an npm package's usual shape) is still followed.
  writeFileSync(join(dir, 'src/d.js'), `export const d = () => 4;\n//# sourceMappingURL=d.js.map\n`);
  writeFileSync(join(dir, 'src/d.js.map'), JSON.stringify({ version: 3, sources: ['../lib/d.ts'], names: [], mappings: 'AAAA' }));
  writeFileSync(join(dir, 'src/index.js'), `import { a } from './a.js';\nimport { b } from './b.js';\nimport { c } from './c.js';\nimport { d } from './d.js';\nimport { e } from './e.js';\nexport default { fetch: () => new Response(String(a() + b() + c() + d() + e())) };\n`);

  const r = await bundleScript({ dir, entry: join(dir, 'src/index.js') });
  assert.deepEqual(r.problems.filter((p) => p.severity === 'error'), []);
  assert.doesNotMatch(JSON.stringify(r.problems), /sya_0123456789abcdef/, 'no file outside is quoted');
  const sources: string[] = JSON.parse(r.bundle!.sourceMap!).sources;
  assert.ok(sources.includes('lib/d.ts'), `a map inside the folder is followed: ${sources.join(', ')}`);
  assert.ok(!sources.some((s) => s.includes('host-secret') || s.startsWith('..') || s.includes('outside')), `nothing from outside: ${sources.join(', ')}`);
});

test("a map's sources naming host files, absolute or above the folder, or holding control characters, never rewrite a frame", async (t) => {
  const dir = tmpDir(t);
  mkdirSync(join(dir, 'src'));
  const files = { 'up.js': '../../../../etc/passwd', 'abs.js': '/etc/shadow', 'url.js': 'file:///etc/hosts', 'esc.js': 'src/\u001b]0;owned\u0007x.ts', 'ok.js': '../lib/ok.ts' };
  for (const [file, source] of Object.entries(files))
    writeFileSync(join(dir, 'src', file), `export function ${file.slice(0, -3)}() {\n  throw new Error('${file}');\n}\n//# sourceMappingURL=${dataMap({ version: 3, sources: [source], names: [], mappings: 'AAAA;AACA' })}\n`);
  writeFileSync(
    join(dir, 'src/index.js'),
    `${Object.keys(files).map((f) => `import { ${f.slice(0, -3)} } from './${f}';`).join('\n')}\nexport default { fetch: () => { ${Object.keys(files).map((f) => `${f.slice(0, -3)}();`).join(' ')} } };\n`,
  );
  const r = await bundleScript({ dir, entry: join(dir, 'src/index.js') });
  const bundle = { name: 'maps', script: { name: 'maps', version: r.bundle!.version }, sourceMap: r.bundle!.sourceMap };
  for (const file of Object.keys(files)) {
    const frame = frameAt(r.bundle!.code, `new Error("${file}")`, 'maps', r.bundle!.version);
    const mapped = mapStackTrace(frame, bundle);
    if (file === 'ok.js') assert.equal(mapped, '    at f (lib/ok.ts:2:1)', 'a source inside the folder is named');
    else assert.equal(mapped, frame, `${file}: the frame stays as V8 wrote it`);
  }
});

test('an oversized source map is not kept: the bundle loads, its frames stay as V8 wrote them, and a warning says why', async (t) => {
  const dir = tmpDir(t);
  mkdirSync(join(dir, 'src'));
  // Two thousand sources of a kilobyte each: a 2 MB map for a bundle of a few dozen bytes.
  const sources = Array.from({ length: 2000 }, (_, i) => `src/${String(i).padStart(4, '0')}-${'x'.repeat(1000)}.ts`);
  writeFileSync(join(dir, 'src/index.js'), `export default { fetch: () => new Response('ok') };\n//# sourceMappingURL=${dataMap({ version: 3, sources, names: [], mappings: 'AAAA' })}\n`);
  const r = await bundleScript({ dir, entry: join(dir, 'src/index.js') });
  assert.ok(r.bundle, JSON.stringify(r.problems));
  assert.ok(r.bundle.sourceMap === undefined, `no map kept (${r.bundle.sourceMap?.length} characters)`);
  assert.ok(r.bundle.code.length < 200);
  const warning = r.problems.find((p) => p.severity === 'warning' && /source map/.test(p.message));
  assert.ok(warning, JSON.stringify(r.problems));
});
