/**
 * The store, queue and API suites again, on PostgreSQL: a throwaway server (helpers/postgres.ts)
 * and SWITCHYARD_TEST_PG_URL, which gives every test configuration a database of its own there
 * (helpers/index.ts). The same assertions, the other engine. Skipped where PostgreSQL is absent.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { adminSql, postgresFor } from './helpers/postgres.ts';
import { ROOT, tmpDir } from './helpers/index.ts';
import { connectStore } from '../src/store/index.ts';
import { allMigrations } from '../src/server/migrations.ts';

const TEMPLATE = 'migrated_template';

/** Run in the order of their names (Node's command line sorts the files it is given). */
export const SUITES_ON_POSTGRES = [
  'test/webhooks-delivery.test.ts',
  'test/inspection-deliveries.test.ts',
  'test/inspection-events.test.ts',
  'test/inspection-live.test.ts',
  'test/visibility.test.ts',
  'test/fuzz.test.ts',
  'test/runtime-logs.test.ts',
  'test/handler-runs.test.ts',
  'test/webhooks-held.test.ts',
  'test/webhooks-ingest-lease.test.ts',
  'test/webhooks-standard.test.ts',
  'test/retention.test.ts',
  'test/fanout.test.ts',
  'test/invocation-records.test.ts',
  'test/generations.test.ts',
  'test/oauth.test.ts',
  'test/events.test.ts',
  'test/webhooks.test.ts',
  'test/webhooks-outcomes.test.ts',
  'test/webhooks-event-ids.test.ts',
  'test/webhooks-statements.test.ts',
  'test/store-database.test.ts',
  'test/leased-queue.test.ts',
];

/**
 * Two at a time: each test has a database of its own on the one server. (One at a time made this
 * file the suite's long pole; the waits two at a time once left short under CI's load were fixed
 * where they came from: a LISTEN not yet in effect, a retry already due when recorded.)
 */
const INNER_CONCURRENCY = 2;

test('the store, queue and API suites pass on PostgreSQL too', { timeout: 600_000 }, async (t) => {
  const pg = await postgresFor(t);
  if (!pg) return;
  // Every test's database is a copy of one the migrations brought up to date here, once: 171 tests
  // each running every module's migrations was ~130 ms of DDL apiece.
  adminSql(pg.url, `CREATE DATABASE ${TEMPLATE}`);
  const template = new URL(pg.url);
  template.pathname = `/${TEMPLATE}`;
  const dir = tmpDir(t);
  await (await connectStore(dir, { url: template.toString(), migrations: allMigrations() })).close();
  const child = spawn(
    process.execPath,
    [
      '--no-node-snapshot',
      '--test',
      `--test-concurrency=${INNER_CONCURRENCY}`,
      '--test-reporter=spec',
      '--test-reporter-destination=stdout',
      `--test-reporter=${ROOT}/scripts/test-durations.ts`,
      '--test-reporter-destination=stdout',
      ...SUITES_ON_POSTGRES,
    ],
    {
      cwd: ROOT,
      // Without NODE_TEST_CONTEXT: with it, the inner runner reports to this one in its wire format.
      env: { ...withoutTestContext(process.env), SWITCHYARD_TEST_PG_URL: pg.url, SWITCHYARD_TEST_PG_TEMPLATE: TEMPLATE },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (out += d));
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  const summary = out.split('\n').filter((l) => /^ℹ (tests|pass|fail|skipped)/.test(l));
  t.diagnostic(`on PostgreSQL ${pg.version}: ${summary.join(', ')}`);
  const durations = out.indexOf('test files by duration');
  if (durations >= 0) t.diagnostic(out.slice(durations).split('\n\ntests:')[0].trim());
  const failures = out.slice(out.indexOf('✖ failing tests:') >= 0 ? out.indexOf('✖ failing tests:') : -6000);
  assert.equal(code, 0, `the suites failed on PostgreSQL:\n${failures.slice(0, 12000)}`);
  assert.match(summary.join(' '), /ℹ fail 0/);
});

function withoutTestContext(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const { NODE_TEST_CONTEXT: _, ...rest } = env;
  return rest;
}
