import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';

/**
 * Imports run one way: a module may lean on the layers below it, never on one that leans on it.
 * This reads every static import and re-export under src/, in .ts and .tsx files (the console's
 * browser code is .tsx) and type-only ones too (a type drawn from
 * a module is a dependency on it), finds the import circles, and fails on any circle that is not
 * one of the known ones below, or that grew. The known ones are debts: fix them, then remove them
 * from the list (the test says when one is gone). None is left. It also checks the layering: the
 * low layers (LOW_LAYERS) never import a module or the composition root, the module contract
 * (src/module/) imports nothing above the low layers, nothing but the composition root imports
 * src/server/, and the guest library imports nothing of the host's.
 */
const KNOWN_CIRCLES: string[][] = [];

const SRC = resolve(import.meta.dirname, '../src');

/**
 * The low layers: plumbing every module may use, that knows no module. A file in one of them imports
 * only files in these (and anything outside src/: packages, package.json). The feature folders and
 * the composition root (src/server/, which composes the modules) sit above; src/http/ sees them only
 * through what the composition root hands it (HttpServices, OpenAPI parts, routes).
 */
const LOW_LAYERS = ['http/', 'store/', 'log/', 'schema/', 'config/', 'net/', 'native/', 'cache/', 'lib/', 'errors.ts', 'ids.ts', 'version.ts'];

const inLowLayer = (path: string) => LOW_LAYERS.some((l) => (l.endsWith('/') ? path.startsWith(l) : path === l));

/** `from -> to` for every import of a low-layer file that reaches above the low layers. */
function upwardImports(graph: Map<string, string[]>): string[] {
  const out: string[] = [];
  for (const [file, targets] of graph) {
    const from = relative(SRC, file);
    if (!inLowLayer(from)) continue;
    for (const target of targets) {
      const to = relative(SRC, target);
      if (!to.startsWith('..') && !inLowLayer(to)) out.push(`${from} -> ${to}`);
    }
  }
  return out.sort();
}

/**
 * The module contract every module imports (src/module/: Module, defineModule, Services, Capabilities,
 * the needs/provides checks) sits just above the low layers: it imports them, its own files, and of
 * src/process/ the serving process's link (ProcessLink, the type of services.processes), never a
 * module nor the composition root, so that no module reaches the others or the root through it.
 */
const CONTRACT = 'module/';
const CONTRACT_MAY_IMPORT = [CONTRACT, 'process/serving.ts'];

/** `from -> to` for every import of a contract file that reaches past the low layers and CONTRACT_MAY_IMPORT. */
function contractImportsAbove(graph: Map<string, string[]>): string[] {
  const out: string[] = [];
  for (const [file, targets] of graph) {
    const from = relative(SRC, file);
    if (!from.startsWith(CONTRACT)) continue;
    for (const target of targets) {
      const to = relative(SRC, target);
      const allowed = inLowLayer(to) || CONTRACT_MAY_IMPORT.some((a) => (a.endsWith('/') ? to.startsWith(a) : to === a));
      if (!to.startsWith('..') && !allowed) out.push(`${from} -> ${to}`);
    }
  }
  return out.sort();
}

/**
 * The composition root: src/server/ composes the modules (startServer, the module list, every
 * module's migrations), and on top of it sit the entry points that run the composed whole: main.ts,
 * `serve` (cli/serve.ts, which starts the server), the supervisor (process/supervisor.ts: it migrates
 * the store and gives back a dead serving process's webhook and handler leases), `store` and `backup`
 * (cli/store.ts, cli/backup.ts: they migrate, copy and restore a store with every module's schema).
 * Nothing else under src/ imports src/server/: what a module needs of it is handed to it as services,
 * or moves down (the module contract is src/module/, the listener and the certificate pair src/http/).
 */
const SERVER = 'server/';
const COMPOSITION_ROOT = [SERVER, 'main.ts', 'cli/serve.ts', 'cli/store.ts', 'cli/backup.ts', 'process/supervisor.ts'];

/** `from -> to` for every import of src/server/ from outside the composition root. */
function importsOfTheRoot(graph: Map<string, string[]>): string[] {
  const out: string[] = [];
  for (const [file, targets] of graph) {
    const from = relative(SRC, file);
    if (COMPOSITION_ROOT.some((r) => (r.endsWith('/') ? from.startsWith(r) : from === r))) continue;
    for (const target of targets) {
      const to = relative(SRC, target);
      if (to.startsWith(SERVER)) out.push(`${from} -> ${to}`);
    }
  }
  return out.sort();
}

