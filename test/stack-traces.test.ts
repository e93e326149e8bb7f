/**
 * Stack traces of integration code point at the author's TypeScript files (through the bundle's
 * source map, kept on the host), wherever they are reported: the invocation's record and its
 * `uncaught` line, what the code printed (also after the answer), the server's log line about
 * the 500, and `switchyard logs`.
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { join } from 'node:path';
import { runCli, startTestServer, tmpDir, waitFor, type TestServer } from './helpers/index.ts';
import { mapStackTrace } from '../src/runtime/stack-trace.ts';
import { bundleScript } from '../src/registry/index.ts';
import { capabilityOf } from '../src/module/capabilities.ts';

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

test('a sourceMappingURL pointing outside the integration folder is not followed: no file there is read (a FIFO would hang the load, a token file would be quoted in the load error)', {
  timeout: 30_000,
}, async (t) => {
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
  writeFileSync(
    join(dir, 'src/index.js'),
    `import { a } from './a.js';\nimport { b } from './b.js';\nimport { c } from './c.js';\nimport { d } from './d.js';\nimport { e } from './e.js';\nexport default { fetch: () => new Response(String(a() + b() + c() + d() + e())) };\n`,
  );

  const r = await bundleScript({ dir, entry: join(dir, 'src/index.js') });
  assert.deepEqual(
    r.problems.filter((p) => p.severity === 'error'),
    [],
  );
  assert.doesNotMatch(JSON.stringify(r.problems), /sya_0123456789abcdef/, 'no file outside is quoted');
  const sources: string[] = JSON.parse(r.bundle!.sourceMap!).sources;
  assert.ok(sources.includes('lib/d.ts'), `a map inside the folder is followed: ${sources.join(', ')}`);
  assert.ok(!sources.some((s) => s.includes('host-secret') || s.startsWith('..') || s.includes('outside')), `nothing from outside: ${sources.join(', ')}`);
});

/** `work`, or a failure naming `what` once `ms` have passed (a FIFO read by the bundler never ends). */
function inTime<T>(what: string, work: Promise<T>, ms = 15_000): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: still running after ${ms} ms`)), ms);
  });
  return Promise.race([work, late]).finally(() => clearTimeout(timer));
}

/**
 * An integration folder beside `outside/` (a token file and a FIFO) whose files name them in
 * comments esbuild cuts elsewhere than a regular expression's `\S` does: at a space, not at a line
 * or paragraph separator. Also a map that is a symlink to the token, and one that is a FIFO.
 */
function hostileMapComments(root: string, name: string): { dir: string; secret: string } {
  const outside = join(root, 'outside');
  const secret = 'sya_fedcba9876543210fedcba9876543210';
  if (!existsSync(outside)) {
    mkdirSync(outside);
    writeFileSync(join(outside, 'admin-token'), secret);
    execFileSync('mkfifo', [join(outside, 'hang.map')]);
  }
  const dir = join(root, name);
  mkdirSync(join(dir, 'src'), { recursive: true });
  // From dir/src, `x<sep>/..` is src again: three more steps reach root/outside.
  const up = '/../../../outside';
  const files: Record<string, string> = {
    'ls.js': `/*# sourceMappingURL=x\u2028${up}/admin-token */`,
    'ps.js': `/*@ sourceMappingURL=x\u2029${up}/admin-token */`,
    'fifo.js': `/*# sourceMappingURL=x\u2028${up}/hang.map */`,
    'link.js': `//# sourceMappingURL=link.map`,
    'pipe.js': `//# sourceMappingURL=pipe.map`,
  };
  symlinkSync(join(outside, 'admin-token'), join(dir, 'src/link.map'));
  execFileSync('mkfifo', [join(dir, 'src/pipe.map')]);
  for (const [file, comment] of Object.entries(files)) writeFileSync(join(dir, 'src', file), `export const ${file.slice(0, -3)} = () => 1;\n${comment}\n`);
  const names = Object.keys(files).map((f) => f.slice(0, -3));
  writeFileSync(
    join(dir, 'src/index.js'),
    `${names.map((n) => `import { ${n} } from './${n}.js';`).join('\n')}\nexport default { fetch: () => new Response(String(${names.map((n) => `${n}()`).join(' + ')})) };\n`,
  );
  return { dir, secret };
}

