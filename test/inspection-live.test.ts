/**
 * The live feeds: `deliveries tail` and `logs --follow` as real processes, and the SSE streams
 * behind them. The claim under test: nothing is lost, across a burst, a slow reader and a
 * reconnect, because each read is by cursor and the hook only says "something changed".
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { AttemptFeedItem } from '../src/webhooks/index.ts';
import { createSseParser } from '../src/cli/feed.ts';
import { spawnCli, waitFor } from './helpers/index.ts';
import { inspectionServer, receiver } from './inspection-support.ts';
import { capabilityOf } from '../src/module/capabilities.ts';

/** Read `count` events of `type` from an SSE endpoint, then hang up. */
async function readStream(url: string, token: string, type: string, count: number, headers: Record<string, string> = {}) {
  const ac = new AbortController();
  const res = await fetch(url, { headers: { authorization: `Bearer ${token}`, ...headers }, signal: ac.signal });
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type') ?? '', /^text\/event-stream/);
  const got: Array<{ id?: string; data: any }> = [];
  let ready: any;
  const parse = createSseParser((e) => {
    if (e.event === 'ready') ready = JSON.parse(e.data);
    if (e.event === type) got.push({ id: e.id, data: JSON.parse(e.data) });
  });
  const decoder = new TextDecoder();
  const reader = res.body!.getReader();
  while (got.length < count) {
    const { value, done } = await reader.read();
    if (done) break;
    parse(decoder.decode(value, { stream: true }));
  }
  ac.abort();
  return { ready, got };
}

test('deliveries tail prints every attempt of a burst exactly once, and stops cleanly on Ctrl-C', async (t) => {
  const s = await inspectionServer(t);
  const a = await receiver(t, 200);
  const b = await receiver(t, 200);
  await s.subscribe(a.url, ['site_view']);
  await s.subscribe(b.url, ['site_view']);
  const tail = await spawnCli(t, ['deliveries', 'tail', '--json'], /following new delivery attempts \(Ctrl-C to stop\)/, { env: s.env });
  assert.doesNotMatch(tail.output(), /cursor/, "words a person reads, not the stream's position");

  // 60 events to two installations at once: 120 attempts while the tail is reading.
  const sent = await Promise.all(Array.from({ length: 60 }, () => s.send('site_view')));
  const ids = new Set(sent.flatMap((r) => r.deliveries.map((d) => d.id)));
  assert.equal(ids.size, 120);
  const lines = () =>
    tail
      .output()
      .split('\n')
      .filter((l) => l.startsWith('{'));
  await waitFor(() => lines().length >= 120, 20_000);
  const items = lines().map((l) => JSON.parse(l) as AttemptFeedItem);
  assert.equal(items.length, 120, 'no attempt printed twice');
  assert.deepEqual(new Set(items.map((i) => i.deliveryId)), ids, 'every delivery seen');
  const cursors = items.map((i) => Number(i.cursor));
  assert.deepEqual(
    cursors,
    [...cursors].sort((x, y) => x - y),
    'in the order they were recorded',
  );
  assert.ok(items.every((i) => i.attempt.outcome === 'success' && i.attempt.status === 200 && i.eventType === 'site_view'));

  // The same 120 from the start, through a stream that holds at most 64 unread: reads pause and resume.
  const replay = await readStream(`${s.url}/api/v1/deliveries/stream?after=0`, s.token, 'attempt', 120);
  assert.deepEqual(
    replay.got.map((g) => Number(g.id)),
    cursors,
  );

  const exited = new Promise<number | null>((r) => tail.child.on('exit', (code) => r(code)));
  tail.child.kill('SIGINT');
  assert.equal(await exited, 0);
  assert.match(tail.output(), new RegExp(`stopped after 120 attempts; to go on from here: switchyard deliveries tail --after ${cursors.at(-1)}\n`));
});

