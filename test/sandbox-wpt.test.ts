/**
 * The guest's Web APIs against Web Platform Tests-style suites (test/wpt/, see its README), run
 * inside the sandbox isolate exactly as integration code runs. Each *.any.js file becomes one
 * integration: the harness, its data files, its tests, and a fetch handler answering the results.
 * Pass counts per area are printed; each area must reach its minimum.
 */
import assert from 'node:assert/strict';
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, it } from 'node:test';
import { ROOT } from './helpers/index.ts';
import { call, testSandbox } from './sandbox.helpers.ts';

const WPT = join(ROOT, 'test', 'wpt');

/** Minimum share of passing tests per area (failures are listed either way). */
const minimum: Record<string, number> = {
  url: 0.97,
  encoding: 0.97,
  'fetch/api/headers': 0.97,
  'fetch/api/request': 0.97,
  'fetch/api/response': 0.97,
  html: 0.97,
  dom: 0.97,
};

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((f) => {
    const p = join(dir, f);
    if (statSync(p).isDirectory()) return f === 'tools' ? [] : files(p);
    return f.endsWith('.any.js') ? [p] : [];
  });
}

function areaOf(file: string): string {
  const rel = relative(WPT, file);
  return Object.keys(minimum).find((a) => rel.startsWith(`${a}/`)) ?? rel.split('/')[0];
}

function scriptFor(file: string): string {
  const source = readFileSync(file, 'utf8');
  const data: Record<string, unknown> = {};
  for (const m of source.matchAll(/^\/\/ META: data=(\S+)$/gm)) {
    data[m[1].split('/').pop()!] = JSON.parse(readFileSync(join(WPT, m[1]), 'utf8'));
  }
  return [
    "import { createIntegration } from '@switchyard/runtime';",
    readFileSync(join(WPT, 'harness.js'), 'utf8'),
    `const WPT_DATA = ${JSON.stringify(data)};`,
    source,
    'export default createIntegration({ fetch: async () => Response.json(await runTests()) });',
  ].join('\n');
}

describe('Web Platform Tests subset inside the isolate', () => {
  it('passes the minimum share of each area', async (t) => {
    const sb = testSandbox(t, {
      limits: { cpu_time: 30_000, wall_time: 60_000, memory_mb: 256, response_body: 16 * 1024 * 1024, script_size: 8 * 1024 * 1024 },
    });
    const totals = new Map<string, { pass: number; total: number; failures: string[] }>();
    for (const file of files(WPT).sort()) {
      const rel = relative(WPT, file);
      const r = await call(sb, { name: `wpt-${rel.replace(/[^a-z0-9]+/gi, '-')}`, version: '1', code: scriptFor(file) });
      assert.equal(r.status, 200, `${rel}: ${r.text} ${r.error?.message ?? ''}`);
      const results = r.json() as Array<{ name: string; status: string; message?: string }>;
      const area = areaOf(file);
      const entry = totals.get(area) ?? { pass: 0, total: 0, failures: [] };
      for (const x of results) {
        entry.total++;
        if (x.status === 'PASS') entry.pass++;
        else entry.failures.push(`${rel}: ${x.name}: ${x.message}`);
      }
      totals.set(area, entry);
    }
    let pass = 0;
    let total = 0;
    for (const [area, e] of [...totals].sort()) {
      pass += e.pass;
      total += e.total;
      t.diagnostic(`${area.padEnd(20)} ${e.pass}/${e.total} passed`);
      for (const f of e.failures) t.diagnostic(`  FAIL ${f}`);
    }
    t.diagnostic(`all                  ${pass}/${total} passed`);
    for (const [area, e] of totals) {
      assert.ok(e.total > 0, `${area} ran no test`);
      assert.ok(e.pass / e.total >= (minimum[area] ?? 1), `${area}: ${e.pass}/${e.total} passed, below ${(minimum[area] ?? 1) * 100}%`);
    }
  });
});