test('a sourceMappingURL esbuild reads past a line or paragraph separator, or a symlinked map, reads nothing outside the folder', {
  timeout: 60_000,
}, async (t) => {
  const { dir, secret } = hostileMapComments(tmpDir(t), 'integration');
  const r = await inTime('bundling', bundleScript({ dir, entry: join(dir, 'src/index.js') }));
  assert.deepEqual(
    r.problems.filter((p) => p.severity === 'error'),
    [],
  );
  assert.ok(!JSON.stringify(r).includes(secret.slice(4)), 'the token file is quoted nowhere');
  const sources: string[] = JSON.parse(r.bundle!.sourceMap!).sources;
  assert.ok(!sources.some((s) => s.includes('outside') || s.startsWith('..')), sources.join(', '));
});

test('a server whose integrations name a FIFO and the token file that way starts, loads the others, and quotes neither', { timeout: 60_000 }, async (t) => {
  const root = tmpDir(t);
  const { secret } = hostileMapComments(root, 'aa-hostile');
  writeFileSync(join(root, 'aa-hostile/platform-manifest.yaml'), MANIFEST.replace('thrower', 'hostile').replace('src/index.ts', 'src/index.js'));
  mkdirSync(join(root, 'zz-good/src'), { recursive: true });
  writeFileSync(join(root, 'zz-good/platform-manifest.yaml'), MANIFEST.replace('thrower', 'good').replace('src/index.ts', 'src/index.js'));
  writeFileSync(join(root, 'zz-good/src/index.js'), `export default { fetch: () => new Response('good') };\n`);
  const s = await inTime('start-up', startTestServer(t, { integrations_dir: root }));
  const listed = await s.api('GET', '/api/v1/integrations');
  assert.equal(listed.status, 200);
  const byName = Object.fromEntries(listed.body.integrations.map((i: { name: string; status: string }) => [i.name, i.status]));
  assert.equal(byName.hostile, 'loaded');
  assert.equal(byName.good, 'loaded');
  assert.ok(!JSON.stringify(listed.body).includes(secret.slice(4)), 'not in the integrations list');
  assert.ok(!JSON.stringify(s.logs).includes(secret.slice(4)), 'not in the server log');
});

