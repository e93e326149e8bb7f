/**
 * JSON null in a request body is a value the client sent, not a key left out: route()'s schemas
 * must refuse it where the key takes no null, as the hand-written checks did before (d8a1a4d).
 * Taken as absent, `"installation": null` widens a bulk replay to every installation, and
 * `"dryRun": null` turns a dry run into a real one.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { inspectionServer } from './inspection-support.ts';

test('a bulk replay refuses null for its filters and dryRun instead of dropping them (400, where names the key)', async (t) => {
  const s = await inspectionServer(t);
  const cases: Array<[string, Record<string, unknown>, string]> = [
    ['/api/v1/deliveries/replay', { status: 'failed', installation: null, dryRun: true }, 'installation'],
    ['/api/v1/deliveries/replay', { status: 'failed', type: null, dryRun: true }, 'type'],
    ['/api/v1/deliveries/replay', { status: 'failed', since: null, dryRun: true }, 'since'],
    // Matches nothing, so the replay it turns into changes nothing here.
    ['/api/v1/deliveries/replay', { status: 'delivered', installation: 'inst_none', dryRun: null }, 'dryRun'],
    ['/api/v1/handler-runs/replay', { failed: true, since: '1h', installation: null }, 'installation'],
  ];
  for (const [path, body, where] of cases) {
    const r = await s.api('POST', path, body);
    assert.equal(r.status, 400, `${path} ${JSON.stringify(body)}: ${r.status} ${JSON.stringify(r.body)}`);
    assert.equal(r.body.error.where, where);
  }
});

test('installing and configuring refuse null where a value of a type is wanted (webhook_secret, configuration, externalIds)', async (t) => {
  const s = await inspectionServer(t);
  const id = await s.subscribe('http://127.0.0.1:9/hook');
  const cases: Array<[string, string, Record<string, unknown>, string]> = [
    [
      'POST',
      '/api/v1/installations',
      { integration: 'webhook', configuration: { webhook_url: 'http://127.0.0.1:9/hook' }, webhook_secret: null },
      'webhook_secret',
    ],
    ['POST', '/api/v1/installations', { integration: 'webhook', configuration: null }, 'configuration'],
    ['PATCH', `/api/v1/installations/${id}`, { configuration: {}, externalIds: null }, 'externalIds'],
  ];
  for (const [method, path, body, where] of cases) {
    const r = await s.api(method, path, body);
    assert.equal(r.status, 400, `${method} ${path} ${JSON.stringify(body)}: ${r.status} ${JSON.stringify(r.body).slice(0, 200)}`);
    assert.equal(r.body.error.where, where);
  }
});
