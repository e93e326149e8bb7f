/**
 * A reporter for Node's test runner that prints, at the end, how long each test file took (the sum
 * of its top-level tests) and the whole run, slowest first: where the suite's minutes go; then the
 * run's closing line, `tests: N passed, N failed, N skipped`. Used by
 * `npm test` beside the spec reporter:
 *   --test-reporter=spec --test-reporter-destination=stdout
 *   --test-reporter=./scripts/test-durations.ts --test-reporter-destination=stdout
 */
import { relative } from 'node:path';

type Event = { type: string; data: { file?: string; nesting?: number; skip?: unknown; todo?: unknown; details?: { duration_ms?: number; type?: string } } };

/** The slowest files shown; every one with SWITCHYARD_TEST_DURATIONS=all (for scripts/test.ts's start order). */
const SHOWN = process.env.SWITCHYARD_TEST_DURATIONS === 'all' ? Infinity : 15;

export default async function* durations(source: AsyncIterable<Event>): AsyncGenerator<string> {
  const perFile = new Map<string, number>();
  const started = performance.now();
  const count = { passed: 0, failed: 0, skipped: 0 };
  for await (const event of source) {
    if (event.type !== 'test:pass' && event.type !== 'test:fail') continue;
    // Tests as the spec reporter counts them (suites are not tests).
    if (event.data.details?.type !== 'suite') {
      if (event.type === 'test:fail') count.failed++;
      else if (event.data.skip !== undefined || event.data.todo !== undefined) count.skipped++;
      else count.passed++;
    }
    if (event.data.nesting !== 0 || !event.data.file) continue;
    const file = relative(process.cwd(), event.data.file);
    perFile.set(file, (perFile.get(file) ?? 0) + (event.data.details?.duration_ms ?? 0));
  }
  const wall = (performance.now() - started) / 1000;
  const sorted = [...perFile].sort((a, b) => b[1] - a[1]);
  const total = sorted.reduce((n, [, ms]) => n + ms, 0) / 1000;
  let out = `\ntest files by duration (${sorted.length} files, ${total.toFixed(0)} s of tests in ${wall.toFixed(0)} s wall):\n`;
  for (const [file, ms] of sorted.slice(0, SHOWN)) out += `  ${(ms / 1000).toFixed(1).padStart(7)} s  ${file}\n`;
  if (sorted.length > SHOWN) out += `  … and ${sorted.length - SHOWN} more under ${(sorted[SHOWN][1] / 1000).toFixed(1)} s each\n`;
  // The run's closing line, last.
  out += `\ntests: ${count.passed} passed, ${count.failed} failed, ${count.skipped} skipped\n`;
  yield out;
}
