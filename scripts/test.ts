/**
 * The test suite, whole or by subset, on Node's test runner. `npm test` runs every file; while
 * working, a subset:
 *   npm run test:unit      everything but the subsets below (no PostgreSQL, no browser, no executable)
 *   npm run test:pg        the PostgreSQL files (a throwaway server each; skipped where it is absent)
 *   npm run test:browser   the console in Debian's Chromium
 *   npm run test:exe       the single executable (builds it first)
 * Extra arguments go to the runner (`npm run test:unit -- --test-name-pattern=retry`), or name files
 * (`npm test -- test/webhooks.test.ts`). At the end, the files by duration (scripts/test-durations.ts).
 */
import { spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';

const root = new URL('..', import.meta.url).pathname;
// Node's command line runs the files in the order of their names, whatever order they are given in
// (measured: zz, m, a ran a, m, zz). Started first through its API instead, the long pole
// (test/postgres-suites.test.ts) changed nothing (332 s against 319-330 s: the run is bound by CPU,
// not by the order), and every slow file first did worse (357 s, three failures under the load).
const all = readdirSync(join(root, 'test'))
  .filter((f) => f.endsWith('.test.ts'))
  .map((f) => `test/${f}`)
  .sort();

const SUBSETS: Record<string, (file: string) => boolean> = {
  pg: (f) => f.startsWith('test/postgres-'),
  browser: (f) => /-browser\.test\.ts$/.test(f),
  exe: (f) => f === 'test/executable.test.ts' || f === 'test/deploy.test.ts',
};
SUBSETS.unit = (f) => !SUBSETS.pg(f) && !SUBSETS.browser(f) && !SUBSETS.exe(f);

const [subset, ...rest] = process.argv.slice(2);
if (subset !== 'all' && !(subset in SUBSETS)) {
  process.stderr.write(`usage: node scripts/test.ts <all|${Object.keys(SUBSETS).join('|')}> [runner options or files]\n`);
  process.exit(2);
}
const named = rest.filter((a) => !a.startsWith('-'));
const files = named.length ? named : subset === 'all' ? all : all.filter(SUBSETS[subset]);
const options = rest.filter((a) => a.startsWith('-'));

const r = spawnSync(
  process.execPath,
  [
    '--no-node-snapshot',
    // Each test file's process ends without Node's environment teardown (test/helpers/exit-at-end.ts).
    '--import',
    join(root, 'test/helpers/exit-at-end.ts'),
    '--test',
    // Four files at a time on two cores: the suites wait on real clocks and child processes much of
    // the time (measured, slowest first: 4 min 53 s at three, 4 min 24 s at four, the same CPU time).
    '--test-concurrency=4',
    '--test-reporter=spec',
    '--test-reporter-destination=stdout',
    `--test-reporter=${join(root, 'scripts/test-durations.ts')}`,
    '--test-reporter-destination=stdout',
    ...options,
    ...files,
  ],
  {
    stdio: 'inherit',
    cwd: root,
    env: { ...process.env, NODE_COMPILE_CACHE: process.env.NODE_COMPILE_CACHE ?? join(root, 'node_modules/.cache/node-compile-cache') },
  },
);
process.exit(r.status ?? 1);
