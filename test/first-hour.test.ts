/**
 * What a newcomer meets in the first hour: a refused local receiver says which setting allows it,
 * at install time and in the delivery's error.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { samplePayload } from '../src/events/index.ts';
import { deliveryServer, scriptedReceiver } from './webhooks-support.ts';

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
