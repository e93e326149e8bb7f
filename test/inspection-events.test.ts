/** `switchyard events list|show`, `switchyard logs`, and `--offline` reads of the SQLite file. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { InvocationView } from '../src/runtime/index.ts';
import { runCli, waitFor, sql } from './helpers/index.ts';
import { inspectionServer, receiver } from './inspection-support.ts';

test('events show: the payload, each installation handler with its outcome, and the deliveries it produced', async (t) => {
  // The failed handler's retry waits long enough for the two CLI runs below to see one attempt.
  const s = await inspectionServer(t, { webhooks: { base_delay: 30_000 } });
  const r = await receiver(t, 200);
  const hook = await s.subscribe(r.url, ['space_content_updated']);
  const inspector = await s.install('inspector');
  const sent = await s.send('space_content_updated', { spaceId: 'throw', revisionId: 'rev_9' });
  await s.settled(sent.deliveries[0].id);
  await waitFor(async () => (await s.api('GET', `/api/v1/logs?event=${sent.eventId}`)).body.invocations.length === 1, 10_000);

  const report = await s.cliJson(['events', 'show', sent.eventId]);
  assert.equal(report.eventId, sent.eventId);
  assert.equal(report.payload.revisionId, 'rev_9');
  assert.deepEqual(
    report.deliveries.map((d: any) => [d.installationId, d.status]),
    [[hook, 'delivered']],
  );
  assert.equal(report.handlers.length, 1);
  const h: InvocationView = report.handlers[0];
  assert.equal(h.installationId, inspector);
  assert.equal(h.integration, 'inspector');
  assert.equal(h.outcome, 'exception');
  assert.equal(h.status, 500);
  assert.match(h.error!.message, /the handler broke on purpose/);
  assert.deepEqual(h.logs.map((l) => [l.level, l.message]).slice(0, 1), [['log', 'content throw rev_9']]);

  const people = await s.cli(['events', 'show', sent.eventId]);
  assert.equal(people.code, 0, people.stderr);
  assert.match(people.stdout, new RegExp(`^event ${sent.eventId}  space_content_updated  received \\S+Z\\n\\npayload\\n\\{`));
  assert.match(people.stdout, /handler runs\nRUN\s+INSTALLATION\s+INTEGRATION\s+STATUS\s+ATTEMPTS\s+NEXT ATTEMPT\s+LAST ERROR\n/);
  assert.match(
    people.stdout,
    new RegExp(`hdl_[0-9a-f]+\\s+${inspector}\\s+inspector\\s+retrying\\s+1/4\\s+\\S+Z\\s+exception: .*the handler broke on purpose`),
  );
  assert.match(people.stdout, /handler attempts\nINSTALLATION\s+INTEGRATION\s+OUTCOME\s+STATUS\s+DURATION\s+REQUEST\s+ERROR\n/);
  assert.match(people.stdout, new RegExp(`${inspector}\\s+inspector\\s+exception\\s+500\\s+\\S+ ms\\s+req_[0-9a-f]+\\s+.*the handler broke on purpose`));
  assert.match(
    people.stdout,
    new RegExp(
      `deliveries\\nDELIVERY\\s+INSTALLATION\\s+STATUS\\s+ATTEMPTS\\s+LAST\\s+URL\\ndlv_\\S+\\s+${hook}\\s+delivered\\s+1/4\\s+200\\s+http://127\\.0\\.0\\.1`,
    ),
  );

  const quiet = await s.send('page_feedback');
  const none = await s.cli(['events', 'show', quiet.eventId]);
  assert.match(none.stdout, /no integration handles this event\n\nno webhook deliveries\n$/);

  const listed = await s.cliJson(['events', 'list', '--type', 'space_content_updated']);
  assert.deepEqual(
    listed.events.map((e: any) => e.eventId),
    [sent.eventId],
  );
  const table = await s.cli(['events', 'list']);
  assert.match(table.stdout, /^RECEIVED\s+EVENT\s+TYPE\s+INSTALLATION\s+DELIVERIES\n/);
  assert.equal(table.stdout.trimEnd().split('\n').length, 3);

  const missing = await s.cli(['events', 'show', 'evt_missing']);
  assert.equal(missing.code, 1);
  assert.match(missing.stderr, /no event evt_missing/);
});

test('logs: per invocation, what the code printed and every error or limit breach, with time and request id', async (t) => {
  // No retries of the failing handlers: one invocation per event.
  const s = await inspectionServer(t, { webhooks: { max_retries: 0 } });
  const inst = await s.install('inspector');
  // One at a time: handlers run after ingest, so events sent together may finish in any order.
  for (const [n, spaceId] of ['fine', 'throw', 'spin'].entries()) {
    await s.send('space_content_updated', { spaceId, revisionId: `rev_${spaceId}` });
    await waitFor(async () => (await s.api('GET', '/api/v1/logs')).body.invocations.length === n + 1, 15_000);
  }

  const all = await s.cli(['logs', '--integration', 'inspector']);
  assert.equal(all.code, 0, all.stderr);
  // Oldest first, as a log reads.
  const heads = all.stdout.split('\n').filter((l) => /^\S+Z  req_/.test(l));
  assert.equal(heads.length, 3);
  assert.match(heads[0], new RegExp(`^\\S+Z  req_[0-9a-f]+  inspector  ${inst}  space_content_updated  200  ok  `));
  assert.match(heads[1], /  500  exception  /);
  assert.match(heads[2], /  503  limit  /);
  assert.match(all.stdout, /content fine rev_fine\n.*warn  handled evt_/);
  assert.match(all.stdout, /exception: Error: the handler broke on purpose|exception: the handler broke on purpose/);
  assert.match(all.stdout, /limit breached \(cpu_time\): exceeded its CPU time limit/);

  const errors = await s.cliJson<{ invocations: InvocationView[] }>(['logs', '--errors']);
  assert.deepEqual(
    errors.invocations.map((i) => i.outcome),
    ['limit', 'exception'],
    'newest first in JSON',
  );
  assert.equal(errors.invocations[0].error!.limit, 'cpu_time');
  const stored = (await sql.get<{ error_limit: string }>(s.services.store, 'SELECT error_limit FROM invocations WHERE id = ?', [
    errors.invocations[0].requestId,
  ]))!;
  assert.equal(stored.error_limit, 'cpu_time', 'the breached limit is a column, not parsed from the message');
  const one = await s.cliJson<InvocationView>(['logs', '--installation', inst, '--limit', '1']);
  assert.equal((one as any).invocations.length, 1);
  assert.ok((one as any).nextCursor);
  assert.equal((await s.cliJson(['logs', '--integration', 'nobody'])).invocations.length, 0);
  const byId = (await s.api('GET', `/api/v1/logs/${errors.invocations[0].requestId}`)).body;
  assert.equal(byId.requestId, errors.invocations[0].requestId);
  assert.equal((await s.api('GET', '/api/v1/logs/req_nope')).status, 404);
  assert.equal((await s.api('GET', '/api/v1/logs?errors=maybe')).status, 400);
});

test('--offline reads the SQLite file directly, read-only, while the server runs and after it stops', async (t) => {
  const s = await inspectionServer(t, { webhooks: { max_retries: 0 } });
  const r = await receiver(t, 500);
  await s.subscribe(r.url, ['space_content_updated']);
  await s.install('inspector');
  const sent = await s.send('space_content_updated', { spaceId: 'fine', revisionId: 'rev_1' });
  const id = sent.deliveries[0].id;
  await s.settled(id);
  await waitFor(async () => (await s.api('GET', `/api/v1/logs?event=${sent.eventId}`)).body.invocations.length === 1, 10_000);

  // Config only (no URL, no token): the data directory is all --offline needs.
  const dir = (await import('./helpers/index.ts')).tmpDir(t);
  const { writeFileSync } = await import('node:fs');
  const config = `${dir}/config.yaml`;
  writeFileSync(
    config,
    `${s.config.store ? `store: ${s.config.store}\n` : ''}data_dir: ${s.config.data_dir}\nserver:\n  port: 9\nwebhooks:\n  max_retries: 0\n`,
  );
  const offline = (args: string[]) => runCli([...args, '--config', config, '--offline'], { env: { SWITCHYARD_URL: '', SWITCHYARD_ADMIN_TOKEN: '' } });

  const online = await s.cliJson(['deliveries', 'list']);
  const whileRunning = await offline(['deliveries', 'list', '--json']);
  assert.equal(whileRunning.code, 0, whileRunning.stderr);
  assert.deepEqual(JSON.parse(whileRunning.stdout), online, 'the same shape and content as the API');
  const shown = await offline(['deliveries', 'show', id, '--json']);
  assert.deepEqual(JSON.parse(shown.stdout), await s.cliJson(['deliveries', 'show', id]));
  // The server keeps writing while a reader is open: the read never blocks it.
  const more = await s.send('space_content_updated', { spaceId: 'fine', revisionId: 'rev_2' });
  await s.settled(more.deliveries[0].id);

  await s.close();
  const down = await s.cli(['deliveries', 'list']);
  assert.equal(down.code, 1);
  assert.match(
    down.stderr,
    /^switchyard: the switchyard server is not running at http:\/\/127\.0\.0\.1:\d+\nhint: .*add --offline to read the database directly\n$/,
  );

  const listed = await offline(['deliveries', 'list', '--status', 'failed', '--json']);
  assert.equal(JSON.parse(listed.stdout).deliveries.length, 2);
  const ev = await offline(['events', 'show', sent.eventId, '--json']);
  assert.equal(ev.code, 0, ev.stderr);
  const report = JSON.parse(ev.stdout);
  assert.equal(report.deliveries[0].id, id);
  assert.equal(report.handlers[0].integration, 'inspector');
  const logs = await offline(['logs']);
  assert.match(logs.stdout, /content fine rev_1\n/);
  assert.match(logs.stdout, /content fine rev_2\n/);
  const bad = await offline(['deliveries', 'list', '--since', 'soon']);
  assert.equal(bad.code, 2);
  const follow = await offline(['logs', '--follow']);
  assert.equal(follow.code, 2);
  assert.match(follow.stderr, /--follow needs the running server/);
  writeFileSync(config, `data_dir: ${dir}/empty\n`);
  const empty = await offline(['deliveries', 'list']);
  assert.equal(empty.code, 1);
  assert.match(empty.stderr, /no database at .*empty\/switchyard\.db\nhint: start the server once/);
});
