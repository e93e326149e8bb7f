/**
 * The registry through its faces: GET /api/v1/integrations[/:name], `switchyard integrations
 * list|show`, `switchyard new` and `switchyard check`, against a real server and the real CLI.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { cpSync, existsSync, lstatSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { registryModule } from '../src/registry/index.ts';
import { defineModule } from '../src/module/contract.ts';
import { ROOT, runCli, startTestServer, tmpDir, waitFor } from './helpers/index.ts';

async function server(t: Parameters<typeof startTestServer>[0]) {
  const dir = tmpDir(t);
  cpSync(join(ROOT, 'integrations'), dir, { recursive: true });
  writeFileSync(
    join(dir, 'oauth-example/.env'),
    'OAUTH_EXAMPLE_CLIENT_ID=client-id-value\nOAUTH_EXAMPLE_CLIENT_SECRET=very-secret-value\nOAUTH_EXAMPLE_PROVIDER_URL=https://p.example\n',
  );
  const s = await startTestServer(t, { integrations_dir: dir }, { modules: [registryModule] });
  const cliEnv = { SWITCHYARD_URL: s.url, SWITCHYARD_ADMIN_TOKEN: s.token };
  return { s, dir, cliEnv, cwd: roomyCwd(t) };
}

/** A working folder whose config.yaml gives `check` room to start an isolate on a busy machine. */
function roomyCwd(t: Parameters<typeof tmpDir>[0]): string {
  const cwd = tmpDir(t);
  writeFileSync(join(cwd, 'config.yaml'), 'sandbox:\n  cpu_time: 5s\n  startup_time: 15s\n');
  return cwd;
}

test('GET /api/v1/integrations lists every folder with status, version, scopes, blocks and configurations; never secret values', async (t) => {
  const { s } = await server(t);
  const list = await s.api('GET', '/api/v1/integrations');
  assert.equal(list.status, 200);
  const names = list.body.integrations.map((i: any) => [i.name, i.status]);
  assert.deepEqual(names, [
    ['hello-components', 'loaded'],
    ['oauth-example', 'loaded'],
    ['webhook', 'loaded'],
  ]);
  const hello = list.body.integrations[0];
  assert.match(hello.version, /^[0-9a-f]{16}$/);
  assert.equal(hello.title, 'Hello components');
  assert.deepEqual(hello.scopes, ['space:content:read']);
  assert.deepEqual(hello.blocks, [{ id: 'counter', title: 'Counter', description: 'A button that counts its presses' }]);
  assert.equal(hello.configurations.account.properties.channel.completion_url, '/channels');
  assert.equal(hello.manifest.visibility, 'private');

  const one = await s.api('GET', '/api/v1/integrations/oauth-example');
  assert.equal(one.status, 200);
  assert.deepEqual(one.body.integration.manifest.secrets, ['CLIENT_ID', 'CLIENT_SECRET', 'PROVIDER_URL']);
  assert.ok(!JSON.stringify(list.body).includes('very-secret-value'));
  assert.ok(!JSON.stringify(one.body).includes('very-secret-value'));
  assert.equal(one.body.integration.configurations.account.properties.oauth_credentials.callback_url, '/oauth');

  const missing = await s.api('GET', '/api/v1/integrations/nope');
  assert.equal(missing.status, 404);
  assert.equal(missing.body.error.code, 'not_found');
  assert.equal((await s.api('GET', '/api/v1/integrations', undefined, 'wrong-token')).status, 401);
});

