/**
 * What a newcomer meets in the first hour: a refused local receiver says which setting allows it,
 * at install time and in the delivery's error.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { samplePayload } from '../src/events/index.ts';
import { join } from 'node:path';
import { deliveryServer, scriptedReceiver } from './webhooks-support.ts';
import { ROOT, runCli, startTestServer } from './helpers/index.ts';

test('a webhook URL on this machine is flagged at install, and its refused delivery names webhooks.allow_private_networks', async (t) => {
  const s = await deliveryServer(t, { webhooks: { allow_private_networks: false, max_retries: 0 } });
  const receiver = await scriptedReceiver(t, () => 200);
  const r = await s.api('POST', '/api/v1/installations', { integration: 'webhook', configuration: { webhook_url: receiver.url, event_types: 'site_view' } });
  assert.equal(r.status, 201);
  assert.equal(r.body.installation.warnings.length, 1);
  assert.match(r.body.installation.warnings[0], /^configuration\.webhook_url: 127\.0\.0\.1 is a private or loopback address: deliveries to it will be refused .*set webhooks\.allow_private_networks: true/);
  const shown = await s.api('GET', `/api/v1/installations/${r.body.installation.id}`);
  assert.deepEqual(shown.body.installation.warnings, r.body.installation.warnings, 'every view says it');

  const sent = await s.send(samplePayload('site_view'));
  assert.equal(sent.status, 202);
  assert.equal(sent.body.deliveries.length, 1);
  const d = await s.settled(sent.body.deliveries[0].id);
  assert.equal(d.status, 'failed');
  assert.match(d.attempts.at(-1)!.error ?? '', /set webhooks\.allow_private_networks: true in config\.yaml/);
  assert.equal(receiver.requests.length, 0);

  const publicUrl = await s.api('POST', '/api/v1/installations', { integration: 'webhook', configuration: { webhook_url: 'https://hooks.example.com/x', event_types: 'site_view' } });
  assert.deepEqual(publicUrl.body.installation.warnings, []);
});

test('a fresh start opens without errors: an example whose secrets are unset "needs configuration", in one warning line', async (t) => {
  const s = await startTestServer(t, { integrations_dir: join(ROOT, 'integrations') });
  const errors = s.logs.filter((l) => l.level === 'error');
  assert.deepEqual(errors, [], 'no red wall');
  const notes = s.logs.filter((l) => l.msg === 'integration needs configuration');
  assert.equal(notes.length, 1);
  assert.equal(notes[0].integration, 'oauth-example');
  assert.equal(notes[0].level, 'warn');
  assert.match(String(notes[0].set), /^OAUTH_EXAMPLE_CLIENT_ID, OAUTH_EXAMPLE_CLIENT_SECRET, OAUTH_EXAMPLE_PROVIDER_URL in the environment or in .*oauth-example\/\.env \(copy .*\.env\.example/);
  const list = await s.api('GET', '/api/v1/integrations');
  const byName = Object.fromEntries(list.body.integrations.map((i: { name: string; status: string }) => [i.name, i.status]));
  assert.deepEqual(byName, { 'hello-components': 'loaded', 'oauth-example': 'needs_configuration', webhook: 'loaded' });
  const cli = await runCli(['integrations', 'list'], { env: { SWITCHYARD_URL: s.url, SWITCHYARD_ADMIN_TOKEN: s.token } });
  assert.match(cli.stdout, /oauth-example\s+needs configuration/);
});
