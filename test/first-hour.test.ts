/**
 * What a newcomer meets in the first hour: a refused local receiver says which setting allows it,
 * at install time and in the delivery's error; the built-in webhook integration is there with an
 * empty integrations folder; the shipped examples are one command away.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { samplePayload } from '../src/events/index.ts';
import { join } from 'node:path';
import { verifySignature } from '../src/webhooks/index.ts';
import { deliveryServer, scriptedReceiver } from './webhooks-support.ts';
import { ROOT, runCli, startTestServer, tmpDir, waitFor } from './helpers/index.ts';

test('a webhook URL on this machine is flagged at install (API and `switchyard install`), and its refused delivery names webhooks.allow_private_networks', async (t) => {
  const s = await deliveryServer(t, { webhooks: { allow_private_networks: false, max_retries: 0 } });
  const receiver = await scriptedReceiver(t, () => 200);
  const r = await s.api('POST', '/api/v1/installations', { integration: 'webhook', configuration: { webhook_url: receiver.url, event_types: 'site_view' } });
  assert.equal(r.status, 201);
  assert.equal(r.body.installation.warnings.length, 1);
  assert.match(
    r.body.installation.warnings[0],
    /^configuration\.webhook_url: 127\.0\.0\.1 is a private or loopback address: deliveries to it will be refused .*set webhooks\.allow_private_networks: true/,
  );
  const shown = await s.api('GET', `/api/v1/installations/${r.body.installation.id}`);
  assert.deepEqual(shown.body.installation.warnings, r.body.installation.warnings, 'every view says it');

  const sent = await s.send(samplePayload('site_view'));
  assert.equal(sent.status, 202);
  assert.equal(sent.body.deliveries.length, 1);
  const d = await s.settled(sent.body.deliveries[0].id);
  assert.equal(d.status, 'failed');
  assert.match(d.attempts.at(-1)!.error ?? '', /set webhooks\.allow_private_networks: true in config\.yaml/);
  assert.equal(receiver.requests.length, 0);

  const publicUrl = await s.api('POST', '/api/v1/installations', {
    integration: 'webhook',
    configuration: { webhook_url: 'https://hooks.example.com/x', event_types: 'site_view' },
  });
  assert.deepEqual(publicUrl.body.installation.warnings, []);

  // `switchyard install` says it at once, naming the setting; the installation is made all the same.
  const env = { SWITCHYARD_URL: s.url, SWITCHYARD_ADMIN_TOKEN: s.token };
  const cli = await runCli(['install', 'webhook', '--set', `webhook_url=${receiver.url}`, '--set', 'event_types=site_view'], { env });
  assert.equal(cli.code, 0, cli.stderr);
  assert.match(
    cli.stderr,
    /^warning: configuration\.webhook_url: 127\.0\.0\.1 is a private or loopback address: deliveries to it will be refused .*set webhooks\.allow_private_networks: true/m,
  );
  assert.match(cli.stdout, /^inst_\w+ {2}active/m);
  const quiet = await runCli(['install', 'webhook', '--set', 'webhook_url=https://hooks.example.com/y', '--set', 'event_types=site_view'], { env });
  assert.equal(quiet.code, 0, quiet.stderr);
  assert.doesNotMatch(quiet.stderr, /warning/, 'a public URL gets no warning');
});

/** Names /etc/hosts gives a loopback address (127.x, ::1), other than localhost itself. */
function loopbackNamesInHosts(): string[] {
  let text = '';
  try {
    text = readFileSync('/etc/hosts', 'utf8');
  } catch {
    return [];
  }
  const names = new Set<string>();
  for (const line of text.split('\n')) {
    const [address, ...rest] = line.replace(/#.*/, '').trim().split(/\s+/);
    if (address && (/^127\./.test(address) || address === '::1')) for (const n of rest) if (n && n !== 'localhost' && /^[a-z0-9.-]+$/i.test(n)) names.add(n);
  }
  return [...names];
}

test('a webhook URL whose host name resolves to loopback is flagged at install as the delivery guard will refuse it (the name resolved by its own lookup)', async (t) => {
  const s = await deliveryServer(t, { webhooks: { allow_private_networks: false, max_retries: 0 } });
  const names = loopbackNamesInHosts();
  if (!names.length) t.diagnostic('no name in /etc/hosts resolves to loopback here: only localhost is tried');
  for (const host of ['localhost', ...names]) {
    const url = `http://${host}:9/hook`;
    const r = await s.api('POST', '/api/v1/installations', { integration: 'webhook', configuration: { webhook_url: url, event_types: 'site_view' } });
    assert.equal(r.status, 201, host);
    assert.equal(r.body.installation.warnings.length, 1, `${host}: ${JSON.stringify(r.body.installation.warnings)}`);
    assert.match(
      r.body.installation.warnings[0],
      new RegExp(
        `^configuration\\.webhook_url: ${host.replace(/\./g, '\\.')} (is|resolves to 127\\.[\\d.]+,) a private or loopback address: deliveries to it will be refused .*set webhooks\\.allow_private_networks: true`,
      ),
      host,
    );
    const id = r.body.installation.id;
    assert.deepEqual(
      (await s.api('GET', `/api/v1/installations/${id}`)).body.installation.warnings,
      r.body.installation.warnings,
      `${host}: the installation's view says it too`,
    );
    // An edit to such a URL says it as well.
    const edited = await s.api('PATCH', `/api/v1/installations/${id}`, { configuration: { webhook_url: `${url}2` } });
    assert.deepEqual(edited.body.installation.warnings.length, 1, host);
  }
  // Allowed private networks: no warning, and no lookup needed.
  const quiet = await deliveryServer(t);
  for (const host of ['localhost', ...names]) {
    const r = await quiet.api('POST', '/api/v1/installations', {
      integration: 'webhook',
      configuration: { webhook_url: `http://${host}:9/hook`, event_types: 'site_view' },
    });
    assert.deepEqual(r.body.installation.warnings, [], host);
  }
  // A name that does not resolve says nothing (it may resolve later; the guard decides then).
  const unknown = await s.api('POST', '/api/v1/installations', {
    integration: 'webhook',
    configuration: { webhook_url: 'https://no-such-host.invalid/x', event_types: 'site_view' },
  });
  assert.deepEqual(unknown.body.installation.warnings, []);
});

test('a fresh start opens without errors: an example whose secrets are unset "needs configuration", in one warning line; GET / leads to the console', async (t) => {
  const s = await startTestServer(t, { integrations_dir: join(ROOT, 'integrations') });
  const errors = s.logs.filter((l) => l.level === 'error');
  assert.deepEqual(errors, [], 'no red wall');
  const notes = s.logs.filter((l) => l.msg === 'integration needs configuration');
  assert.equal(notes.length, 1);
  assert.equal(notes[0].integration, 'oauth-example');
  assert.equal(notes[0].level, 'warn');
  assert.match(
    String(notes[0].set),
    /^OAUTH_EXAMPLE_CLIENT_ID, OAUTH_EXAMPLE_CLIENT_SECRET, OAUTH_EXAMPLE_PROVIDER_URL in the environment or in .*oauth-example\/\.env \(copy .*\.env\.example/,
  );
  const list = await s.api('GET', '/api/v1/integrations');
  const byName = Object.fromEntries(list.body.integrations.map((i: { name: string; status: string }) => [i.name, i.status]));
  assert.deepEqual(byName, { 'hello-components': 'loaded', 'oauth-example': 'needs_configuration', webhook: 'loaded' });
  const cli = await runCli(['integrations', 'list'], { env: { SWITCHYARD_URL: s.url, SWITCHYARD_ADMIN_TOKEN: s.token } });
  assert.match(cli.stdout, /oauth-example\s+needs configuration/);
  // The server's root leads to the console (on the console's own origin), never a bare 404.
  const root = await fetch(`${s.url}/`, { redirect: 'manual' });
  assert.equal(root.status, 302);
  assert.equal(root.headers.get('location'), `${s.consoleUrl}/console/`);
  const page = await fetch(root.headers.get('location')!);
  assert.equal(page.status, 200);
  assert.match(page.headers.get('content-type') ?? '', /text\/html/);
});

test('with an empty integrations folder the built-in webhook integration is there: `install webhook` from the CLI, and a signed delivery arrives', async (t) => {
  const s = await startTestServer(t);
  assert.deepEqual(readdirSync(s.config.integrations_dir), [], 'no folder at all');
  assert.ok(
    s.logs.some((l) => l.msg === 'built-in integration serving' && l.integration === 'webhook'),
    'the log says the built-in one serves',
  );
  const receiver = await scriptedReceiver(t, () => 200);
  const env = { SWITCHYARD_URL: s.url, SWITCHYARD_ADMIN_TOKEN: s.token };
  const installed = await runCli(['install', 'webhook', '--set', `webhook_url=${receiver.url}`, '--set', 'event_types=site_view', '--json'], { env });
  assert.equal(installed.code, 0, installed.stderr);
  const { installation, webhookSecret } = JSON.parse(installed.stdout);
  assert.equal(installation.status, 'active');

  const sent = await s.api('POST', '/api/v1/events', samplePayload('site_view'));
  assert.equal(sent.status, 202);
  const got = await waitFor(() => receiver.requests[0]);
  assert.equal(JSON.parse(got.body).sourceEventId, sent.body.eventId);
  assert.equal(JSON.parse(got.body).installationId, installation.id);
  assert.deepEqual(verifySignature(got.headers['x-platform-signature'] as string, got.body, webhookSecret).ok, true);

  const shown = await runCli(['integrations', 'show', 'webhook', '--json'], { env });
  assert.equal(JSON.parse(shown.stdout).builtin, true);
  assert.equal(JSON.parse(shown.stdout).dir, '(built-in)');
});

test('switchyard new --example: lists the shipped examples, refuses an unknown one with the list, writes one that check accepts', async (t) => {
  const cwd = tmpDir(t);
  // Room for `check` to start an isolate on a busy machine.
  writeFileSync(join(cwd, 'config.yaml'), 'sandbox:\n  cpu_time: 5s\n  startup_time: 15s\n');
  const listed = await runCli(['new', '--example'], { cwd });
  assert.equal(listed.code, 0, listed.stderr);
  for (const name of ['hello-components', 'oauth-example', 'webhook']) assert.match(listed.stdout, new RegExp(`^  ${name}\\s+\\S`, 'm'), name);
  assert.equal(existsSync(join(cwd, 'integrations')), false, 'listing writes nothing');

  const wrong = await runCli(['new', '--example', 'hello-component'], { cwd });
  assert.equal(wrong.code, 2);
  assert.match(wrong.stderr, /there is no example "hello-component"/);
  assert.match(wrong.stderr, /did you mean --example hello-components\?/);
  assert.match(wrong.stderr, /^  oauth-example\s/m, 'the list comes with it');

  const created = await runCli(['new', '--example', 'hello-components'], { cwd });
  assert.equal(created.code, 0, created.stderr);
  const folder = join(cwd, 'integrations/hello-components');
  for (const f of ['platform-manifest.yaml', 'src/index.tsx', 'src/route.ts', 'assets/icon.png', 'assets/preview.png'])
    assert.deepEqual(readFileSync(join(folder, f)), readFileSync(join(ROOT, 'integrations/hello-components', f)), `${f} as shipped`);
  const check = await runCli(['check', 'integrations/hello-components'], { cwd });
  assert.equal(check.code, 0, check.stdout + check.stderr);
  assert.match(check.stdout, /sandbox\s+ok\s+fetch; components: counter/);

  const again = await runCli(['new', '--example', 'hello-components'], { cwd });
  assert.equal(again.code, 1);
  assert.match(again.stderr, /already exists/);

  const webhook = await runCli(['new', '--example', 'webhook'], { cwd });
  assert.equal(webhook.code, 0, webhook.stderr);
  assert.match(webhook.stdout, /overrides the built-in webhook integration/);
});

test('the manifest `switchyard new` writes points at nothing the user lacks: no README, an example they can write out', async (t) => {
  const cwd = tmpDir(t);
  const created = await runCli(['new', 'my-first'], { cwd });
  assert.equal(created.code, 0, created.stderr);
  const manifest = readFileSync(join(cwd, 'integrations/my-first/platform-manifest.yaml'), 'utf8');
  assert.doesNotMatch(manifest, /README/i);
  assert.match(manifest, /switchyard new --example hello-components/);
});

test('`switchyard new` prints a check command that runs from where it ran: this entry through node when no `switchyard` is on PATH, `npm run switchyard --` through npm', async (t) => {
  const cwd = tmpDir(t);
  writeFileSync(join(cwd, 'config.yaml'), 'sandbox:\n  cpu_time: 5s\n  startup_time: 15s\n');
  const bin = join(cwd, 'bin');
  const path = ['/usr/local/bin', '/usr/bin', '/bin'].join(':');
  const created = await runCli(['new', 'printed'], { cwd, env: { PATH: path } });
  assert.equal(created.code, 0, created.stderr);
  const command = /Check it any time with: (.+)$/m.exec(created.stdout)?.[1];
  assert.ok(command, created.stdout);
  assert.doesNotMatch(command, /^switchyard /, 'no switchyard on this PATH');
  const ran = spawnSync('bash', ['-c', command], { cwd, env: { ...process.env, PATH: path, NO_COLOR: '1' }, encoding: 'utf8' });
  assert.equal(ran.status, 0, `${command}\n${ran.stdout}${ran.stderr}`);
  assert.match(ran.stdout, /sandbox\s+ok/);
  assert.match(created.stdout, new RegExp(`More complete examples: ${command.replace(/ check .*/, '').replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} new --example`));

  // A switchyard of one's own on PATH is used by name; through npm, npm's form.
  mkdirSync(bin);
  writeFileSync(join(bin, 'switchyard'), '#!/bin/sh\nexit 0\n', { mode: 0o755 });
  const named = await runCli(['new', 'named'], { cwd, env: { PATH: `${bin}:${path}` } });
  assert.match(named.stdout, /Check it any time with: switchyard check integrations\/named$/m);
  const npm = await runCli(['new', 'through-npm'], { cwd, env: { PATH: path, npm_lifecycle_event: 'switchyard' } });
  assert.match(npm.stdout, /Check it any time with: npm run switchyard -- check integrations\/through-npm$/m);
});

test('`switchyard init` writes the shipped commented config.yaml and an integrations folder, never overwrites one (exit 2, naming it), and config errors point at it', async (t) => {
  const cwd = tmpDir(t);
  const shipped = readFileSync(join(ROOT, 'config.yaml'), 'utf8');
  const r = await runCli(['init'], { cwd });
  assert.equal(r.code, 0, r.stderr);
  assert.equal(readFileSync(join(cwd, 'config.yaml'), 'utf8'), shipped, 'the same text as the shipped config.yaml');
  assert.match(shipped, /^store: ""/m);
  assert.deepEqual(readdirSync(join(cwd, 'integrations')), []);
  assert.match(r.stdout, /^wrote config\.yaml/m);
  assert.match(r.stdout, /^made {2}integrations\//m);
  assert.match(r.stdout, / serve$/m);

  writeFileSync(join(cwd, 'config.yaml'), 'server:\n  port: 9999\n');
  const again = await runCli(['init'], { cwd });
  assert.equal(again.code, 2);
  assert.match(again.stderr, new RegExp(`${join(cwd, 'config.yaml').replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} already exists: init never overwrites`));
  assert.match(again.stderr, /init --print/);
  assert.equal(readFileSync(join(cwd, 'config.yaml'), 'utf8'), 'server:\n  port: 9999\n', 'left as it was');

  const printed = await runCli(['init', '--print'], { cwd });
  assert.equal(printed.code, 0);
  assert.equal(printed.stdout, shipped);
  const elsewhere = await runCli(['init', 'site/one'], { cwd });
  assert.equal(elsewhere.code, 0, elsewhere.stderr);
  assert.equal(readFileSync(join(cwd, 'site/one/config.yaml'), 'utf8'), shipped);
  assert.ok(existsSync(join(cwd, 'site/one/integrations')));
  assert.match(elsewhere.stdout, /^Next: cd site\/one && .* serve$/m);

  // A file where the folder or its integrations folder would go: said in one line, nothing left half-written.
  writeFileSync(join(cwd, 'a-file'), 'x');
  const onFile = await runCli(['init', 'a-file'], { cwd });
  assert.equal(onFile.code, 2);
  assert.match(onFile.stderr, /^switchyard: cannot write .*a-file\/config\.yaml \(a file is in the way\)$/m);
  mkdirSync(join(cwd, 'blocked'));
  writeFileSync(join(cwd, 'blocked/integrations'), 'x');
  const blocked = await runCli(['init', 'blocked'], { cwd });
  assert.equal(blocked.code, 2);
  assert.match(blocked.stderr, /cannot write .*blocked\/integrations\/ \(a file is in the way\)/);
  assert.equal(existsSync(join(cwd, 'blocked/config.yaml')), false, 'no config.yaml without its folder');

  // A config error's hint fits a user without the source tree.
  writeFileSync(join(cwd, 'config.yaml'), 'server:\n  prot: 1\n');
  const bad = await runCli(['integrations', 'list'], { cwd });
  assert.equal(bad.code, 2);
  assert.doesNotMatch(bad.stderr, /top of the repository/);
  assert.match(bad.stderr, /hint: every key with its default and what it does: `switchyard init --print`/);
  const missing = await runCli(['integrations', 'list', '--config', 'nowhere.yaml'], { cwd });
  assert.match(missing.stderr, /`switchyard init` writes a commented config\.yaml/);
});

test("a refused admin token: the CLI names the server's URL and where it read the token (the variable, or the file), never the token", async (t) => {
  const s = await startTestServer(t);
  const wrong = 'sy_admin_not-this-servers-token-1234';
  const byEnv = await runCli(['installations', 'list'], { env: { SWITCHYARD_URL: s.url, SWITCHYARD_ADMIN_TOKEN: wrong } });
  assert.equal(byEnv.code, 1);
  assert.match(
    byEnv.stderr,
    new RegExp(`^switchyard: the server at ${s.url.replace(/[.]/g, '\\.')} refused the admin token read from SWITCHYARD_ADMIN_TOKEN$`, 'm'),
  );
  assert.doesNotMatch(byEnv.stderr, new RegExp(wrong));

  // Another data directory's generated token, found through its config.yaml.
  const cwd = tmpDir(t);
  mkdirSync(join(cwd, 'data'));
  writeFileSync(join(cwd, 'data/admin-token'), `${wrong}\n`);
  writeFileSync(join(cwd, 'config.yaml'), 'data_dir: ./data\n');
  const env: NodeJS.ProcessEnv = { SWITCHYARD_URL: s.url };
  const byFile = await runCli(['installations', 'list'], { cwd, env: { ...env, SWITCHYARD_ADMIN_TOKEN: undefined } });
  assert.equal(byFile.code, 1);
  assert.match(byFile.stderr, new RegExp(`refused the admin token read from ${join(cwd, 'data/admin-token').replace(/[.]/g, '\\.')}$`, 'm'));
  assert.match(byFile.stderr, /hint: .*--config/);
  assert.doesNotMatch(byFile.stderr, new RegExp(wrong));
});