test('integrations list|show: tables for people, --json for scripts, errors of a rejected change', async (t) => {
  const { s, dir, cliEnv, cwd } = await server(t);
  writeFileSync(
    join(dir, 'webhook/platform-manifest.yaml'),
    readFileSync(join(dir, 'webhook/platform-manifest.yaml'), 'utf8').replace('visibility: public', 'visibility: everyone'),
  );
  await waitFor(async () => (await s.api('GET', '/api/v1/integrations/webhook')).body.integration.status === 'error');

  const list = await runCli(['integrations', 'list'], { env: cliEnv, cwd });
  assert.equal(list.code, 0, list.stderr);
  assert.match(list.stdout, /^NAME\s+STATUS\s+VERSION\s+TITLE\s+PROBLEMS$/m);
  assert.match(list.stdout, /^hello-components\s+loaded\s+[0-9a-f]{16}\s+Hello components/m);
  assert.match(list.stdout, /^webhook\s+error \(serving the last good version\)\s+no script\s+Webhook\s+1 error/m);

  const json = await runCli(['integrations', 'list', '--json'], { env: cliEnv, cwd });
  const parsed = JSON.parse(json.stdout);
  // Shaped as the other lists and the API: an object naming its items, not a bare array.
  assert.deepEqual(
    parsed.integrations.map((i: any) => i.name),
    ['hello-components', 'oauth-example', 'webhook'],
  );
  assert.deepEqual(parsed, (await s.api('GET', '/api/v1/integrations')).body);

  const show = await runCli(['integrations', 'show', 'webhook'], { env: cliEnv, cwd });
  assert.equal(show.code, 0, show.stderr);
  assert.match(show.stdout, /status\s+error/);
  assert.match(show.stdout, /webhook_url\s+string\s+yes\s+Webhook URL: URL that receives the signed POSTs/);
  assert.match(show.stdout, /errors:\n\s+error .*webhook\/platform-manifest\.yaml:\d+:\d+: visibility: the string "everyone" is not allowed/);

  const showJson = JSON.parse((await runCli(['integrations', 'show', 'hello-components', '--json'], { env: cliEnv, cwd })).stdout);
  assert.equal(showJson.name, 'hello-components');

  const none = await runCli(['integrations', 'show', 'nope'], { env: cliEnv, cwd });
  assert.equal(none.code, 1);
  assert.match(none.stderr, /integration "nope" does not exist/);
});

test('integrations list says when the server is not running', async (t) => {
  const r = await runCli(['integrations', 'list'], { env: { SWITCHYARD_URL: 'http://127.0.0.1:9', SWITCHYARD_ADMIN_TOKEN: 'x' }, cwd: tmpDir(t) });
  assert.equal(r.code, 1);
  assert.match(r.stderr, /the switchyard server is not running at http:\/\/127\.0\.0\.1:9/);
});

