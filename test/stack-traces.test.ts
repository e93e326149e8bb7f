/**
 * Stack traces of integration code point at the author's TypeScript files (through the bundle's
 * source map, kept on the host), wherever they are reported: the invocation's record and its
 * `uncaught` line, what the code printed (also after the answer), the server's log line about
 * the 500, and `switchyard logs`.
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { runCli, startTestServer, tmpDir, waitFor, type TestServer } from './helpers/index.ts';
import { mapStackTrace } from '../src/runtime/stack-trace.ts';
import type { Registry } from '../src/registry/index.ts';

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
  const loaded = (s.services.registry as Registry).get('thrower')!;
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