test("a map's sources naming host files, absolute or above the folder, or holding control characters, never rewrite a frame", async (t) => {
  const dir = tmpDir(t);
  mkdirSync(join(dir, 'src'));
  const files = {
    'up.js': '../../../../etc/passwd',
    'abs.js': '/etc/shadow',
    'url.js': 'file:///etc/hosts',
    'esc.js': 'src/\u001b]0;owned\u0007x.ts',
    'ok.js': '../lib/ok.ts',
  };
  for (const [file, source] of Object.entries(files))
    writeFileSync(
      join(dir, 'src', file),
      `export function ${file.slice(0, -3)}() {\n  throw new Error('${file}');\n}\n//# sourceMappingURL=${dataMap({ version: 3, sources: [source], names: [], mappings: 'AAAA;AACA' })}\n`,
    );
  writeFileSync(
    join(dir, 'src/index.js'),
    `${Object.keys(files)
      .map((f) => `import { ${f.slice(0, -3)} } from './${f}';`)
      .join('\n')}\nexport default { fetch: () => { ${Object.keys(files)
      .map((f) => `${f.slice(0, -3)}();`)
      .join(' ')} } };\n`,
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
  writeFileSync(
    join(dir, 'src/index.js'),
    `export default { fetch: () => new Response('ok') };\n//# sourceMappingURL=${dataMap({ version: 3, sources, names: [], mappings: 'AAAA' })}\n`,
  );
  const r = await bundleScript({ dir, entry: join(dir, 'src/index.js') });
  assert.ok(r.bundle, JSON.stringify(r.problems));
  assert.ok(r.bundle.sourceMap === undefined, `no map kept (${r.bundle.sourceMap?.length} characters)`);
  assert.ok(r.bundle.code.length < 200);
  const warning = r.problems.find((p) => p.severity === 'warning' && /source map/.test(p.message));
  assert.ok(warning, JSON.stringify(r.problems));
});

test('a map over 1 MB is not kept, however large the bundle: the error is answered and its frames stay as V8 wrote them', { timeout: 60_000 }, async (t) => {
  const dir = tmpDir(t);
  mkdirSync(join(dir, 'big/src'), { recursive: true });
  writeFileSync(join(dir, 'big/platform-manifest.yaml'), MANIFEST.replace('thrower', 'big').replace('src/index.ts', 'src/index.js'));
  // A 300 kB bundle whose map, 1.1 MB of long source names, is under four times its code.
  const sources = Array.from({ length: 1100 }, (_, i) => `src/${String(i).padStart(4, '0')}-${'y'.repeat(1000)}.ts`);
  writeFileSync(
    join(dir, 'big/src/index.js'),
    `export const filler = "${'x'.repeat(300_000)}";\nexport default { fetch() { throw new Error('big map'); } };\n//# sourceMappingURL=${dataMap({ version: 3, sources, names: [], mappings: 'AAAA;AACA' })}\n`,
  );
  const s = await startTestServer(t, { integrations_dir: dir });
  const loaded = capabilityOf(s.services, 'registry').get('big')!;
  assert.equal(loaded.sourceMap, undefined, `no map kept (${loaded.sourceMap?.length} characters)`);
  assert.ok(
    loaded.warnings.some((w) => /source map is 1\.\d MB, over the 1\.0 MB/.test(w.message)),
    JSON.stringify(loaded.warnings),
  );
  const inst = await s.api('POST', '/api/v1/installations', { integration: 'big' });
  const res = await fetch(`${s.url}/v1/integrations/big/installations/${inst.body.installation.id}/x`);
  assert.equal(res.status, 500);
  const record = (await s.api('GET', `/api/v1/logs/${res.headers.get('x-request-id')}`)).body;
  assert.match(record.error.stack, /big map\n\s+at Object\.fetch \(integration:big@[0-9a-f]{16}:\d+:\d+\)/, record.error.stack);
});

test('frames are mapped line by line: hundreds of throws, several on a line, each to its own place; a malformed map leaves frames alone', async (t) => {
  const dir = tmpDir(t);
  mkdirSync(join(dir, 'src'));
  const lines: string[] = ['type Id = string;'];
  for (let i = 0; i < 300; i++) {
    lines.push(`export function f${i}(id: Id): never {`, `${' '.repeat(i % 7)}  throw new Error('e${i}' + (id as string));`, '}');
    if (i % 50 === 0) lines.push(`export const g${i} = (): never => { throw new Error('a${i}'); }, h${i} = (): never => { throw new Error('b${i}'); };`);
  }
  const source = lines.join('\n') + '\n';
  writeFileSync(join(dir, 'src/many.ts'), source);
  writeFileSync(join(dir, 'src/index.ts'), `export * from './many.ts';\nexport default { fetch: () => new Response('ok') };\n`);
  const r = await bundleScript({ dir, entry: join(dir, 'src/index.ts') });
  const bundle = { name: 'many', script: { name: 'many', version: r.bundle!.version }, sourceMap: r.bundle!.sourceMap };
  const needles = [...source.matchAll(/new Error\('([abe]\d+)'/g)].map((m) => m[1]);
  assert.equal(needles.length, 312);
  for (const n of needles) {
    const frame = frameAt(r.bundle!.code, `new Error("${n}"`, 'many', r.bundle!.version);
    const at = position(source, `new Error('${n}'`);
    assert.equal(mapStackTrace(frame, bundle), `    at f (src/many.ts:${at.line}:${at.column})`, n);
  }
  const past = `    at f (integration:many@${r.bundle!.version}:99999:1)`;
  assert.equal(mapStackTrace(past, bundle), past);
  const malformed = { ...bundle, sourceMap: JSON.stringify({ version: 3, sources: ['src/a.ts'], names: [], mappings: 'AAAA;A!AA' }) };
  const second = `    at f (integration:many@${r.bundle!.version}:2:1)`;
  assert.equal(mapStackTrace(second, malformed), second);
});
