/**
 * The registry: bundling (TypeScript, JSX, relative imports, the folder's own npm packages, the
 * runtime library left to the sandbox) and hot reload (add, change, reject, remove, rename,
 * duplicate names, missing secrets, the verify hook).
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { cpSync, mkdirSync, readFileSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { defaultConfig } from '../src/config/index.ts';
import { memoryLogger } from '../src/log/index.ts';
import {
  BUILTIN_DIR,
  BUILTIN_INTEGRATIONS,
  builtinManifest,
  bundleScript,
  createRegistry,
  type LoadedIntegration,
  type RegistryOptions,
} from '../src/registry/index.ts';
import { ROOT, tmpDir, waitFor } from './helpers/index.ts';

const limits = defaultConfig().sandbox;

function write(dir: string, files: Record<string, string>): void {
  for (const [f, content] of Object.entries(files)) {
    mkdirSync(join(dir, f, '..'), { recursive: true });
    writeFileSync(join(dir, f), content);
  }
}

function manifest(name: string, extra = ''): string {
  return `name: ${name}\ntitle: ${name}\ndescription: test\norganization: o\nvisibility: private\nscopes: []\n${extra}`;
}

const script = (marker: string) =>
  `import { createIntegration } from '@switchyard/runtime';\nexport default createIntegration({ fetch: async () => new Response(${JSON.stringify(marker)}) });\n`;

test("bundle: TypeScript, JSX, relative imports and the folder's own npm package into one ES module", async (t) => {
  const dir = tmpDir(t);
  write(dir, {
    'src/index.tsx': [
      "import { createIntegration } from '@switchyard/runtime';",
      "import shout from 'shout';",
      "import { greet } from './greet.ts';",
      'const markup = <block><button label={shout(greet("x"))} onPress={{ action: "go" }} /></block>;',
      'export default createIntegration({ fetch: async (): Promise<Response> => Response.json(markup) });',
    ].join('\n'),
    'src/greet.ts': 'export const greet = (n: string): string => `hello ${n}`;\n',
    'node_modules/shout/package.json': '{"name":"shout","main":"index.js"}',
    'node_modules/shout/index.js': 'module.exports = (s) => s.toUpperCase() + "!";',
  });
  const r = await bundleScript({ dir, entry: join(dir, 'src/index.tsx') });
  assert.deepEqual(r.problems, []);
  const code = r.bundle!.code;
  assert.match(code, /from "@switchyard\/runtime"/);
  assert.match(code, /from "@switchyard\/runtime\/jsx-runtime"/);
  assert.match(code, /toUpperCase\(\) \+ "!"/, 'the npm package is bundled in');
  assert.match(code, /hello \$\{n\}/, 'the relative import is bundled in');
  assert.doesNotMatch(code, /: string/, 'types are stripped');
  assert.doesNotMatch(code, /[^_\w]require\(/, 'no CommonJS require left');
  assert.match(r.bundle!.version, /^[0-9a-f]{16}$/);
  assert.equal((await bundleScript({ dir, entry: join(dir, 'src/index.tsx') })).bundle!.version, r.bundle!.version, 'same code, same version');

  // The bundle really is one self-contained module: it runs with only the runtime library supplied.
  const mod = await import(
    `data:text/javascript,${encodeURIComponent(
      code
        .replace(
          /import \{([^}]*)\} from "@switchyard\/runtime\/jsx-runtime";/,
          'const {$1} = { jsx: (type, props) => ({ type, ...props }), jsxs: (type, props) => ({ type, ...props }) };',
        )
        .replace(/import \{([^}]*)\} from "@switchyard\/runtime";/, 'const {$1} = { createIntegration: (d) => d };'),
    )}`
  );
  const body = await (await mod.default.fetch()).json();
  assert.deepEqual(body, { type: 'block', children: { type: 'button', label: 'HELLO X!', onPress: { action: 'go' } } });
});

test('bundle: Node modules, packages outside the folder and files outside it are refused with file:line:col', async (t) => {
  const root = tmpDir(t);
  const dir = join(root, 'integration');
  write(root, {
    'node_modules/hoisted/package.json': '{"name":"hoisted","main":"index.js"}',
    'node_modules/hoisted/index.js': 'module.exports = 1;',
    'outside.ts': 'export default 2;',
  });
  write(dir, {
    'index.ts': [
      "import fs from 'node:fs';",
      "import crypto from 'crypto';",
      "import hoisted from 'hoisted';",
      "import outside from '../outside.ts';",
      "import missing from './missing.ts';",
      'console.log(fs, crypto, hoisted, outside, missing);',
    ].join('\n'),
  });
  const r = await bundleScript({ dir, entry: join(dir, 'index.ts'), label: 'integrations/x' });
  assert.equal(r.bundle, undefined);
  const lines = r.problems.map((p) => `${p.where} ${p.message}`);
  assert.deepEqual(lines, [
    'integrations/x/index.ts:1:16 "node:fs" is a Node.js module; integration scripts run in a sandbox with Web APIs only',
    'integrations/x/index.ts:2:20 "crypto" is a Node.js module; integration scripts run in a sandbox with Web APIs only',
    'integrations/x/index.ts:3:21 package "hoisted" is not installed in the integration folder',
    'integrations/x/index.ts:4:21 "../outside.ts" is outside the integration folder',
    'integrations/x/index.ts:5:21 Could not resolve "./missing.ts"',
  ]);
  assert.equal(r.problems[2].hint, 'run `npm install hoisted` in integrations/x');
});

test('bundle: a syntax error says where; a bundle over sandbox.script_size is refused', async (t) => {
  const dir = tmpDir(t);
  write(dir, { 'a.ts': 'const x: number = ;\n', 'big.ts': `export const big = ${JSON.stringify('x'.repeat(5000))};\n` });
  const bad = await bundleScript({ dir, entry: join(dir, 'a.ts'), label: 'f' });
  assert.equal(bad.problems[0].where, 'f/a.ts:1:19');
  const big = await bundleScript({ dir, entry: join(dir, 'big.ts'), label: 'f', maxBytes: 4096 });
  assert.equal(big.bundle, undefined);
  assert.match(big.problems[0].message, /over the 4\.0 kB limit \(sandbox\.script_size\)/);
});

async function registry(t: TestContext, dir: string, over: Partial<RegistryOptions> = {}) {
  const log = memoryLogger();
  const r = await createRegistry({ dir, log, env: {}, limits, watch: true, ...over });
  t.after(() => r.close());
  const changes: Array<[string, string | undefined]> = [];
  r.onChange((name, current) => changes.push([name, current?.script?.version ?? (current ? 'manifest' : undefined)]));
  return { r, log, changes };
}

test('start: every folder loads; dot and underscore folders are parked; the shipped folder serves without its secrets', async (t) => {
  const dir = tmpDir(t);
  cpSync(join(ROOT, 'integrations'), dir, { recursive: true });
  write(dir, { '_parked/platform-manifest.yaml': manifest('parked'), '.hidden/platform-manifest.yaml': manifest('hidden'), 'README.md': 'not a folder' });
  const { r, log } = await registry(t, dir);
  assert.deepEqual(
    r.list().map((s) => [s.name, s.status]),
    [
      ['hello-components', 'loaded'],
      ['oauth-example', 'needs_configuration'],
      ['webhook', 'loaded'],
    ],
  );
  assert.ok(r.get('hello-components')?.script?.code.includes('createComponent'));
  assert.equal(r.get('webhook')?.script, undefined, 'the webhook integration has no script');
  assert.equal(r.get('oauth-example'), undefined);
  const oauth = r.state('oauth-example')!;
  assert.match(oauth.errors[0].message, /OAUTH_EXAMPLE_CLIENT_ID is not set \(secret CLIENT_ID reads it\)/);
  assert.ok(log.lines.some((l) => l.msg === 'integration needs configuration' && l.level === 'warn' && l.integration === 'oauth-example'));
});

test('hot reload: a change swaps in a new version; a broken change keeps the last good one serving', async (t) => {
  const dir = tmpDir(t);
  write(dir, { 'a/platform-manifest.yaml': manifest('a', 'script: index.ts\n'), 'a/index.ts': script('v1') });
  const { r, log, changes } = await registry(t, dir);
  const v1 = r.get('a')!.script!.version;
  assert.ok(r.get('a')!.script!.code.includes('"v1"'));

  writeFileSync(join(dir, 'a/index.ts'), script('v2'));
  await waitFor(() => r.get('a')!.script!.version !== v1);
  const v2 = r.get('a')!.script!.version;
  assert.ok(r.get('a')!.script!.code.includes('"v2"'));
  assert.deepEqual(changes.at(-1), ['a', v2]);

  writeFileSync(join(dir, 'a/index.ts'), 'export default createIntegration({ fetch: async () => new Response( });\n');
  await waitFor(() => r.state('a')!.status === 'error');
  const s = r.state('a')!;
  assert.equal(s.current?.script?.version, v2, 'the last good version keeps serving');
  assert.equal(r.get('a')!.script!.version, v2);
  assert.match(s.errors[0].where, /a\/index\.ts:1:\d+$/);
  assert.ok(log.lines.some((l) => l.msg === 'integration change rejected; the last good version keeps serving' && l.serving === v2));

  writeFileSync(join(dir, 'a/platform-manifest.yaml'), manifest('a', 'script: index.ts\ncategories: [nope]\n'));
  writeFileSync(join(dir, 'a/index.ts'), script('v3'));
  await waitFor(() => r.state('a')!.errors.some((e) => /categories\[0\]/.test(e.message)));
  assert.equal(r.get('a')!.script!.version, v2);

  writeFileSync(join(dir, 'a/platform-manifest.yaml'), manifest('a', 'script: index.ts\n'));
  await waitFor(() => r.state('a')!.status === 'loaded');
  assert.ok(r.get('a')!.script!.code.includes('"v3"'));
  assert.deepEqual(r.state('a')!.errors, []);
});

test('hot reload: a folder added while running is served; removed, it is gone', async (t) => {
  const dir = tmpDir(t);
  const { r, changes } = await registry(t, dir);
  assert.deepEqual(r.list(), []);
  // Written beside and moved in, like `switchyard new` does; then a second one written in place.
  const staging = join(tmpDir(t), 'b');
  write(staging, { 'platform-manifest.yaml': manifest('b', 'script: src/index.ts\n'), 'src/index.ts': script('b') });
  renameSync(staging, join(dir, 'b'));
  write(dir, { 'c/platform-manifest.yaml': manifest('c') });
  await waitFor(() => r.get('b') && r.get('c'));
  assert.ok(r.get('b')!.script!.code.includes('"b"'));

  rmSync(join(dir, 'b'), { recursive: true });
  await waitFor(() => !r.get('b'));
  assert.equal(r.state('b'), undefined);
  assert.deepEqual(changes.at(-1), ['b', undefined]);
  assert.ok(r.get('c'));
});

test("hot reload: a change in a nested folder and in the folder's .env is seen", async (t) => {
  const dir = tmpDir(t);
  write(dir, {
    'a/platform-manifest.yaml': manifest('a', 'script: src/index.ts\nsecrets:\n  KEY: ${{ env.A_KEY }}\n'),
    'a/src/index.ts': "import { x } from './lib/x.ts';\nexport default x;\n",
    'a/src/lib/x.ts': 'export const x = "one";\n',
    'a/.env': 'A_KEY=first\n',
  });
  const { r } = await registry(t, dir);
  assert.deepEqual(r.get('a')!.secrets, { KEY: 'first' });
  writeFileSync(join(dir, 'a/src/lib/x.ts'), 'export const x = "two";\n');
  await waitFor(() => r.get('a')!.script!.code.includes('"two"'));
  writeFileSync(join(dir, 'a/.env'), 'A_KEY=second\n');
  await waitFor(() => r.get('a')!.secrets.KEY === 'second');
});

test('names are unique: the second folder claiming a name is an error naming both; it loads once the name is free', async (t) => {
  const dir = tmpDir(t);
  write(dir, { 'one/platform-manifest.yaml': manifest('same'), 'two/platform-manifest.yaml': manifest('same') });
  const { r } = await registry(t, dir);
  assert.equal(r.get('same')!.dir, join(dir, 'one'));
  const two = r.list().find((s) => s.dir === join(dir, 'two'))!;
  assert.equal(two.status, 'error');
  assert.match(two.errors[0].message, /name: "same" is already used by the integration in .*one; names are unique, so .*two is not loaded/);
  assert.match(two.errors[0].where, /two\/platform-manifest\.yaml:1:7$/);

  // Renaming the first frees the name: the second loads.
  writeFileSync(join(dir, 'one/platform-manifest.yaml'), manifest('first'));
  await waitFor(() => r.get('first') && r.get('same')?.dir === join(dir, 'two'));
  assert.deepEqual(
    r.list().map((s) => [s.name, s.status]),
    [
      ['first', 'loaded'],
      ['same', 'loaded'],
    ],
  );
});

test('a rename in the manifest removes the old name and serves the new one', async (t) => {
  const dir = tmpDir(t);
  write(dir, { 'x/platform-manifest.yaml': manifest('old-name') });
  const { r, changes } = await registry(t, dir);
  writeFileSync(join(dir, 'x/platform-manifest.yaml'), manifest('new-name'));
  await waitFor(() => r.get('new-name'));
  assert.equal(r.get('old-name'), undefined);
  assert.deepEqual(changes.slice(-2), [
    ['old-name', undefined],
    ['new-name', 'manifest'],
  ]);
});

test('the verify hook: a change swaps in only when its script loads; the start-up pass loads no script (isolates start on first use)', async (t) => {
  const dir = tmpDir(t);
  write(dir, { 'a/platform-manifest.yaml': manifest('a', 'script: index.ts\n'), 'a/index.ts': script('good') });
  const seen: string[] = [];
  const { r } = await registry(t, dir, {
    verify: async (s) => {
      seen.push(s.version);
      return s.code.includes('"bad"') ? 'ReferenceError: nope is not defined' : undefined;
    },
  });
  const good = r.get('a')!.script!.version;
  assert.deepEqual(seen, [], 'nothing was loaded in the sandbox at start');
  writeFileSync(join(dir, 'a/index.ts'), script('bad'));
  await waitFor(() => r.state('a')!.status === 'error');
  assert.equal(r.get('a')!.script!.version, good);
  assert.match(r.state('a')!.errors[0].message, /the script failed to load in the sandbox: ReferenceError: nope is not defined/);
  assert.match(r.state('a')!.errors[0].where, /a\/index\.ts$/);
  assert.equal(seen.length, 1);
  // A folder added once the registry runs is checked before it serves, like a change.
  write(dir, { 'b/platform-manifest.yaml': manifest('b', 'script: index.ts\n'), 'b/index.ts': script('bad') });
  await waitFor(() => r.state('b')?.status === 'error');
  assert.equal(r.get('b'), undefined);
  assert.equal(seen.length, 2);
});

test('reload() without watching re-reads every folder; close() stops following changes', async (t) => {
  const dir = tmpDir(t);
  write(dir, { 'a/platform-manifest.yaml': manifest('a') });
  const { r } = await registry(t, dir, { watch: false });
  write(dir, { 'b/platform-manifest.yaml': manifest('b') });
  rmSync(join(dir, 'a'), { recursive: true });
  await r.reload();
  assert.deepEqual(
    r.list().map((s) => s.name),
    ['b'],
  );
  await r.close();
});

test('listeners see each swap once; an unchanged save does not swap', async (t) => {
  const dir = tmpDir(t);
  write(dir, { 'a/platform-manifest.yaml': manifest('a', 'script: index.ts\n'), 'a/index.ts': script('same') });
  const { r, changes } = await registry(t, dir, { watch: false });
  const before: LoadedIntegration = r.get('a')!;
  writeFileSync(join(dir, 'a/index.ts'), script('same'));
  await r.reload();
  assert.equal(r.get('a'), before, 'the same object keeps serving');
  assert.deepEqual(changes, []);
});

test('a symlinked folder is an integration too, relative imports included; a symlink inside it still cannot reach out', async (t) => {
  const dir = tmpDir(t);
  const elsewhere = tmpDir(t);
  write(elsewhere, {
    'platform-manifest.yaml': manifest('linked', 'script: ./index.ts\n'),
    'index.ts': `import { createIntegration } from '@switchyard/runtime';\nimport { marker } from './lib.ts';\nexport default createIntegration({ fetch: async () => new Response(marker) });\n`,
    'lib.ts': `export const marker = 'linked-lib';\n`,
  });
  symlinkSync(elsewhere, join(dir, 'linked'));
  const { r } = await registry(t, dir);
  assert.ok(r.get('linked'));
  assert.equal(r.state('linked')!.status, 'loaded', JSON.stringify(r.state('linked')!.errors));
  assert.match(r.get('linked')!.script!.code, /linked-lib/);
  // A file linked in from outside the (real) folder is refused as before.
  const outside = tmpDir(t);
  write(outside, { 'secret.ts': `export const marker = 'outside';\n` });
  symlinkSync(join(outside, 'secret.ts'), join(elsewhere, 'lib.ts.out'));
  write(elsewhere, {
    'index.ts': `import { createIntegration } from '@switchyard/runtime';\nimport { marker } from './lib.ts.out';\nexport default createIntegration({ fetch: async () => new Response(marker) });\n`,
  });
  await waitFor(() => r.state('linked')?.status === 'error');
  assert.match(JSON.stringify(r.state('linked')!.errors), /outside the integration folder/);
  write(elsewhere, {
    'index.ts': `import { createIntegration } from '@switchyard/runtime';\nimport { marker } from './lib.ts';\nexport default createIntegration({ fetch: async () => new Response(marker) });\n`,
  });
  await waitFor(() => r.state('linked')?.status === 'loaded');
  writeFileSync(join(elsewhere, 'platform-manifest.yaml'), manifest('linked', 'summary: changed\n'));
  await waitFor(() => r.get('linked')?.manifest.summary === 'changed');
});

test('built-in webhook: served from no folder; a folder of that name overrides it (the log says which); broken or removed, the built-in serves', async (t) => {
  const dir = tmpDir(t);
  const builtins = BUILTIN_INTEGRATIONS.map((name) => ({ name, manifest: builtinManifest(name) }));
  const { r, log, changes } = await registry(t, dir, { builtins });
  const builtin = r.get('webhook')!;
  assert.equal(builtin.builtin, true);
  assert.equal(builtin.dir, BUILTIN_DIR);
  assert.deepEqual(builtin.manifest.configurations?.account?.required, ['webhook_url', 'event_types'], 'the shipped manifest, embedded');
  assert.deepEqual(
    r.list().map((s) => [s.name, s.status, s.dir]),
    [['webhook', 'loaded', BUILTIN_DIR]],
  );
  assert.equal(r.state('webhook')!.current, builtin);
  assert.ok(
    log.lines.some((l) => l.msg === 'built-in integration serving' && l.integration === 'webhook' && l.serving === BUILTIN_DIR),
    'the log says the built-in one serves',
  );

  // A folder named webhook overrides it.
  const own = readFileSync(join(ROOT, 'integrations/webhook/platform-manifest.yaml'), 'utf8').replace('title: Webhook', 'title: Our webhook');
  write(dir, { 'webhook/platform-manifest.yaml': own });
  await waitFor(() => r.get('webhook')!.manifest.title === 'Our webhook');
  assert.equal(r.get('webhook')!.builtin, undefined);
  assert.deepEqual(
    r.list().map((s) => [s.name, s.dir]),
    [['webhook', join(dir, 'webhook')]],
    'one entry: the folder',
  );
  assert.ok(log.lines.some((l) => l.msg === 'integration loaded' && l.integration === 'webhook' && l.overrides === 'the built-in webhook integration'));

  // Removed: the built-in serves again, and listeners hear of it.
  rmSync(join(dir, 'webhook'), { recursive: true });
  await waitFor(() => r.get('webhook')?.builtin);
  assert.deepEqual(changes.at(-1), ['webhook', 'manifest']);
  assert.ok(log.lines.some((l) => l.msg === 'integration removed; the built-in version serves again'));

  // A folder that claims the name but does not load: the built-in keeps serving, the errors show.
  write(dir, { 'webhook/platform-manifest.yaml': own.replace('visibility: public', 'visibility: everyone') });
  await waitFor(() => r.state('webhook')!.status === 'error');
  assert.equal(r.get('webhook'), builtin);
  const s = r.state('webhook')!;
  assert.equal(s.current, builtin, 'shown serving its built-in version, like a last good version');
  assert.match(s.errors[0].message, /visibility/);
  assert.ok(log.lines.some((l) => l.msg === 'integration failed to load; the built-in version keeps serving' && l.level === 'error'));
});

test('built-in webhook at start: an overriding folder and a broken one are each named in the log', async (t) => {
  const builtins = BUILTIN_INTEGRATIONS.map((name) => ({ name, manifest: builtinManifest(name) }));
  const good = tmpDir(t);
  cpSync(join(ROOT, 'integrations/webhook'), join(good, 'webhook'), { recursive: true });
  const a = await registry(t, good, { builtins });
  assert.equal(a.r.get('webhook')!.dir, join(good, 'webhook'));
  assert.ok(
    a.log.lines.some(
      (l) => l.msg === 'integration folder overrides the built-in version' && l.integration === 'webhook' && String(l.serving).endsWith('webhook'),
    ),
  );

  const broken = tmpDir(t);
  write(broken, { 'webhook/platform-manifest.yaml': 'name: webhook\n' });
  const b = await registry(t, broken, { builtins });
  assert.equal(b.r.get('webhook')!.builtin, true);
  assert.ok(b.log.lines.some((l) => l.msg === 'built-in integration serving: the folder of that name does not load' && l.level === 'warn'));
});

test("a folder of another name that claims a built-in's name is refused: it cannot take over the webhook installations", async (t) => {
  const dir = tmpDir(t);
  const builtins = BUILTIN_INTEGRATIONS.map((name) => ({ name, manifest: builtinManifest(name) }));
  // Its script would run for every webhook installation, with their configuration and tokens
  // (enough to point their webhook URL elsewhere): an override must be asked for by name.
  const claimed = readFileSync(join(ROOT, 'integrations/webhook/platform-manifest.yaml'), 'utf8').replace('categories:', 'script: index.ts\ncategories:');
  write(dir, { 'nice-charts/platform-manifest.yaml': claimed, 'nice-charts/index.ts': script('not the webhook') });
  const { r, log } = await registry(t, dir, { builtins });
  assert.equal(r.get('webhook')!.builtin, true, 'the built-in keeps serving');
  const s = r.list().find((x) => x.dir === join(dir, 'nice-charts'))!;
  assert.equal(s.status, 'error');
  assert.equal(s.current, undefined);
  assert.match(s.errors[0].where, /nice-charts\/platform-manifest\.yaml:3:\d+$/);
  assert.match(s.errors[0].message, /name: "webhook" is the built-in integration's: only a folder named webhook overrides it/);
  assert.ok(log.lines.some((l) => l.msg === 'built-in integration serving' && l.integration === 'webhook'));

  // Named so, it overrides as asked.
  write(dir, { 'webhook/platform-manifest.yaml': claimed, 'webhook/index.ts': script('our webhook') });
  await waitFor(() => r.get('webhook')?.dir === join(dir, 'webhook'));
  assert.match(r.get('webhook')!.script!.code, /our webhook/);
});
