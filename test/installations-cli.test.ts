import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { ROOT, runCli, startTestServer } from './helpers/index.ts';

const FIXTURES = join(ROOT, 'test/fixtures/integrations');
process.env.KITCHEN_SINK_API_KEY = 'sk_test_kitchen';

test('install, configure, pause, resume and uninstall from the real CLI', async (t) => {
  const s = await startTestServer(t, { integrations_dir: FIXTURES });
  const env = { SWITCHYARD_URL: s.url, SWITCHYARD_ADMIN_TOKEN: s.token };

  const installed = await runCli(['install', 'kitchen-sink', '--set', 'threshold=7', '--json'], { env });
  assert.equal(installed.code, 0, installed.stderr);
  const body = JSON.parse(installed.stdout);
  const id = body.installation.id;
  assert.equal(body.installation.status, 'pending');
  assert.deepEqual(body.installation.missing, ['channel'], 'a pending installation says what it still needs');
  const human = await runCli(['install', 'kitchen-sink'], { env });
  assert.match(human.stdout, /required configuration missing \(channel\); set it with `switchyard installations configure inst_\w+ --set channel=\.\.\.`/);
  assert.strictEqual(body.installation.configuration.threshold, 7, 'number properties are typed from the manifest');
  assert.match(body.token, /^sy_inst_/);

  const bad = await runCli(['installations', 'configure', id, '--set', 'mode=medium'], { env });
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /configuration\.mode/);
  assert.match(bad.stderr, /nothing was stored/);

  const ok = await runCli(['installations', 'configure', id, '--set', 'channel=ops', '--set', 'mode=slow'], { env });
  assert.equal(ok.code, 0, ok.stderr);
  assert.match(ok.stdout, /active/);
  assert.match(ok.stdout, /channel = "ops"/);
  assert.doesNotMatch(ok.stdout, /missing/);

  const list = await runCli(['installations', 'list'], { env });
  assert.match(list.stdout, /^ID\s+INTEGRATION\s+TARGET\s+STATUS\s+UPDATED/m);
  assert.match(list.stdout, new RegExp(`${id}\\s+kitchen-sink\\s+organization\\s+active`));

  assert.match((await runCli(['installations', 'pause', id], { env })).stdout, /paused/);
  assert.match((await runCli(['installations', 'resume', id], { env })).stdout, /active/);
  const show = await runCli(['installations', 'show', id], { env });
  assert.match(show.stdout, new RegExp(`public endpoint ${s.url}/v1/integrations/kitchen-sink/installations/${id}`));
  assert.equal((await runCli(['installations', 'uninstall', id], { env })).code, 0);
  const after = await runCli(['installations', 'list', '--all', '--json'], { env });
  assert.equal(JSON.parse(after.stdout).installations[0].status, 'uninstalled');

  const unknown = await runCli(['installations', 'show', 'inst_nope'], { env });
  assert.equal(unknown.code, 1);
  assert.match(unknown.stderr, /installation inst_nope does not exist/);
});

test('install --site with --space: a site installation in that space (spec 2.4)', async (t) => {
  const s = await startTestServer(t, { integrations_dir: FIXTURES });
  const env = { SWITCHYARD_URL: s.url, SWITCHYARD_ADMIN_TOKEN: s.token };
  const r = await runCli(['install', 'kitchen-sink', '--site', 'site-1', '--space', 'space-7', '--set', 'tracking=true', '--json'], { env });
  assert.equal(r.code, 0, r.stderr);
  const installation = JSON.parse(r.stdout).installation;
  assert.equal(installation.target, 'site');
  assert.equal(installation.site, 'site-1');
  assert.equal(installation.space, 'space-7');
  const list = await runCli(['installations', 'list'], { env });
  assert.match(list.stdout, new RegExp(`${installation.id}\\s+kitchen-sink\\s+site:site-1\\s`));
});

test('the CLI says in one line when the server is not running', async () => {
  const r = await runCli(['installations', 'list'], { env: { SWITCHYARD_URL: 'http://127.0.0.1:9', SWITCHYARD_ADMIN_TOKEN: 'x' } });
  assert.equal(r.code, 1);
  assert.match(r.stderr, /the switchyard server is not running at http:\/\/127\.0\.0\.1:9/);
  assert.doesNotMatch(r.stderr, /\n\s+at /);
});

test('GET /openapi.json describes the management API and every documented path exists', async (t) => {
  const s = await startTestServer(t, { integrations_dir: FIXTURES });
  const doc = (await (await fetch(`${s.url}/openapi.json`)).json()) as any;
  assert.equal(doc.openapi, '3.1.0');
  const paths = Object.keys(doc.paths);
  const miss = (await (await fetch(`${s.url}/api/v1/nowhere`, { headers: { authorization: `Bearer ${s.token}` } })).json()) as any;
  assert.equal(miss.error.code, 'no_route', 'an unrouted path is told apart from a missing resource');
  for (const p of ['/api/v1/installations', '/api/v1/installations/{id}', '/v1/integrations/{name}', '/api/v1/installations/{id}/render'])
    assert.ok(paths.includes(p), p);
  for (const [path, item] of Object.entries<any>(doc.paths)) {
    for (const method of Object.keys(item)) {
      const url = s.url + path.replace(/\{[^}]+\}/g, 'x');
      const res = await fetch(url, { method: method.toUpperCase(), headers: { authorization: `Bearer ${s.token}` } });
      // A live feed never ends: that it answered is enough.
      if (res.headers.get('content-type')?.startsWith('text/event-stream')) await res.body?.cancel();
      else await res.arrayBuffer();
      // A documented route may refuse the made-up id or the empty body, but it must exist.
      const body =
        res.status === 404 ? await fetch(url, { method: method.toUpperCase(), headers: { authorization: `Bearer ${s.token}` } }).then((r) => r.text()) : '';
      assert.doesNotMatch(body, /"code":"no_route"/, `${method.toUpperCase()} ${path} is not routed`);
      assert.ok(res.status !== 405, `${method.toUpperCase()} ${path} answers 405`);
    }
  }
});

