/** `switchyard deliveries list|show|retry|replay`, run as real processes against a real server. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT, tmpDir } from './helpers/index.ts';
import type { Delivery, DeliveryDetail } from '../src/webhooks/index.ts';
import { inspectionServer, receiver } from './inspection-support.ts';

// One retry 50 ms after the first attempt keeps failures fast.
const fast = { webhooks: { max_retries: 1, base_delay: 50 } };

test('deliveries list: filters, cursor pages, an aligned table and --json', async (t) => {
  const s = await inspectionServer(t, fast);
  const ok = await receiver(t, 200);
  const bad = await receiver(t, 500);
  const good = await s.subscribe(ok.url, ['site_view']);
  const failing = await s.subscribe(bad.url, ['site_view']);
  const ids: string[] = [];
  for (let i = 0; i < 3; i++) ids.push(...(await s.send('site_view')).deliveries.map((d) => d.id));
  for (const id of ids) await s.settled(id);

  const all = await s.cliJson<{ deliveries: Delivery[]; nextCursor: string | null }>(['deliveries', 'list']);
  assert.equal(all.deliveries.length, 6);
  assert.equal(all.nextCursor, null);
  assert.deepEqual(new Set(all.deliveries.map((d) => d.id)), new Set(ids));
  assert.deepEqual(Object.keys(all.deliveries[0]).sort(), [
    'attemptCount',
    'completedAt',
    'createdAt',
    'eventId',
    'eventType',
    'held',
    'id',
    'installationId',
    'lastError',
    'lastStatus',
    'maxAttempts',
    'nextAttemptAt',
    'scheduledAttempts',
    'status',
    'updatedAt',
    'url',
  ]);

  const failed = await s.cliJson<{ deliveries: Delivery[] }>(['deliveries', 'list', '--status', 'failed']);
  assert.equal(failed.deliveries.length, 3);
  assert.ok(failed.deliveries.every((d) => d.status === 'failed' && d.installationId === failing && d.attemptCount === 2 && d.lastStatus === 500));
  const mine = await s.cliJson<{ deliveries: Delivery[] }>(['deliveries', 'list', '--installation', good]);
  assert.ok(mine.deliveries.length === 3 && mine.deliveries.every((d) => d.status === 'delivered'));
  assert.equal((await s.cliJson(['deliveries', 'list', '--type', 'page_feedback'])).deliveries.length, 0);
  assert.equal((await s.cliJson(['deliveries', 'list', '--since', '15m'])).deliveries.length, 6);
  assert.equal((await s.cliJson(['deliveries', 'list', '--since', '2020-01-01T00:00:00Z', '--until', '2020-01-02T00:00:00Z'])).deliveries.length, 0);

  // Cursor pages: every delivery once, newest first, and the last page says there is no more.
  const seen: string[] = [];
  let cursor: string | null = null;
  do {
    const page: { deliveries: Delivery[]; nextCursor: string | null } = await s.cliJson([
      'deliveries',
      'list',
      '--limit',
      '4',
      ...(cursor ? ['--cursor', cursor] : []),
    ]);
    seen.push(...page.deliveries.map((d) => d.id));
    cursor = page.nextCursor;
  } while (cursor);
  assert.deepEqual(
    seen,
    all.deliveries.map((d) => d.id),
  );

  const people = await s.cli(['deliveries', 'list', '--limit', '4']);
  assert.equal(people.code, 0, people.stderr);
  const lines = people.stdout.trimEnd().split('\n');
  assert.match(lines[0], /^CREATED\s+DELIVERY\s+SOURCE EVENT\s+TYPE\s+INSTALLATION\s+STATUS\s+ATTEMPTS\s+SCHEDULE\s+LAST\s+NEXT ATTEMPT$/);
  const col = lines[0].indexOf('STATUS');
  for (const row of lines.slice(1, 5)) assert.match(row.slice(col), /^(delivered|failed) /, `STATUS column aligned in:\n${people.stdout}`);
  assert.match(lines[5], /^next page: --cursor \d+$/);
  assert.doesNotMatch(people.stdout, /\x1b\[/, 'no colour when stdout is not a terminal');

  for (const [args, where] of [
    [['--status', 'lost'], /--status must be one of pending, retrying, held, delivered, failed, cancelled, got "lost"/],
    [['--since', 'yesterday'], /--since must be a duration ago \(15m, 2h, 7d\) or a date-time/],
    [['--limit', '0'], /--limit must be a whole number from 1 to 500/],
    [['--cursor', 'abc'], /--cursor must be the next cursor/],
  ] as const) {
    const r = await s.cli(['deliveries', 'list', ...args]);
    assert.equal(r.code, 2, `${args.join(' ')}: ${r.stderr}`);
    assert.match(r.stderr, where);
  }
});

test('deliveries show: payload, signature header and every attempt; retry makes a manual attempt now', async (t) => {
  const s = await inspectionServer(t, fast);
  const bad = await receiver(t, 500);
  await s.subscribe(bad.url, ['page_feedback']);
  const [d1, d2] = [(await s.send('page_feedback')).deliveries[0].id, (await s.send('page_feedback')).deliveries[0].id];
  await s.settled(d1);
  await s.settled(d2);

  const shown = await s.cli(['deliveries', 'show', d1]);
  assert.equal(shown.code, 0, shown.stderr);
  assert.match(shown.stdout, new RegExp(`^delivery ${d1}  failed\\n`));
  assert.match(shown.stdout, /signature    X-Platform-Signature: t=\d+,v1=[0-9a-f]{64}\n/);
  // The delivery's own eventId, and the event it comes from (the body's sourceEventId).
  assert.match(shown.stdout, new RegExp(`\\n  eventId {6}${d1}\\n  source event evt_\\w+ \\(page_feedback\\)\\n`));
  assert.match(
    shown.stdout,
    new RegExp(`payload\\n\\{\\n {2}"eventId": "${d1}",\\n {2}"type": "page_feedback",\\n {2}"installationId": "inst_\\w+",\\n {2}"sourceEventId": "evt_`),
  );
  assert.match(shown.stdout, /"type": "page_feedback"/);
  assert.match(
    shown.stdout,
    /#\s+TIME\s+TRIGGER\s+RESULT\s+DURATION\s+OUTCOME\s+NEXT ATTEMPT\n1\s+\S+Z\s+auto\s+500\s+[\d.]+ ms\s+retry\s+\S+Z\n2\s+\S+Z\s+auto\s+500\s+[\d.]+ ms\s+failed\s*\n/,
  );
  assert.match(shown.stdout, /attempts {5}2 in all; 2 of 2 automatic in this schedule\n/);
  assert.match(shown.stdout, /error {5}HTTP 500: server error\n {2}response {2}\{"status":500\}/);
  const detail = await s.cliJson<DeliveryDetail>(['deliveries', 'show', d1]);
  assert.equal(detail.attempts.length, 2);
  assert.equal(detail.attempts[0].nextAttemptAt !== null, true);
  assert.equal(detail.signatureHeader, detail.attempts[1].signatureHeader);

  // The receiver still fails: the manual attempt is recorded, and the command exits 1.
  const stillBad = await s.cli(['deliveries', 'retry', d2]);
  assert.equal(stillBad.code, 1);
  assert.match(stillBad.stdout, /attempt #3 \(manual\): 500 in [\d.]+ ms, failed; delivery \S+ is failed/);
  bad.answer = 200;
  const fixed = await s.cli(['deliveries', 'retry', d1]);
  assert.equal(fixed.code, 0, fixed.stderr);
  assert.match(fixed.stdout, /attempt #3 \(manual\): 200 in [\d.]+ ms, success; delivery \S+ is delivered/);
  const after = await s.cliJson<DeliveryDetail>(['deliveries', 'show', d1]);
  assert.equal(after.status, 'delivered');
  assert.deepEqual(
    after.attempts.map((a) => [a.manual, a.status]),
    [
      [false, 500],
      [false, 500],
      [true, 200],
    ],
  );

  const missing = await s.cli(['deliveries', 'show', 'dlv_nope']);
  assert.equal(missing.code, 1);
  assert.match(missing.stderr, /^switchyard: no delivery dlv_nope\n/);
});

test('deliveries replay --failed: every failed one once, waits for the outcome, safe to run twice', async (t) => {
  const s = await inspectionServer(t, { webhooks: { max_retries: 0 } });
  const r = await receiver(t, 503);
  const other = await receiver(t, 503);
  const inst = await s.subscribe(r.url, ['site_view']);
  await s.subscribe(other.url, ['site_view']);
  const ids: string[] = [];
  for (let i = 0; i < 4; i++) ids.push(...(await s.send('site_view')).deliveries.map((d) => d.id));
  for (const id of ids) assert.equal((await s.settled(id)).status, 'failed');

  const noFlag = await s.cli(['deliveries', 'replay', '--since', '1h']);
  assert.equal(noFlag.code, 2);
  assert.match(noFlag.stderr, /replay needs a delivery id, --failed or --status delivered/);

  // Only this installation's four; the receiver now answers 200.
  r.answer = 200;
  const first = await s.cli(['deliveries', 'replay', '--failed', '--since', '1h', '--installation', inst]);
  assert.equal(first.code, 0, first.stderr);
  assert.equal(first.stdout, 'replayed 4 deliveries: 4 delivered, 0 failed again\n');
  assert.doesNotMatch(first.stderr, /\r|\[#/, 'no progress bar when stderr is not a terminal');
  assert.equal(r.answered.get(200), 4);

  const again = await s.cli(['deliveries', 'replay', '--failed', '--since', '1h', '--installation', inst]);
  assert.equal(again.code, 0, again.stderr);
  assert.equal(again.stdout, 'no failed deliveries to replay\n');
  assert.equal(r.answered.get(200), 4, 'nothing was sent twice');

  // The other installation still fails: replayed, failed again, exit 1; --json reports the tally.
  const rest = await s.cli(['deliveries', 'replay', '--failed', '--since', '1h', '--json']);
  assert.equal(rest.code, 1, rest.stderr);
  const tally = JSON.parse(rest.stdout);
  assert.equal(tally.replayed, 4);
  assert.equal(tally.delivered, 0);
  assert.equal(tally.failed, 4);
  assert.equal(tally.pending, 0);
  assert.equal(other.answered.get(503), 8);

  const noWait = await s.cli(['deliveries', 'replay', '--failed', '--since', '1h', '--no-wait']);
  assert.equal(noWait.code, 0, noWait.stderr);
  assert.equal(noWait.stdout, 're-enqueued 4 failed deliveries\n');
});

test('deliveries replay <id> sends one delivery again; --status delivered replays delivered ones, --since optional; attempts keep counting', async (t) => {
  const s = await inspectionServer(t, { webhooks: { max_retries: 0 } });
  const r = await receiver(t, 503);
  const ok = await receiver(t, 200);
  const failing = await s.subscribe(r.url, ['site_view']);
  const fine = await s.subscribe(ok.url, ['page_feedback']);
  const [bad] = (await s.send('site_view')).deliveries;
  const [good] = (await s.send('page_feedback')).deliveries;
  assert.equal((await s.settled(bad.id)).status, 'failed');
  assert.equal((await s.settled(good.id)).status, 'delivered');

  // One by id: it goes back to the queue, the command waits for its outcome.
  const again = await s.cli(['deliveries', 'replay', bad.id]);
  assert.equal(again.code, 1, again.stderr);
  assert.equal(again.stdout, `replayed ${bad.id}: failed again\n`);
  r.answer = 200;
  const fixed = await s.cli(['deliveries', 'replay', bad.id]);
  assert.equal(fixed.code, 0, fixed.stderr);
  assert.equal(fixed.stdout, `replayed ${bad.id}: delivered\n`);
  const shown = await s.cliJson<DeliveryDetail>(['deliveries', 'show', bad.id]);
  assert.deepEqual(
    shown.attempts.map((a) => [a.number, a.status, a.outcome]),
    [
      [1, 503, 'failed'],
      [2, 503, 'failed'],
      [3, 200, 'success'],
    ],
  );
  assert.deepEqual([shown.attemptCount, shown.scheduledAttempts], [3, 1], 'every attempt counts, across replays; the schedule is the last one');
  const listed = await s.cli(['deliveries', 'list', '--installation', failing]);
  assert.match(listed.stdout, /delivered\s+3\s+1\/1\s+200\s/);

  // Delivered ones too, with no --since (every one), and only those of the status asked for.
  const delivered = await s.cliJson<{ replayed: number; deliveries: string[]; delivered: number; failed: number }>([
    'deliveries',
    'replay',
    '--status',
    'delivered',
    '--installation',
    fine,
  ]);
  assert.deepEqual([delivered.replayed, delivered.deliveries, delivered.delivered, delivered.failed], [1, [good.id], 1, 0]);
  assert.equal(ok.answered.get(200), 2, 'sent again');
  const none = await s.cli(['deliveries', 'replay', '--failed']);
  assert.equal(none.stdout, 'no failed deliveries to replay\n');

  for (const [args, code, message] of [
    [['deliveries', 'replay', good.id, '--failed'], 2, /give one delivery id, or a selection/],
    [['deliveries', 'replay', '--status', 'pending'], 2, /--status must be failed or delivered, got "pending"/],
    [['deliveries', 'replay', '--failed', '--status', 'delivered'], 2, /--failed and --status delivered disagree/],
    [['deliveries', 'replay', 'dlv_nope'], 1, /no delivery dlv_nope/],
  ] as const) {
    const res = await s.cli([...args]);
    assert.equal(res.code, code, `${args.join(' ')}: ${res.stderr}`);
    assert.match(res.stderr, message);
  }
  // A queued delivery (here held by a pause) is not replayed: it will be sent anyway.
  assert.equal((await s.api('POST', `/api/v1/installations/${failing}/pause`)).status, 200);
  const [held] = (await s.send('site_view')).deliveries;
  const queued = await s.api('POST', `/api/v1/deliveries/${held.id}/replay`);
  assert.equal(queued.status, 409);
  assert.match(queued.body.error.message, /is still queued/);
  const byApi = await s.api('POST', '/api/v1/deliveries/replay', { status: 'cancelled' });
  assert.equal(byApi.status, 400);
  assert.equal(byApi.body.error.where, 'status');
});

/** Run the CLI on a pseudo-terminal (util-linux `script`): stdout and stderr are both a TTY. */
function runOnTerminal(args: string[], env: NodeJS.ProcessEnv): Promise<{ code: number | null; output: string }> {
  const quote = (a: string) => `'${a.replace(/'/g, `'\\''`)}'`;
  const command = [process.execPath, '--no-node-snapshot', join(ROOT, 'src/main.ts'), ...args].map(quote).join(' ');
  return new Promise((resolve, reject) => {
    const child = spawn('script', ['-q', '-e', '-c', command, '/dev/null'], {
      env: { ...process.env, TERM: 'xterm', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (d) => (output += d));
    child.stderr.on('data', (d) => (output += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, output }));
  });
}

test('on a terminal: colour unless NO_COLOR, and replay draws a progress bar', {
  // (How the CLI draws on a terminal is the same on either engine: not again on PostgreSQL.)
  skip: (!existsSync('/usr/bin/script') && 'needs util-linux script') || (!!process.env.SWITCHYARD_TEST_PG_URL && 'drawing only: run on SQLite'),
}, async (t) => {
  const s = await inspectionServer(t, { webhooks: { max_retries: 0 } });
  const r = await receiver(t, 500);
  await s.subscribe(r.url, ['site_view']);
  for (let i = 0; i < 3; i++) await s.settled((await s.send('site_view')).deliveries[0].id);
  const env = { ...s.env, NO_COLOR: '' };

  const coloured = await runOnTerminal(['deliveries', 'list'], env);
  assert.equal(coloured.code, 0, coloured.output);
  assert.match(coloured.output, /\x1b\[31mfailed\x1b\[0m/);
  const plain = await runOnTerminal(['deliveries', 'list'], { ...env, NO_COLOR: '1' });
  assert.doesNotMatch(plain.output, /\x1b\[3\dm/);

  r.answer = 200;
  const replayed = await runOnTerminal(['deliveries', 'replay', '--failed', '--since', '1h'], { ...env, NO_COLOR: '1' });
  assert.equal(replayed.code, 0, replayed.output);
  assert.match(replayed.output, /\r\x1b\[2Kreplaying \[-{24}\] 0\/3/);
  assert.match(replayed.output, /\r\x1b\[2Kreplaying \[#{24}\] 3\/3  delivered 3  failed 0/);
  assert.match(replayed.output, /replayed 3 deliveries: 3 delivered, 0 failed again/);
});

test("deliveries list --endpoint (online and --offline) and replay --dry-run --endpoint --type: the CLI reaches the console's filters", async (t) => {
  const s = await inspectionServer(t, { webhooks: { max_retries: 0 } });
  const a = await receiver(t, 503);
  const b = await receiver(t, 503);
  await s.subscribe(a.url, ['site_view', 'page_feedback']);
  await s.subscribe(b.url, ['site_view']);
  const ids: string[] = [];
  for (let i = 0; i < 3; i++) ids.push(...(await s.send('site_view')).deliveries.map((d: { id: string }) => d.id));
  ids.push(...(await s.send('page_feedback')).deliveries.map((d: { id: string }) => d.id));
  for (const id of ids) assert.equal((await s.settled(id)).status, 'failed');
  const origin = new URL(a.url).origin;

  const config = join(tmpDir(t), 'config.yaml');
  writeFileSync(config, `${s.config.store ? `store: ${s.config.store}\n` : ''}data_dir: ${s.config.data_dir}\n`);
  for (const extra of [[], ['--offline', '--config', config]]) {
    const listed = await s.cliJson(['deliveries', 'list', '--endpoint', `${a.url}/ignored/path`, ...extra]);
    assert.equal(listed.deliveries.length, 4, `${extra.join(' ')}: the endpoint's four, whatever path is given`);
  }
  const bad = await s.cli(['deliveries', 'list', '--endpoint', 'ftp://x']);
  assert.notEqual(bad.code, 0);
  assert.match(bad.stderr, /endpoint must be an http\(s\) origin/);

  const dry = await s.cliJson(['deliveries', 'replay', '--failed', '--endpoint', origin, '--type', 'site_view', '--dry-run']);
  assert.equal(dry.matched, 3);
  assert.equal(a.answered.get(503), 4, 'a dry run sends nothing');
  const human = await s.cli(['deliveries', 'replay', '--failed', '--endpoint', origin, '--dry-run']);
  assert.match(human.stdout, /^a replay would take 4 failed deliveries; nothing was changed\n/);
  const listedAfter = await s.cliJson(['deliveries', 'list', '--status', 'failed']);
  assert.equal(listedAfter.deliveries.length, 7, 'every failed delivery is still failed');
});

test("a replay goes to the installation's URL now, even once it no longer takes that event type", async (t) => {
  const s = await inspectionServer(t, { webhooks: { max_retries: 0 } });
  const old = await receiver(t, 503);
  const now = await receiver(t, 200);
  const inst = await s.subscribe(old.url, ['site_view']);
  const [d] = (await s.send('site_view')).deliveries as Array<{ id: string }>;
  assert.equal((await s.settled(d.id)).status, 'failed');
  const moved = await s.api('PATCH', `/api/v1/installations/${inst}`, { configuration: { webhook_url: now.url, event_types: 'page_feedback' } });
  assert.equal(moved.status, 200, JSON.stringify(moved.body));
  const r = await s.cli(['deliveries', 'replay', d.id]);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(now.answered.get(200), 1, 'sent to the URL the installation has now');
  assert.equal(old.answered.get(503), 1, 'the old URL saw only the first attempt');
});
