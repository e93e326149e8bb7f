import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';

/**
 * Imports run one way: a module may lean on the layers below it, never on one that leans on it.
 * This reads every static import and re-export under src/ (type-only ones too: a type drawn from
 * a module is a dependency on it), finds the import circles, and fails on any circle that is not
 * one of the known ones below, or that grew. The known ones are debts: fix them, then remove them
 * from the list (the test says when one is gone). None is left.
 */
const KNOWN_CIRCLES: string[][] = [];

const SRC = resolve(import.meta.dirname, '../src');

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return sources(path);
    return name.endsWith('.ts') && !name.endsWith('.d.ts') ? [path] : [];
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
  const found = circles(graph);
  const known = new Set(KNOWN_CIRCLES.map((c) => [...c].sort().join(' ')));
  const unknown = found.filter((c) => !known.has(c.join(' ')));
  assert.deepEqual(unknown, [], 'a new import circle (or a known one that grew): make the lower module stop importing the higher one');
  const gone = [...known].filter((k) => !found.some((c) => c.join(' ') === k));
  assert.deepEqual(gone, [], 'a known circle is gone: remove it from KNOWN_CIRCLES');
});

test('the reader counts type-only imports and re-exports, not dynamic import(); the finder finds a circle', () => {
  const a = join(SRC, 'a.ts');
  const b = join(SRC, 'b.ts');
  const c = join(SRC, 'c.ts');
  assert.deepEqual(circles(new Map([[a, [b]], [b, [c]], [c, [a]]])), [['a.ts', 'b.ts', 'c.ts']]);
  assert.deepEqual(circles(new Map([[a, [b]], [b, []]])), []);
  const text = `import type { Db } from './store/index.ts';\nexport { x } from './webhooks/policy.ts';\nconst lazy = await import('./events/index.ts');\n`;
  assert.deepEqual(importsOf(join(SRC, 'main.ts'), text), [join(SRC, 'store/index.ts'), join(SRC, 'webhooks/policy.ts')]);
});
