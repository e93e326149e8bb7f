/**
 * YAML with positions: parse a document and map a field path back to `line:col`, so every
 * validation problem can say where it is in the file.
 */
import { isAlias, isMap, isPair, isScalar, isSeq, LineCounter, parseDocument, visit, type Node } from 'yaml';
import type { Issue, Path } from './index.ts';
import { formatPath } from './index.ts';
import type { Problem } from '../errors.ts';

export interface YamlSource {
  value: unknown;
  /** Syntax errors, already as problems with positions. */
  syntaxProblems: Problem[];
  /** `file:line:col` of the node at `path` (or of its key), falling back to the nearest parent. */
  locate(path: Path, atKey?: boolean): { line: number; col: number };
  /** Turn schema issues into problems that say file, line, column and field path. */
  toProblems(issues: Issue[]): Problem[];
}

/** The path of the first value that contains itself (what a recursive alias builds), if any. */
function findCycle(root: unknown): Path | undefined {
  const open = new Set<object>();
  const visit = (v: unknown, path: Path): Path | undefined => {
    if (v === null || typeof v !== 'object') return undefined;
    if (open.has(v)) return path;
    open.add(v);
    const entries: [string | number, unknown][] = Array.isArray(v) ? v.map((x, i) => [i, x]) : Object.entries(v);
    for (const [k, x] of entries) {
      const found = visit(x, [...path, k]);
      if (found) return found;
    }
    open.delete(v);
    return undefined;
  };
  return visit(root, []);
}

export function parseYaml(text: string, file: string): YamlSource {
  const lineCounter = new LineCounter();
  const doc = parseDocument(text, { lineCounter, prettyErrors: false, uniqueKeys: true });
  const syntaxProblems: Problem[] = doc.errors.map((e) => {
    const pos = lineCounter.linePos(e.pos[0]);
    return { where: `${file}:${pos.line}:${pos.col}`, message: e.message.split('\n')[0], hint: 'fix the YAML syntax' };
  });
  // A map or list used as a key (`? [a]: b`, `{a: b}: c`) has no JSON form: the yaml library would
  // stringify it with a process warning. No schema of ours takes one.
  if (!syntaxProblems.length)
    visit(doc, {
      Pair(_, pair) {
        const raw = pair.key as Node | null;
        const key = isAlias(raw) ? raw.resolve(doc) : raw;
        const plain = key === null || (isScalar(key) && (key.value === null || typeof key.value !== 'object'));
        if (!plain || (isAlias(raw) && !key)) {
          const pos = lineCounter.linePos(raw?.range?.[0] ?? 0);
          syntaxProblems.push({
            where: `${file}:${pos.line}:${pos.col}`,
            message: 'a key must be a plain value (a word or a number), not a map, a list or binary data',
            hint: 'write the key as a plain word',
          });
          return visit.BREAK;
        }
      },
    });
  let value: unknown;
  if (!syntaxProblems.length) {
    try {
      value = doc.toJS({ maxAliasCount: 100 });
    } catch (e) {
      // The yaml library throws while building values: an alias whose anchor is not set, or an
      // expansion past maxAliasCount (a "billion laughs").
      const message = (e as Error).message.split('\n')[0];
      const alias = /alias.*?: (\S+)\s*$/i.exec(message)?.[1];
      const at = alias ? text.indexOf(`*${alias}`) : -1;
      const pos = lineCounter.linePos(Math.max(0, at));
      syntaxProblems.push(
        /excessive alias count/i.test(message)
          ? { where: `${file}:1:1`, message: `too many aliases: ${message}`, hint: 'write the values out instead of nesting aliases' }
          : { where: `${file}:${pos.line}:${pos.col}`, message, hint: 'fix the YAML syntax' },
      );
    }
    const cycle = syntaxProblems.length ? undefined : findCycle(value);
    if (cycle) {
      const { line, col } = lineCounter.linePos(aliasOffset(doc.contents, cycle) ?? 0);
      syntaxProblems.push({
        where: `${file}:${line}:${col}`,
        message: `${formatPath(cycle)}: an alias refers to a node that contains it (a recursive alias)`,
        hint: 'an alias (*name) may only repeat a node defined before it and outside it',
      });
      value = undefined;
    }
  }

  function aliasOffset(root: unknown, path: Path): number | undefined {
    let node = root as Node | null;
    let offset: number | undefined;
    for (const seg of path) {
      if (isMap(node)) {
        const pair = node.items.find((p) => isPair(p) && isScalar(p.key) && String(p.key.value) === String(seg));
        node = (pair?.value as Node | null) ?? null;
      } else if (isSeq(node) && typeof seg === 'number') node = (node.items[seg] as Node | undefined) ?? null;
      else break;
      offset = node?.range?.[0] ?? offset;
    }
    return offset;
  }

  function locate(path: Path, atKey = false): { line: number; col: number } {
    let node: unknown = doc.contents;
    let offset = (node as Node | null)?.range?.[0] ?? 0;
    for (let i = 0; i < path.length; i++) {
      const seg = path[i];
      const last = i === path.length - 1;
      if (isMap(node)) {
        const pair = node.items.find((p) => isPair(p) && isScalar(p.key) && String(p.key.value) === String(seg));
        if (!pair) break;
        const keyNode = pair.key as Node;
        if (last && atKey) {
          offset = keyNode.range?.[0] ?? offset;
          break;
        }
        const valueNode = pair.value as Node | null;
        offset = valueNode?.range?.[0] ?? keyNode.range?.[0] ?? offset;
        node = valueNode;
      } else if (isSeq(node) && typeof seg === 'number') {
        const item = node.items[seg] as Node | undefined;
        if (!item) break;
        offset = item.range?.[0] ?? offset;
        node = item;
      } else break;
    }
    return lineCounter.linePos(offset);
  }

  return {
    value,
    syntaxProblems,
    locate,
    toProblems(issues) {
      return issues.map((iss) => {
        const { line, col } = locate(iss.path, iss.atKey);
        const field = formatPath(iss.path);
        return {
          where: `${file}:${line}:${col}`,
          message: `${field}: ${iss.message}`,
          ...(iss.hint ? { hint: iss.hint } : {}),
        };
      });
    },
  };
}
