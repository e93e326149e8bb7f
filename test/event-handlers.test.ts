/**
 * Platform events reach integrations' event handlers at least once: a handler run is stored with
 * its event, claimed by SQL leases, retried on the webhook schedule after a sandbox crash or a
 * throwing handler, and replayable from the CLI.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import type { HandlerRun } from '../src/events/index.ts';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { runCli, startTestServer, testConfig, waitFor } from './helpers/index.ts';
import { startServer } from '../src/server/server.ts';
import { memoryLogger } from '../src/log/index.ts';
import { modules } from '../src/server/modules.ts';
import type { Module } from '../src/module/contract.ts';
import { receiver, recorderIntegration, siteView } from './handler-support.ts';
import { capabilityOf } from '../src/module/capabilities.ts';
import { loadSeam } from '../src/sandbox/host/instance.ts';

test('a SIGKILLed sandbox worker loses no handler run: every event of a burst is handled, the crashed ones on retry', async (t) => {
  const rx = await receiver(t);
  // Retries over about 12 s (50 ms doubling, 8 times): a loaded machine can take seconds to bring
  // the sandbox worker back, and a run whose retries ran out before that would never be handled.
  const s = await startTestServer(
    t,
    { integrations_dir: recorderIntegration(t), webhooks: { base_delay: 50, jitter: 0, max_retries: 8 } },
    { sandbox: 'worker' },
  );
  const inst = await s.api('POST', '/api/v1/installations', { integration: 'recorder' });
  assert.equal(inst.status, 201, JSON.stringify(inst.body));
  const installationId = inst.body.installation.id as string;

  rx.state.hold = true;
  const events = Array.from({ length: 40 }, (_, i) => siteView(rx.url, `evt_burst_${String(i).padStart(2, '0')}`));
  const answers = await Promise.all(events.map((e) => s.api('POST', '/api/v1/events', e)));
  for (const a of answers) {
    assert.equal(a.status, 202, JSON.stringify(a.body));
    assert.deepEqual(
      a.body.handlers.map((h: { installationId: string }) => h.installationId),
      [installationId],
      'the answer names the handler run owed',
    );
  }
  // Handlers are inside their fetch, held by the receiver: kill the sandbox worker under them.
  await waitFor(() => rx.held.length >= 3, 15_000);
  const pid = execFileSync('pgrep', ['-P', String(process.pid), '-f', 'sandbox-worker'], { encoding: 'utf8' })
    .trim()
    .split('\n')[0];
  process.kill(Number(pid), 'SIGKILL');
  rx.state.hold = false;
  for (const res of rx.held.splice(0)) res.destroy();

  await waitFor(() => events.every((e) => rx.seen.has(e.eventId as string)), 30_000).catch(() => {
    const missing = events.filter((e) => !rx.seen.has(e.eventId as string)).map((e) => e.eventId);
    assert.fail(`${missing.length} of ${events.length} events were never handled: ${missing.slice(0, 5).join(', ')}…`);
  });
  const runs = await waitFor(async () => {
    const page = (await s.api('GET', `/api/v1/handler-runs?installation=${installationId}&limit=500`)).body.handlerRuns as HandlerRun[];
    return page.length === events.length && page.every((r) => r.status === 'delivered') ? page : undefined;
  }, 10_000);
  const retried = runs.filter((r) => r.attemptCount > 1);
  assert.ok(retried.length >= 3, `the runs in flight at the kill were retried (${retried.length})`);

  // events show: the run with its attempts, the crash then the success. Under load a run held at
  // the receiver may reach its wall-clock limit before the kill (its first attempt then says
  // `limit`): the first retried run whose attempts include the crash is shown.
  let crashed: HandlerRun | undefined;
  let report: any;
  for (const run of retried) {
    const shown = await runCli(['events', 'show', run.eventId, '--json'], { env: { SWITCHYARD_URL: s.url, SWITCHYARD_ADMIN_TOKEN: s.token } });
    assert.equal(shown.code, 0, shown.stderr);
    report = JSON.parse(shown.stdout);
    if (report.handlers.some((h: { outcome: string }) => h.outcome === 'crash')) {
      crashed = run;
      break;
    }
  }
  assert.ok(crashed, `a run in flight at the kill has a crash among its attempts: ${JSON.stringify(report?.handlers)}`);
  assert.equal(report.handlerRuns[0].status, 'delivered');
  assert.equal(report.handlerRuns[0].attemptCount, crashed.attemptCount);
  const outcomes = report.handlers.map((h: { outcome: string }) => h.outcome) as string[];
  assert.equal(outcomes.length, crashed.attemptCount, 'every attempt is an invocation');
  assert.equal(outcomes.at(-1), 'ok', 'the last one succeeded');
  assert.ok(
    outcomes.slice(0, -1).every((o) => o === 'crash' || o === 'limit'),
    `before it, the crash (and a wall-clock limit reached while held): ${outcomes.join(', ')}`,
  );
  const human = await runCli(['events', 'show', crashed.eventId], { env: { SWITCHYARD_URL: s.url, SWITCHYARD_ADMIN_TOKEN: s.token } });
  assert.match(human.stdout, new RegExp(`handler runs[\\s\\S]*${crashed.id}[\\s\\S]*delivered[\\s\\S]*${crashed.attemptCount}/9`)); // max_retries 8: 9 attempts
});

test('a handler that keeps throwing fails after max_retries; `events replay` from the CLI runs it again', async (t) => {
  const rx = await receiver(t);
  const s = await startTestServer(t, { integrations_dir: recorderIntegration(t), webhooks: { base_delay: 20, jitter: 0, max_retries: 1 } });
  const inst = await s.api('POST', '/api/v1/installations', { integration: 'recorder' });
  const installationId = inst.body.installation.id as string;
  const env = { SWITCHYARD_URL: s.url, SWITCHYARD_ADMIN_TOKEN: s.token };

  rx.state.fail = true;
  const event = siteView(rx.url);
  const sent = await runCli(['events', 'send', 'site_view', '--data', JSON.stringify(event)], { env });
  assert.equal(sent.code, 0, sent.stderr);
  assert.match(sent.stdout, /1 handler run/);
  const failed = await waitFor(async () => {
    const r = (await s.api('GET', `/api/v1/handler-runs?event=${event.eventId}`)).body.handlerRuns[0] as HandlerRun | undefined;
    return r?.status === 'failed' ? r : undefined;
  }, 10_000);
  assert.equal(failed.attemptCount, 2, 'the first attempt and max_retries (1) retry');
  assert.match(failed.lastError ?? '', /exception: .*the receiver answered 500/);
  assert.equal(rx.state.arrived, 2);

  const listed = await runCli(['events', 'handlers', '--status', 'failed'], { env });
  assert.equal(listed.code, 0, listed.stderr);
  assert.match(listed.stdout, new RegExp(`${failed.id}.*${installationId}.*failed.*2/2`));

  rx.state.fail = false;
  const replayed = await runCli(['events', 'replay', '--failed', '--since', '1h'], { env });
  assert.equal(replayed.code, 0, replayed.stderr);
  assert.match(replayed.stdout, /re-enqueued 1 failed handler run/);
  await waitFor(() => rx.seen.has(event.eventId as string), 10_000);
  const done = await waitFor(async () => {
    const r = (await s.api('GET', `/api/v1/handler-runs/${failed.id}`)).body as HandlerRun;
    return r.status === 'delivered' ? r : undefined;
  }, 5_000);
  assert.equal(done.attemptCount, 1, 'a replay starts a fresh schedule');

  // One run by id: a delivered run can be run again too; a bad use exits 2 with the reason.
  const again = await runCli(['events', 'replay', failed.id], { env });
  assert.equal(again.code, 0, again.stderr);
  await waitFor(() => rx.state.arrived === 4, 5_000);
  const unknown = await runCli(['events', 'replay', 'hdl_nope'], { env });
  assert.equal(unknown.code, 1);
  assert.match(unknown.stderr, /no handler run hdl_nope/);
  const noWindow = await runCli(['events', 'replay', '--failed'], { env });
  assert.equal(noWindow.code, 2);
  assert.match(noWindow.stderr, /--since/);
});

test('what scripts export is remembered across starts: after a restart events go only to installations that handle them, with no script loaded at start', async (t) => {
  const rx = await receiver(t);
  const dir = recorderIntegration(t);
  mkdirSync(join(dir, 'quiet'));
  writeFileSync(
    join(dir, 'quiet/platform-manifest.yaml'),
    'name: quiet\ntitle: Quiet\ndescription: Answers its public endpoint, handles no event.\norganization: o\nvisibility: private\nscopes:\n  - site:views:read\nscript: index.ts\n',
  );
  writeFileSync(
    join(dir, 'quiet/index.ts'),
    "import { createIntegration } from '@switchyard/runtime';\nexport default createIntegration({ fetch: async () => new Response('quiet') });\n",
  );
  const config = testConfig(t, { integrations_dir: dir });
  const auth = { authorization: `Bearer ${config.admin_token}`, 'content-type': 'application/json' };
  // Counts what is loaded in the sandbox to be described (placed right after the sandbox module).
  let checks = 0;
  const spy: Module = {
    name: 'check-spy',
    start(services) {
      const sandbox = capabilityOf(services, 'sandbox');
      const check = sandbox.check.bind(sandbox);
      sandbox.check = (script) => (checks++, check(script));
    },
  };
  const withSpy = [modules[0], spy, ...modules.slice(1)];
  const start = async () => {
    const s = await startServer(config, { log: memoryLogger(), modules: withSpy });
    t.after(() => s.close());
    await capabilityOf(s.services, 'registry').whenReady();
    return s;
  };
  const send = async (url: string) => {
    const res = await fetch(`${url}/api/v1/events`, { method: 'POST', headers: auth, body: JSON.stringify(siteView(rx.url)) });
    assert.equal(res.status, 202);
    return ((await res.json()) as { handlers: Array<{ installationId: string }> }).handlers.map((h) => h.installationId);
  };

  const first = await start();
  assert.equal(checks, 0, 'nothing was loaded in the sandbox at start');
  const ids: Record<string, string> = {};
  for (const name of ['recorder', 'quiet']) {
    const res = await fetch(`${first.url}/api/v1/installations`, { method: 'POST', headers: auth, body: JSON.stringify({ integration: name }) });
    ids[name] = ((await res.json()) as any).installation.id;
  }
  // Scripts are read (and what they export remembered) when a run first needs them: here the
  // installation_setup events of the installs, and this event.
  assert.ok((await send(first.url)).includes(ids.recorder));
  await waitFor(
    () => capabilityOf(first.services, 'runtime').handlesKnown(capabilityOf(first.services, 'registry').get('quiet')!, 'site_view') === false,
    10_000,
  );
  assert.ok(checks >= 2);
  await first.close();

  checks = 0;
  const second = await start();
  assert.equal(checks, 0, 'nothing was loaded in the sandbox at start');
  const runtime = capabilityOf(second.services, 'runtime');
  const registry = capabilityOf(second.services, 'registry');
  await waitFor(
    () => runtime.handlesKnown(registry.get('quiet')!, 'site_view') === false && runtime.handlesKnown(registry.get('recorder')!, 'site_view') === true,
    10_000,
  );
  assert.deepEqual(await send(second.url), [ids.recorder], 'only the installation that handles site_view is owed a run');
  await waitFor(() => rx.seen.size === 2, 10_000);
  assert.equal(checks, 0, 'known without loading either script to read its exports');
  await second.close();
});

test('a script whose load for reading its exports hit sandbox.startup_time still gets its events: it is read again, not taken to handle none', async (t) => {
  const rx = await receiver(t);
  const s = await startTestServer(
    t,
    { integrations_dir: recorderIntegration(t), sandbox: { startup_time: 1000 }, webhooks: { base_delay: 50, jitter: 0, max_retries: 4 } },
    { sandbox: 'in-process' },
  );
  // The first load of the recorder (reading what it exports, for its installation's lifecycle
  // event) is held until the start-up timer disposes its isolate, as a busy machine can slow a
  // compile past sandbox.startup_time. Its check is answered by then (in the timer's own turn).
  let held = false;
  let released = false;
  loadSeam.at = async (step, script, disposed) => {
    if (held || script.name !== 'recorder' || step !== 'compile') return;
    held = true;
    while (!disposed()) await new Promise((r) => setTimeout(r, 5));
    released = true;
  };
  t.after(() => delete loadSeam.at);
  const inst = await s.api('POST', '/api/v1/installations', { integration: 'recorder' });
  assert.equal(inst.status, 201, JSON.stringify(inst.body));
  await waitFor(() => released, 10_000);
  const recorder = capabilityOf(s.services, 'registry').get('recorder')!;
  assert.notEqual(capabilityOf(s.services, 'runtime').handlesKnown(recorder, 'site_view'), false, 'not taken to handle no event');
  const event = siteView(rx.url);
  const sent = await s.api('POST', '/api/v1/events', event);
  assert.equal(sent.status, 202);
  assert.equal(sent.body.handlers.length, 1, 'a handler run is owed');
  await waitFor(() => rx.seen.has(event.eventId as string), 15_000);
  assert.equal(capabilityOf(s.services, 'runtime').handlesKnown(recorder, 'site_view'), true);
});

test('a script whose top level always overruns sandbox.startup_time costs a few loads for a burst of handler runs, not one per run and attempt', async (t) => {
  const dir = recorderIntegration(t);
  // Its top level spins: every load to read what it exports is stopped by the start-up time.
  writeFileSync(
    join(dir, 'recorder/index.ts'),
    `import { createIntegration } from '@switchyard/runtime';
for (;;) {}
export default createIntegration({ events: { site_view: async () => {} } });
`,
  );
  const s = await startTestServer(
    t,
    { integrations_dir: dir, sandbox: { startup_time: 100 }, webhooks: { base_delay: 50, jitter: 0, max_retries: 3 } },
    { sandbox: 'in-process' },
  );
  let loads = 0;
  loadSeam.at = async (step, script) => {
    if (script.name === 'recorder' && step === 'context') loads++;
  };
  t.after(() => delete loadSeam.at);
  const inst = await s.api('POST', '/api/v1/installations', { integration: 'recorder' });
  assert.equal(inst.status, 201, JSON.stringify(inst.body));
  const installationId = inst.body.installation.id as string;
  const started = performance.now();
  const events = Array.from({ length: 20 }, (_, i) => siteView('http://127.0.0.1:1/', `evt_spin_${i}`));
  for (const e of events) assert.equal((await s.api('POST', '/api/v1/events', e)).status, 202);
  const runs = await waitFor(async () => {
    const page = (await s.api('GET', `/api/v1/handler-runs?installation=${installationId}&limit=500`)).body.handlerRuns as HandlerRun[];
    return page.length === events.length && page.every((r) => r.status === 'failed') ? page : undefined;
  }, 60_000);
  const elapsed = performance.now() - started;
  for (const r of runs) {
    assert.equal(r.attemptCount, 4);
    assert.match(r.lastError ?? '', /sandbox\.startup_time = 100 ms/);
  }
  // Its first load, the retry at once, then one after each pause (1 s, 2 s...), with one more for
  // the installation's own event read before the burst.
  const bound = 3 + Math.floor(Math.log2(elapsed / 1000 + 1));
  t.diagnostic(`${loads} loads for ${events.length} runs of 4 attempts in ${Math.round(elapsed)} ms (at most ${bound})`);
  assert.ok(loads <= bound, `${loads} loads for ${events.length * 4} attempts`);
});