test('manifest defaults are stored when an installation is created or configured, through the API and the CLI alike: the code sees them, show prints them', async (t) => {
  const s = await startTestServer(t, { integrations_dir: FIXTURES });
  const env = { SWITCHYARD_URL: s.url, SWITCHYARD_ADMIN_TOKEN: s.token };
  const seenBy = async (id: string) => {
    const r = await fetch(`${s.url}/v1/integrations/kitchen-sink/installations/${id}/env`);
    assert.equal(r.status, 200);
    return ((await r.json()) as any).installation.configuration;
  };

  // The HTTP API: threshold (number, default 3) and mode (enum, default "fast") are not sent.
  const api = await s.api('POST', '/api/v1/installations', { integration: 'kitchen-sink', configuration: { channel: 'general' } });
  assert.equal(api.status, 201);
  assert.deepEqual(api.body.installation.configuration, { channel: 'general', threshold: 3, mode: 'fast' });
  assert.deepEqual(await seenBy(api.body.installation.id), { channel: 'general', threshold: 3, mode: 'fast' }, "the integration's code sees the defaults");
  // A value that is given wins; removing it brings the default back.
  const set = await s.api('PATCH', `/api/v1/installations/${api.body.installation.id}`, { configuration: { mode: 'slow', threshold: 10 } });
  assert.deepEqual(set.body.installation.configuration, { channel: 'general', threshold: 10, mode: 'slow' });
  const unset = await s.api('PATCH', `/api/v1/installations/${api.body.installation.id}`, { configuration: { mode: null } });
  assert.deepEqual(unset.body.installation.configuration, { channel: 'general', threshold: 10, mode: 'fast' });
  assert.equal((await seenBy(api.body.installation.id)).mode, 'fast');

  // The CLI: install without the properties, then show.
  const installed = await runCli(['install', 'kitchen-sink', '--set', 'channel=ops', '--json'], { env });
  assert.equal(installed.code, 0, installed.stderr);
  const id = JSON.parse(installed.stdout).installation.id;
  const shown = await runCli(['installations', 'show', id], { env });
  assert.equal(shown.code, 0, shown.stderr);
  assert.match(shown.stdout, /^ {4}threshold = 3$/m);
  assert.match(shown.stdout, /^ {4}mode = "fast"$/m);
  assert.deepEqual(await seenBy(id), { channel: 'ops', threshold: 3, mode: 'fast' });
  const unsetCli = await runCli(['installations', 'configure', id, '--set', 'threshold=5', '--unset', 'mode', '--json'], { env });
  assert.equal(unsetCli.code, 0, unsetCli.stderr);
  assert.deepEqual(JSON.parse(unsetCli.stdout).installation.configuration, { channel: 'ops', threshold: 5, mode: 'fast' });

  // A pending installation (the required channel missing) gets its defaults too.
  const pending = await s.api('POST', '/api/v1/installations', { integration: 'kitchen-sink' });
  assert.equal(pending.body.installation.status, 'pending');
  assert.deepEqual(pending.body.installation.configuration, { threshold: 3, mode: 'fast' });
});

test('the webhook integration installs into the organization only (spec 5.5): a space or site install is refused, by the API and the CLI', async (t) => {
  const s = await startTestServer(t, { integrations_dir: FIXTURES });
  const env = { SWITCHYARD_URL: s.url, SWITCHYARD_ADMIN_TOKEN: s.token };
  const configuration = { webhook_url: 'https://example.com/hook', event_types: 'space_content_updated' };
  for (const where of [{ space: 'space-9' }, { target: 'space', space: 'space-9' }, { site: 'site-9' }, { target: 'site', site: 'site-9' }]) {
    const r = await s.api('POST', '/api/v1/installations', { integration: 'webhook', ...where, configuration });
    assert.equal(r.status, 400, `${JSON.stringify(where)}: ${JSON.stringify(r.body)}`);
    assert.equal(r.body.error.code, 'webhook_organization_only', JSON.stringify(where));
    assert.match(r.body.error.message, /installed into the organization/);
    assert.match(r.body.error.hint, /without --space or --site/);
  }
  for (const flag of [
    ['--space', 'space-9'],
    ['--site', 'site-9'],
  ]) {
    const cli = await runCli(['install', 'webhook', ...flag, '--set', 'webhook_url=https://example.com/hook', '--set', 'event_types=space_content_updated'], {
      env,
    });
    assert.equal(cli.code, 2, cli.stderr);
    assert.match(cli.stderr, /webhook integration is installed into the organization/);
  }
  const none = await s.api('GET', '/api/v1/installations?integration=webhook&all=true');
  assert.deepEqual(none.body.installations, [], 'nothing was stored');
  // The organization-wide install is the one that works.
  const ok = await runCli(['install', 'webhook', '--set', 'webhook_url=https://example.com/hook', '--set', 'event_types=space_content_updated', '--json'], {
    env,
  });
  assert.equal(ok.code, 0, ok.stderr);
  const made = JSON.parse(ok.stdout).installation;
  assert.equal(made.target, 'organization');
  assert.equal(made.status, 'active');
});