test('the attempt stream resumes after a cursor (?after= or Last-Event-ID) and filters by installation', async (t) => {
  const s = await inspectionServer(t, { webhooks: { max_retries: 0 } });
  const ok = await receiver(t, 200);
  const bad = await receiver(t, 500);
  const good = await s.subscribe(ok.url, ['page_feedback']);
  await s.subscribe(bad.url, ['page_feedback']);
  const sent = [];
  for (let i = 0; i < 5; i++) sent.push(...(await s.send('page_feedback')).deliveries);
  for (const d of sent) await s.settled(d.id);

  const url = `${s.url}/api/v1/deliveries/stream`;
  const all = await readStream(`${url}?after=0`, s.token, 'attempt', 10);
  assert.equal(all.ready.cursor, '0');
  assert.equal(all.got.length, 10);
  assert.deepEqual(
    all.got.map((g) => g.id),
    all.got.map((g) => g.data.cursor),
    'each event carries its cursor as its SSE id',
  );
  const fourth = all.got[3].id!;
  const resumed = await readStream(url, s.token, 'attempt', 6, { 'last-event-id': fourth });
  assert.deepEqual(
    resumed.got.map((g) => g.id),
    all.got.slice(4).map((g) => g.id),
  );
  const onlyGood = await readStream(`${url}?after=0&installation=${good}`, s.token, 'attempt', 5);
  assert.ok(onlyGood.got.every((g) => g.data.installationId === good && g.data.attempt.status === 200));
  const failedOnes = all.got.filter((g) => g.data.attempt.status === 500);
  assert.ok(failedOnes.every((g) => g.data.deliveryStatus === 'failed' && g.data.attempt.nextAttemptAt === null));

  const bogus = await fetch(`${url}?after=x`, { headers: { authorization: `Bearer ${s.token}` } });
  assert.equal(bogus.status, 400);
  const anon = await fetch(url);
  assert.equal(anon.status, 401);
  // Hung-up clients are forgotten.
  await waitFor(() => capabilityOf(s.services, 'streams').size === 0);
});

test('tail reconnects after the server restarts and prints the attempts made while it was away', async (t) => {
  const { startServer } = await import('../src/server/server.ts');
  const { memoryLogger } = await import('../src/log/index.ts');
  const s = await inspectionServer(t, { webhooks: { max_retries: 1, base_delay: 1500, jitter: 0 } });
  const r = await receiver(t, 500);
  await s.subscribe(r.url, ['site_view']);
  const tail = await spawnCli(t, ['deliveries', 'tail'], /following new delivery attempts/, { env: s.env });
  const { deliveries } = await s.send('site_view');
  await waitFor(() => tail.output().includes(`${deliveries[0].id}  site_view`));
  assert.match(tail.output(), /#1  500  [\d.]+ ms  retry  HTTP 500: server error  next attempt \S+Z/);

  // The retry falls due while the server is down; it goes out as soon as the server is back,
  // before the tail reconnects. The tail still prints it (it resumes after its last cursor).
  r.answer = 200;
  await s.close();
  await waitFor(() => /lost the server at/.test(tail.output()));
  await new Promise((ok) => setTimeout(ok, 1600));
  const again = await startServer(s.config, { log: memoryLogger() });
  t.after(() => again.close());
  await waitFor(() => /#2  200  [\d.]+ ms  success/.test(tail.output()), 10_000);
  assert.match(tail.output(), /reconnected\n/);
  assert.equal(tail.output().match(/#2 /g)?.length, 1);
});

test('logs --follow prints what integration code prints as it happens, with late lines and limit breaches', async (t) => {
  const s = await inspectionServer(t);
  const inst = await s.install('inspector');
  await s.send('space_content_updated', { spaceId: 'before', revisionId: 'r0' });
  await waitFor(async () => (await s.api('GET', '/api/v1/logs?integration=inspector')).body.invocations.length === 1, 10_000);

  const f = await spawnCli(t, ['logs', '--follow', '--integration', 'inspector'], /following invocations/, { env: s.env });
  assert.match(f.output(), /content before r0/, 'the recent history comes first');
  await s.send('space_content_updated', { spaceId: 'live', revisionId: 'r1' });
  await s.send('space_content_updated', { spaceId: 'spin', revisionId: 'r2' });
  await s.send('space_content_updated', { spaceId: 'late', revisionId: 'r3' });
  await waitFor(() => /limit breached \(cpu_time\)/.test(f.output()) && /late line for r3/.test(f.output()), 15_000);
  const out = f.output();
  assert.match(
    out,
    new RegExp(
      `\\S+Z  req_[0-9a-f]+  inspector  ${inst}  space_content_updated  200  ok  .*\\n  \\d\\d:\\d\\d:\\d\\d\\.\\d{3} log   content live r1\\n  \\d\\d:\\d\\d:\\d\\d\\.\\d{3} warn  handled evt_`,
    ),
  );
  // The limit breach: what the code printed, the sandbox's own error line, then the breach itself.
  assert.match(
    out,
    /space_content_updated  503  limit .*\n.*content spin r2\n(.*\n)*  limit breached \(cpu_time\): exceeded its CPU time limit, sandbox\.cpu_time = /,
  );
  assert.equal(out.match(/content before r0/g)?.length, 1, 'history is not repeated by the stream');
  // A line printed after the response arrives on its own, naming its invocation, and is stored with it.
  const late = /(req_[0-9a-f]+) \(after the response\)\n  \S+ log   late line for r3\n/.exec(out);
  assert.ok(late, out);
  const stored = (await s.api('GET', `/api/v1/logs/${late[1]}`)).body;
  assert.deepEqual(stored.logs.map((l: { message: string }) => l.message).slice(-1), ['late line for r3']);
  f.child.kill('SIGINT');
});
