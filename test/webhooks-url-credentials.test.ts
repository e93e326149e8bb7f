/** A webhook URL with credentials (`https://user:pw@host/`): sent with them, shown without them. */
import { test } from 'node:test';
import { sql } from './helpers/index.ts';
import assert from 'node:assert/strict';
import { hideUrlCredentials } from '../src/log/index.ts';
import { inspectionServer } from './inspection-support.ts';
import { scriptedReceiver } from './webhooks-support.ts';

test('hideUrlCredentials masks the user-info of every URL in a text and nothing else', () => {
  assert.equal(hideUrlCredentials('https://user:pw@host/x?a=b@c'), 'https://***@host/x?a=b@c');
  assert.equal(hideUrlCredentials('not a valid URL: http://u:p@@h:1/ (and https://a@b@host/p)'), 'not a valid URL: http://***@h:1/ (and https://***@host/p)');
  assert.equal(hideUrlCredentials('http://h/p@x mailto:a@b https://host/'), 'http://h/p@x mailto:a@b https://host/');
});

test('credentials in a webhook URL are sent as Basic auth and shown nowhere: API, CLI tables and --json, installation, server log', async (t) => {
  const s = await inspectionServer(t);
  const r = await scriptedReceiver(t, () => 200);
  const url = r.url.replace('http://', 'http://hook-user:s3cr3t%40pw@');
  const shown = r.url.replace('http://', 'http://***@');
  const inst = await s.subscribe(url, ['site_view']);
  const id = (await s.send('site_view')).deliveries[0].id;
  const d = await s.settled(id);
  assert.equal(d.status, 'delivered');
  assert.equal(r.requests[0].headers.authorization, `Basic ${Buffer.from('hook-user:s3cr3t@pw').toString('base64')}`);
  assert.equal(d.url, shown);
  assert.equal(d.attempts[0].url, shown);

  const outputs: Record<string, string> = {
    'GET /api/v1/deliveries': JSON.stringify((await s.api('GET', '/api/v1/deliveries')).body),
    'GET /api/v1/deliveries/:id': JSON.stringify(d),
    'GET /api/v1/installations/:id': JSON.stringify((await s.api('GET', `/api/v1/installations/${inst}`)).body),
    'deliveries list': (await s.cli(['deliveries', 'list'])).stdout,
    'deliveries list --json': (await s.cli(['deliveries', 'list', '--json'])).stdout,
    'deliveries show': (await s.cli(['deliveries', 'show', id])).stdout,
    'deliveries show --json': (await s.cli(['deliveries', 'show', id, '--json'])).stdout,
    'installations show': (await s.cli(['installations', 'show', inst])).stdout,
    'server log': JSON.stringify(s.logs),
  };
  for (const [where, text] of Object.entries(outputs)) {
    assert.ok(!/s3cr3t|hook-user/.test(text), `${where}: ${text}`);
  }
  for (const where of ['GET /api/v1/deliveries', 'deliveries show --json', 'GET /api/v1/installations/:id'])
    assert.ok(outputs[where].includes('http://***@127.0.0.1'), where);

  const revealed = await s.api('GET', `/api/v1/installations/${inst}?reveal=true`);
  assert.equal(revealed.body.installation.configuration.webhook_url, url, 'the admin may still read it whole');
  const stored = (await sql.get<{ url: string }>(s.services.store, 'SELECT url FROM webhook_deliveries WHERE id = ?', [id]))!;
  assert.equal(stored.url, url, 'the stored URL keeps them for sending');
});