/**
 * The guest library runs inside the isolate, bundled: of src/ it imports only its own files and
 * src/lib/ (plain code, held to the isolate's environment by the guest's type-check,
 * tsconfig.guest.json). A type-only import counts too: it would bring the host's modules, and
 * Node's types, into that type-check. The host may import the guest's leaf files (names.ts, fetch-result.ts).
 */
const GUEST = 'sandbox/guest/';

/** `from -> to` for every import of a guest file that reaches host code. */
function guestImportsOfHost(graph: Map<string, string[]>): string[] {
  const out: string[] = [];
  for (const [file, targets] of graph) {
    const from = relative(SRC, file);
    if (!from.startsWith(GUEST)) continue;
    for (const target of targets) {
      const to = relative(SRC, target);
      if (!to.startsWith('..') && !to.startsWith(GUEST) && !to.startsWith('lib/')) out.push(`${from} -> ${to}`);
    }
  }
  return out.sort();
}

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return sources(path);
    return (name.endsWith('.ts') || name.endsWith('.tsx')) && !name.endsWith('.d.ts') ? [path] : [];
  });
}

/** Static imports and re-exports with a relative specifier (dynamic import() is a deliberate late edge). */
function importsOf(file: string, text = readFileSync(file, 'utf8')): string[] {
  const out: string[] = [];
  for (const m of text.matchAll(/^\s*(?:import|export)\s[^;'"]*?\sfrom\s+['"](\.{1,2}\/[^'"]+)['"]/gm)) {
    const target = resolve(dirname(file), m[1]);
    if (existsSync(target)) out.push(target);
  }
  return out;
}

/** Strongly connected components with more than one file (Tarjan). */
function circles(graph: Map<string, string[]>): string[][] {
  let counter = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (v: string) => {
    index.set(v, counter);
    low.set(v, counter++);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) === index.get(v)) {
      const component: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        component.push(w);
      } while (w !== v);
      if (component.length > 1) found.push(component.map((f) => relative(SRC, f)).sort());
    }
  };
  for (const v of graph.keys()) if (!index.has(v)) visit(v);
  return found;
}

test('the import graph of src/ has no circle beyond the known ones, and none of those grew', () => {
  const graph = new Map(sources(SRC).map((f) => [f, importsOf(f)]));
  assert.ok(graph.size > 100, `read ${graph.size} files`);
  assert.ok(
    [...graph.keys()].some((f) => f.endsWith('.tsx')),
    "the console's .tsx files are read",
  );
  const found = circles(graph);
  const known = new Set(KNOWN_CIRCLES.map((c) => [...c].sort().join(' ')));
  const unknown = found.filter((c) => !known.has(c.join(' ')));
  assert.deepEqual(unknown, [], 'a new import circle (or a known one that grew): make the lower module stop importing the higher one');
  const gone = [...known].filter((k) => !found.some((c) => c.join(' ') === k));
  assert.deepEqual(gone, [], 'a known circle is gone: remove it from KNOWN_CIRCLES');
});

test('the low layers (http, store, log, schema, config, net, native, cache, lib, errors, ids, version) import no module and not the composition root', () => {
  const graph = new Map(sources(SRC).map((f) => [f, importsOf(f)]));
  for (const layer of LOW_LAYERS) assert.ok(existsSync(join(SRC, layer)), `${layer} exists (a layer renamed or gone: update LOW_LAYERS)`);
  assert.deepEqual(
    upwardImports(graph),
    [],
    'a low layer imports a module or src/server/: hand it what it needs from the composition root instead, or move the shared piece down (src/lib/)',
  );
});

test('the layer rule catches a low file importing a module or the composition root, and lets low files import each other', () => {
  const file = (path: string) => join(SRC, path);
  const graph = new Map([
    [file('http/app.ts'), [file('registry/readiness.ts'), file('store/health.ts'), file('errors.ts')]],
    [file('store/index.ts'), [file('server/migrations.ts'), file('native/index.ts')]],
    [file('version.ts'), [resolve(SRC, '../package.json')]],
    [file('webhooks/index.ts'), [file('module/contract.ts'), file('http/app.ts')]],
  ]);
  assert.deepEqual(upwardImports(graph), ['http/app.ts -> registry/readiness.ts', 'store/index.ts -> server/migrations.ts']);
});

