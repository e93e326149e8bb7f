/**
 * Property tests: random mutations of valid manifests never crash the validator, and whatever it
 * answers is well-formed (a manifest with no errors, or errors that each say file:line:col).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { parse, stringify } from 'yaml';
import { parseManifest, validateConfiguration, type ConfigurationsDef, type ManifestResult } from '../src/manifest/index.ts';
import { ROOT } from './helpers/index.ts';

const seeds = ['hello-components', 'oauth-example', 'webhook'].map((n) => readFileSync(join(ROOT, 'integrations', n, 'platform-manifest.yaml'), 'utf8'));
const env = { OAUTH_EXAMPLE_CLIENT_ID: 'id', OAUTH_EXAMPLE_CLIENT_SECRET: 's', OAUTH_EXAMPLE_PROVIDER_URL: 'https://p' };

function wellFormed(r: ManifestResult): void {
  assert.ok(Array.isArray(r.problems));
  for (const p of r.problems) {
    assert.match(p.where, /^m\.yaml:\d+:\d+$/, JSON.stringify(p));
    assert.equal(typeof p.message, 'string');
    assert.ok(p.severity === 'error' || p.severity === 'warning');
  }
  const errors = r.problems.filter((p) => p.severity === 'error');
  if (r.manifest) assert.equal(errors.length, 0);
  else assert.ok(errors.length > 0, 'no manifest and no error');
}

test('the seeds are valid', () => {
  for (const s of seeds) assert.ok(parseManifest(s, 'm.yaml', env).manifest);
});

/** Every path to a value in a JSON-like tree. */
function paths(v: unknown, prefix: (string | number)[] = []): (string | number)[][] {
  const out: (string | number)[][] = [prefix];
  if (Array.isArray(v)) v.forEach((x, i) => out.push(...paths(x, [...prefix, i])));
  else if (v && typeof v === 'object') for (const [k, x] of Object.entries(v)) out.push(...paths(x, [...prefix, k]));
  return out;
}

type Mutation = { kind: 'delete' | 'replace' | 'add'; at: number; value: unknown; key: string };

function mutate(doc: unknown, mutation: Mutation): unknown {
  // A copy of the value: fast-check hands the same `[]` and `{}` constants to every run, and adding
  // one into a tree that already holds it made the tree contain itself (a cycle this harness, not
  // any YAML, made: paths() then recursed without end).
  const m = { ...mutation, value: structuredClone(mutation.value) };
  const all = paths(doc);
  const path = all[m.at % all.length];
  if (path.length === 0) return m.kind === 'replace' ? m.value : doc;
  const parent = path.slice(0, -1).reduce<any>((o, k) => o[k], doc);
  const last = path[path.length - 1];
  if (m.kind === 'delete') {
    if (Array.isArray(parent)) parent.splice(last as number, 1);
    else delete parent[last];
  } else if (m.kind === 'replace') parent[last] = m.value;
  else {
    const target = parent[last];
    if (Array.isArray(target)) target.push(m.value);
    else if (target && typeof target === 'object') target[m.key] = m.value;
    else parent[last] = m.value;
  }
  return doc;
}

const interesting = fc.oneof(
  fc.jsonValue({ maxDepth: 3 }),
  fc.constantFrom(
    '',
    ' ',
    '/oauth',
    'https://x',
    '${{ env.NOPE }}',
    '${{ env.OAUTH_EXAMPLE_CLIENT_ID }}',
    'site:script:inject',
    'string',
    'button',
    'number',
    'boolean',
    '../x',
    'a'.repeat(3000),
    null,
    0,
    -1,
    true,
    [],
    {},
  ),
);
const mutation = fc.record({
  kind: fc.constantFrom('delete' as const, 'replace' as const, 'add' as const),
  at: fc.nat(),
  value: interesting,
  key: fc.oneof(
    fc.string({ maxLength: 12 }),
    fc.constantFrom('type', 'enum', 'default', 'required', 'properties', 'callback_url', 'button_text', '__proto__', 'constructor'),
  ),
});

test('structural mutations of valid manifests never crash the validator', () => {
  fc.assert(
    fc.property(fc.nat({ max: seeds.length - 1 }), fc.array(mutation, { minLength: 1, maxLength: 4 }), (seed, mutations) => {
      let doc = parse(seeds[seed]);
      for (const m of mutations) doc = mutate(doc, m);
      const text = stringify(doc);
      wellFormed(parseManifest(text, 'm.yaml', env));
    }),
    { numRuns: 400 },
  );
});

test('text mutations (inserted, deleted, replaced characters) never crash the validator', () => {
  const edit = fc.record({
    at: fc.nat(),
    del: fc.nat({ max: 8 }),
    insert: fc.string({ maxLength: 8, unit: fc.constantFrom(...':-[]{}&*!|>\'"%@`#,? \n\tabc$'.split('')) }),
  });
  fc.assert(
    fc.property(fc.nat({ max: seeds.length - 1 }), fc.array(edit, { minLength: 1, maxLength: 5 }), (seed, edits) => {
      let text = seeds[seed];
      for (const e of edits) {
        const at = e.at % (text.length + 1);
        text = text.slice(0, at) + e.insert + text.slice(at + e.del);
      }
      wellFormed(parseManifest(text, 'm.yaml', env));
    }),
    { numRuns: 400 },
  );
});

test('arbitrary configurations never crash validateConfiguration', () => {
  const def = parseManifest(seeds[0], 'm.yaml', env).manifest!.configurations!.account as ConfigurationsDef;
  fc.assert(
    fc.property(
      fc.oneof(
        fc.jsonValue(),
        fc.dictionary(
          fc.constantFrom('greeting', 'channel', 'style', 'step', 'oauth_credentials', 'x', 'toString', 'constructor', '__proto__', 'hasOwnProperty'),
          interesting,
        ),
      ),
      (config) => {
        const problems = validateConfiguration(def, config);
        for (const p of problems) assert.match(p.where, /^configuration(\.|$)/);
        validateConfiguration(def, config, { partial: true });
      },
    ),
    { numRuns: 300 },
  );
});