test('switchyard new creates an integration that passes check and serves as soon as it lands', async (t) => {
  const { s, dir, cwd } = await server(t);
  const created = await runCli(['new', 'my-integration', '--dir', dir], { cwd });
  assert.equal(created.code, 0, created.stderr);
  for (const f of ['platform-manifest.yaml', 'src/index.tsx', 'tsconfig.json', 'package.json', '.gitignore'])
    assert.ok(existsSync(join(dir, 'my-integration', f)), f);
  const script = readFileSync(join(dir, 'my-integration/src/index.tsx'), 'utf8');
  assert.match(script, /createComponent\(/);
  assert.match(script, /events: \{/);
  assert.match(script, /fetch: async/);

  const served = await waitFor(async () => {
    const r = await s.api('GET', '/api/v1/integrations/my-integration');
    return r.body.integration?.status === 'loaded' && r.body.integration;
  });
  assert.match(served.version, /^[0-9a-f]{16}$/);
  assert.equal(served.manifest.visibility, 'private');
  assert.deepEqual(
    served.blocks.map((b: any) => b.id),
    ['hello'],
  );

  const check = await runCli(['check', join(dir, 'my-integration')], { cwd });
  assert.equal(check.code, 0, check.stderr);
  assert.match(check.stdout, /manifest\s+ok/);
  assert.match(check.stdout, /bundle\s+ok\s+.*version [0-9a-f]{16}/);
  assert.match(check.stdout, /sandbox\s+ok\s+fetch; components: hello; events: space_content_updated/);
  assert.match(check.stdout, /^ok$/m);

  const again = await runCli(['new', 'my-integration', '--dir', dir], { cwd });
  assert.equal(again.code, 1);
  assert.match(again.stderr, /already exists/);
  const bad = await runCli(['new', 'My_Integration', '--dir', dir], { cwd });
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /"My_Integration" is not a valid integration name/);
});

test("switchyard check: a 60-character property title passes with a warning at file:line:col citing GitBook's validator", async (t) => {
  const cwd = roomyCwd(t);
  await runCli(['new', 'long-title', '--dir', cwd], { cwd });
  const file = join(cwd, 'long-title', 'platform-manifest.yaml');
  const title = 'T'.repeat(60);
  writeFileSync(
    file,
    `${readFileSync(file, 'utf8').replace(/\nconfigurations:[\s\S]*$/, '\n')}configurations:\n  account:\n    properties:\n      channel:\n        type: string\n        title: ${title}\n        description: Where to post\n`,
  );
  const r = await runCli(['check', 'long-title'], { cwd });
  assert.equal(r.code, 0, r.stdout + r.stderr);
  const line =
    readFileSync(file, 'utf8')
      .split('\n')
      .findIndex((l) => l.includes(title)) + 1;
  assert.match(
    r.stdout + r.stderr,
    new RegExp(
      `warning long-title/platform-manifest\\.yaml:${line}:16: configurations\\.account\\.properties\\.channel\\.title: is 60 characters; GitBook's manifest validator allows at most 50`,
    ),
  );
});

test('switchyard check lists every error with file:line:col and exits 1; --json for scripts', async (t) => {
  const cwd = roomyCwd(t);
  await runCli(['new', 'broken', '--dir', cwd], { cwd });
  const dir = join(cwd, 'broken');
  writeFileSync(
    join(dir, 'platform-manifest.yaml'),
    readFileSync(join(dir, 'platform-manifest.yaml'), 'utf8')
      .replace('visibility: private', 'visibility: secret')
      .replace('  - space:content:read', '  - site:script:inject'),
  );
  const r = await runCli(['check', 'broken'], { cwd });
  assert.equal(r.code, 1);
  assert.match(r.stderr, /error broken\/platform-manifest\.yaml:\d+:\d+: visibility: the string "secret" is not allowed/);
  assert.match(r.stderr, /error broken\/platform-manifest\.yaml:\d+:\d+: scopes\[0\]: "site:script:inject" is an internal scope/);
  assert.match(r.stderr, /2 errors/);

  writeFileSync(
    join(dir, 'platform-manifest.yaml'),
    readFileSync(join(dir, 'platform-manifest.yaml'), 'utf8')
      .replace('visibility: secret', 'visibility: private')
      .replace('  - site:script:inject', '  - space:content:read'),
  );
  writeFileSync(join(dir, 'src/index.tsx'), "import x from 'left-pad';\nexport default x;\n");
  const j = await runCli(['check', dir, '--json'], { cwd });
  assert.equal(j.code, 1);
  const out = JSON.parse(j.stdout);
  assert.equal(out.ok, false);
  assert.equal(out.name, 'broken');
  assert.match(out.errors[0].where, /broken\/src\/index\.tsx:1:15$/);
  assert.match(out.errors[0].message, /package "left-pad" is not installed in the integration folder/);

  // Loaded in the sandbox: a script that does not load, and a block without its component.
  writeFileSync(join(dir, 'src/index.tsx'), 'export const nothing = 1;\n');
  writeFileSync(join(dir, 'platform-manifest.yaml'), readFileSync(join(dir, 'platform-manifest.yaml'), 'utf8'));
  const noDefault = await runCli(['check', 'broken'], { cwd });
  assert.equal(noDefault.code, 1);
  assert.match(noDefault.stderr, /error broken\/src\/index\.tsx: the script failed to load in the sandbox: .*default export/);
  writeFileSync(
    join(dir, 'src/index.tsx'),
    "import { createIntegration } from '@switchyard/runtime';\nexport default createIntegration({ components: [] });\n",
  );
  const noComponent = await runCli(['check', 'broken'], { cwd });
  assert.equal(noComponent.code, 1);
  assert.match(noComponent.stderr, /error broken\/platform-manifest\.yaml:\d+:\d+: block "hello" has no component: the script defines no components/);

  const shipped = await runCli(['check', join(ROOT, 'integrations/hello-components')], { cwd });
  assert.equal(shipped.code, 0, shipped.stderr);
  const webhook = await runCli(['check', join(ROOT, 'integrations/webhook')], { cwd });
  assert.equal(webhook.code, 0, webhook.stderr);
  assert.match(webhook.stdout, /bundle\s+no script/);
});

test('the registry module verifies changed versions with the sandbox check (services.verifyScript), not the first load', async (t) => {
  const dir = tmpDir(t);
  cpSync(join(ROOT, 'integrations/hello-components'), join(dir, 'hello-components'), { recursive: true });
  const checked: string[] = [];
  // Stands in for the sandbox module's check.
  const fakeSandbox = defineModule({
    name: 'fake-sandbox',
    provides: ['verifyScript'],
    start(services) {
      services.verifyScript = async (script) => {
        checked.push(script.version);
        return script.code.includes('BROKEN') ? 'SyntaxError: BROKEN at top level' : undefined;
      };
    },
  });
  const s = await startTestServer(t, { integrations_dir: dir }, { modules: [fakeSandbox, registryModule] });
  assert.equal(checked.length, 0, 'the start-up pass loads no script in the sandbox (isolates start on first use)');
  const good = (await s.api('GET', '/api/v1/integrations/hello-components')).body.integration.version;
  const file = join(dir, 'hello-components/src/route.ts');
  writeFileSync(file, `${readFileSync(file, 'utf8')}\nconsole.log('BROKEN');\n`);
  const after = await waitFor(async () => {
    const i = (await s.api('GET', '/api/v1/integrations/hello-components')).body.integration;
    return i.status === 'error' && i;
  });
  assert.equal(after.version, good, 'the last good version keeps serving');
  assert.match(after.errors[0].message, /the script failed to load in the sandbox: SyntaxError: BROKEN at top level/);
  assert.ok(s.logs.some((l) => l.msg === 'integration change rejected; the last good version keeps serving'));
});

test('switchyard new: the scaffold type-checks against the runtime library types it copies (editors autocomplete)', async (t) => {
  const { runtimeTypes } = await import('../src/cli/new.ts');
  const types = (await runtimeTypes()) ?? '';
  const complete = /export function createIntegration/.test(types) && /declare module '@switchyard\/runtime\/jsx-runtime'/.test(types);
  assert.ok(complete, 'the runtime library declares createIntegration and the JSX runtime');
  const cwd = tmpDir(t);
  assert.equal((await runCli(['new', 'typed', '--dir', cwd], { cwd })).code, 0);
  const { spawnSync } = await import('node:child_process');
  const tsc = spawnSync(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', join(cwd, 'typed/tsconfig.json')], { encoding: 'utf8' });
  assert.equal(tsc.status, 0, tsc.stdout + tsc.stderr);
});

test('switchyard new writes through no link planted beside the target: its staging folder is a fresh one of its own', async (t) => {
  const { writeFolder } = await import('../src/cli/new.ts');
  const parent = tmpDir(t);
  const elsewhere = tmpDir(t);
  // Whoever can write to the integrations folder could name the staging folder in advance.
  symlinkSync(elsewhere, join(parent, `.new-planted-${process.pid}`));
  await writeFolder(join(parent, 'planted'), async (staging) => writeFileSync(join(staging, 'platform-manifest.yaml'), 'name: planted\n'));
  assert.deepEqual(readdirSync(elsewhere), [], 'nothing written through the link');
  assert.ok(lstatSync(join(parent, 'planted')).isDirectory(), 'the target is a folder, not the link');
  assert.equal(readFileSync(join(parent, 'planted/platform-manifest.yaml'), 'utf8'), 'name: planted\n');
  const umask = process.umask();
  assert.equal(lstatSync(join(parent, 'planted')).mode & 0o777, 0o777 & ~umask, 'made with the usual permissions');
  assert.deepEqual(readdirSync(parent).sort(), [`.new-planted-${process.pid}`, 'planted'], 'no staging folder left behind');
});
