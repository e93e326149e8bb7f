/**
 * GitBook content calls forwarded to gitbook.api_url with the operator's gitbook.api_token reach
 * only where the calling integration is installed, in gitbook.organization, and only from its
 * own code's invocation tokens; a refused call never reaches the upstream (a real one on
 * 127.0.0.1 records what arrives).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { join } from 'node:path';
import { startTestServer, tmpDir } from './helpers/index.ts';
import { capabilityOf } from '../src/module/capabilities.ts';

const SCOPES = ['space:content:read', 'space:content:write', 'site:metadata:read'];

function integration(dir: string, name: string): void {
  mkdirSync(join(dir, name, 'src'), { recursive: true });
  writeFileSync(
    join(dir, name, 'platform-manifest.yaml'),
    `name: ${name}\ntitle: ${name}\ndescription: Reads GitBook content\norganization: o\nvisibility: private\nscopes: [${SCOPES.join(', ')}]\nscript: src/index.js\n`,
  );
  writeFileSync(join(dir, name, 'src/index.js'), `export default { fetch: () => new Response('ok') };\n`);
}

test('content forwarding: a space, site or the organization the integration is not installed on, another organization, a long-lived token or the admin never reach the upstream', async (t) => {
  const arrived: string[] = [];
  const upstream = createServer((req, res) => {
    arrived.push(`${req.method} ${req.url} ${req.headers.authorization}`);
    res.setHeader('content-type', 'application/json');
    res.end('{}');
  });
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
  t.after(() => upstream.close());
  const dir = tmpDir(t);
  integration(dir, 'reader');
  integration(dir, 'orgwide');
  const s = await startTestServer(t, {
    integrations_dir: dir,
    gitbook: { api_url: `http://127.0.0.1:${(upstream.address() as { port: number }).port}`, api_token: 'gb_operator', organization: 'org_here' },
  } as never);
  const install = async (body: object) => {
    const r = await s.api('POST', '/api/v1/installations', body);
    assert.equal(r.status, 201, JSON.stringify(r.body));
    return r.body as { installation: { id: string }; token: string };
  };
  const onSpace = await install({ integration: 'reader', space: 'space_mine' });
  await install({ integration: 'reader', site: 'site_mine' });
  await install({ integration: 'orgwide' });
  const minted = await s.api('POST', `/api/v1/integrations/reader/installations/${onSpace.installation.id}/tokens`);
  assert.equal(minted.status, 200, JSON.stringify(minted.body));
  const installations = capabilityOf(s.services, 'installations');
  const tokens = {
    readerInvocation: minted.body.token as string,
    readerIntegration: installations.integrationToken('reader', 60_000),
    orgwideIntegration: installations.integrationToken('orgwide', 60_000),
    readerLongLived: onSpace.token,
    admin: s.token,
  };
  const call = async (who: keyof typeof tokens, method: string, path: string) => {
    const res = await fetch(`${s.url}/api/v1${path}`, {
      method,
      headers: { authorization: `Bearer ${tokens[who]}` },
      ...(method === 'GET' ? {} : { body: '{}' }),
    });
    return { status: res.status, body: await res.text() };
  };

  const refused: Array<[keyof typeof tokens, string, string, number]> = [
    ['readerLongLived', 'GET', '/spaces/space_mine', 403],
    ['admin', 'GET', '/spaces/space_mine', 403],
    ['readerInvocation', 'DELETE', '/spaces/space_other', 403],
    ['readerIntegration', 'GET', '/spaces/space_other/content', 403],
    ['readerIntegration', 'GET', '/orgs/org_other/members', 403],
    ['readerIntegration', 'GET', '/orgs/org_here/members', 403],
    ['readerIntegration', 'GET', '/orgs/org_here/sites/site_other', 403],
    ['readerIntegration', 'GET', '/urls/content?url=https://docs.other.example/x', 403],
    ['readerIntegration', 'GET', '/spaces/space_mine%2F..%2Fspace_other', 400],
    ['orgwideIntegration', 'GET', '/orgs/org_other/members', 403],
    ['orgwideIntegration', 'GET', '/orgs/org_other/sites/site_x', 403],
  ];
  for (const [who, method, path, status] of refused) {
    const r = await call(who, method, path);
    assert.equal(r.status, status, `${who} ${method} ${path}: ${r.body}`);
  }
  assert.deepEqual(arrived, [], 'no refused call reached the upstream');

  const forwarded: Array<[keyof typeof tokens, string, string]> = [
    ['readerInvocation', 'GET', '/spaces/space_mine/content'],
    ['readerInvocation', 'DELETE', '/spaces/space_mine'],
    ['readerIntegration', 'GET', '/orgs/org_here/sites/site_mine'],
    ['orgwideIntegration', 'GET', '/spaces/space_any'],
    ['orgwideIntegration', 'GET', '/orgs/org_here/members'],
    ['orgwideIntegration', 'GET', '/urls/content?url=https://docs.example/x'],
  ];
  for (const [who, method, path] of forwarded) {
    const r = await call(who, method, path);
    assert.equal(r.status, 200, `${who} ${method} ${path}: ${r.body}`);
  }
  assert.deepEqual(
    arrived,
    forwarded.map(([, method, path]) => `${method} /v1${path} Bearer gb_operator`),
  );
});