test('nothing under src/ but the composition root imports src/server/, and the module contract imports nothing above the low layers', () => {
  const graph = new Map(sources(SRC).map((f) => [f, importsOf(f)]));
  for (const path of [CONTRACT, ...CONTRACT_MAY_IMPORT, ...COMPOSITION_ROOT])
    assert.ok(
      existsSync(join(SRC, path)),
      `${path} exists (a file of the root or the contract renamed or gone: update COMPOSITION_ROOT or CONTRACT_MAY_IMPORT)`,
    );
  assert.deepEqual(
    importsOfTheRoot(graph),
    [],
    'a file outside the composition root imports src/server/: hand it what it needs as services, or move the shared piece down (the module contract is src/module/, shared helpers src/lib/)',
  );
  assert.deepEqual(
    contractImportsAbove(graph),
    [],
    'the module contract imports a module or the composition root: every module imports the contract, so it must know none of them',
  );
});

test('the root and contract rules catch a module importing src/server/ and the contract importing a module, and let the entry points and the modules be', () => {
  const file = (path: string) => join(SRC, path);
  const graph = new Map([
    [file('webhooks/index.ts'), [file('module/contract.ts'), file('server/modules.ts')]],
    [file('process/serving.ts'), [file('server/server.ts')]],
    [file('cli/serve.ts'), [file('server/server.ts')]],
    [file('process/supervisor.ts'), [file('server/migrations.ts'), file('webhooks/queue.ts')]],
    [file('server/server.ts'), [file('server/modules.ts'), file('module/capabilities.ts')]],
    [file('module/contract.ts'), [file('http/app.ts'), file('process/serving.ts'), file('events/index.ts'), file('server/modules.ts')]],
    [file('module/capabilities.ts'), [file('module/contract.ts'), file('errors.ts'), file('process/supervisor.ts')]],
  ]);
  assert.deepEqual(importsOfTheRoot(graph), [
    'module/contract.ts -> server/modules.ts',
    'process/serving.ts -> server/server.ts',
    'webhooks/index.ts -> server/modules.ts',
  ]);
  assert.deepEqual(contractImportsAbove(graph), [
    'module/capabilities.ts -> process/supervisor.ts',
    'module/contract.ts -> events/index.ts',
    'module/contract.ts -> server/modules.ts',
  ]);
});

test('the reader counts type-only imports and re-exports, not dynamic import(); the finder finds a circle', () => {
  const a = join(SRC, 'a.ts');
  const b = join(SRC, 'b.ts');
  const c = join(SRC, 'c.ts');
  assert.deepEqual(
    circles(
      new Map([
        [a, [b]],
        [b, [c]],
        [c, [a]],
      ]),
    ),
    [['a.ts', 'b.ts', 'c.ts']],
  );
  assert.deepEqual(
    circles(
      new Map([
        [a, [b]],
        [b, []],
      ]),
    ),
    [],
  );
  const text = `import type { Db } from './store/index.ts';\nexport { x } from './webhooks/policy.ts';\nconst lazy = await import('./events/index.ts');\n`;
  assert.deepEqual(importsOf(join(SRC, 'main.ts'), text), [join(SRC, 'store/index.ts'), join(SRC, 'webhooks/policy.ts')]);
});

test("the guest library imports only its own files and src/lib/, nothing of the host's", () => {
  const graph = new Map(sources(SRC).map((f) => [f, importsOf(f)]));
  assert.ok(
    [...graph.keys()].some((f) => relative(SRC, f).startsWith(GUEST)),
    "the guest's files are read",
  );
  assert.deepEqual(
    guestImportsOfHost(graph),
    [],
    'a guest file imports host code: declare what crosses the bridge in a guest leaf file the host imports (as web/fetch-result.ts)',
  );
  const file = (path: string) => join(SRC, path);
  const made = new Map([
    [file('sandbox/guest/web/fetch.ts'), [file('sandbox/host/ops.ts'), file('sandbox/guest/web/fetch-result.ts'), file('lib/multipart.ts')]],
    [file('sandbox/host/ops.ts'), [file('sandbox/guest/web/fetch-result.ts')]],
  ]);
  assert.deepEqual(guestImportsOfHost(made), ['sandbox/guest/web/fetch.ts -> sandbox/host/ops.ts']);
});
