/**
 * A folder copied from GitBook's catalogue, as a new user meets it: its dependencies installed with
 * the command docs/gitbook.md gives (plain `npm install` fails on the catalogue's `workspace:*`
 * tooling), then `switchyard check`. npm runs offline here: the only package is a local one.
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { appendFileSync, cpSync, existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT, runCli, tmpDir } from './helpers/index.ts';

// npm's own log level too: run under `npm run -s` (silent), the inherited npm_config_loglevel made
// npm say nothing at all of its refusal (the empty answer this test once met).
const NPM_OFFLINE = { npm_config_offline: 'true', npm_config_update_notifier: 'false', npm_config_cache: '', npm_config_loglevel: 'warn' };

/** gb-analytics as the catalogue ships a folder: a package.json with workspace:* tooling, and a dependency of its own. */
function catalogueFolder(t: TestContext): { cwd: string; folder: string } {
  const cwd = tmpDir(t);
  writeFileSync(join(cwd, 'config.yaml'), 'sandbox:\n  cpu_time: 5s\n  startup_time: 15s\n');
  const pkg = join(cwd, 'packages/tiny-greeting');
  mkdirSync(pkg, { recursive: true });
  writeFileSync(join(pkg, 'package.json'), JSON.stringify({ name: 'tiny-greeting', version: '1.0.0', type: 'module', main: 'index.js' }));
  writeFileSync(join(pkg, 'index.js'), "export const greeting = 'hello from tiny-greeting';\n");
  const folder = join(cwd, 'integrations/gb-analytics');
  cpSync(join(ROOT, 'test/fixtures/gitbook/gb-analytics'), folder, { recursive: true });
  writeFileSync(
    join(folder, 'package.json'),
    JSON.stringify({
      name: '@gitbook/integration-gb-analytics',
      private: true,
      dependencies: { '@gitbook/runtime': 'workspace:*', 'tiny-greeting': 'file:../../packages/tiny-greeting' },
      devDependencies: { '@gitbook/cli': 'workspace:*', '@gitbook/tsconfig': 'workspace:*' },
    }),
  );
  appendFileSync(join(folder, 'src/index.ts'), "\nimport { greeting } from 'tiny-greeting';\nconsole.log(greeting);\n");
  return { cwd, folder };
}

test('a GitBook catalogue folder: plain `npm install` fails on workspace:*, the command docs/gitbook.md gives installs its dependencies and check bundles them', async (t) => {
  const { cwd, folder } = catalogueFolder(t);
  const npm = spawnSync('npm', ['install'], { cwd: folder, encoding: 'utf8', env: { ...process.env, ...NPM_OFFLINE } });
  assert.notEqual(npm.status, 0, 'npm install in the folder fails');
  assert.match(
    `${npm.stderr}${npm.stdout}`,
    /EUNSUPPORTEDPROTOCOL|workspace:/,
    `npm install exited ${npm.status} (${npm.signal ?? 'no signal'}, ${npm.error ?? 'no error'}): ${npm.stdout}`,
  );

  const before = await runCli(['check', 'integrations/gb-analytics'], { cwd });
  assert.equal(before.code, 1, 'the folder needs its dependency');
  assert.match(before.stdout + before.stderr, /package "tiny-greeting" is not installed in the integration folder/);

  const doc = readFileSync(join(ROOT, 'docs/gitbook.md'), 'utf8');
  assert.doesNotMatch(doc, /run `npm install` in it/);
  const documented = /`switchyard (gitbook install) <folder>`/.exec(doc);
  assert.ok(documented, 'docs/gitbook.md gives the command');
  const installed = await runCli([...documented[1].split(' '), 'integrations/gb-analytics'], { cwd, env: NPM_OFFLINE, timeoutMs: 120_000 });
  assert.equal(installed.code, 0, installed.stderr);
  assert.match(installed.stdout, /installed into .*gb-analytics\/node_modules: tiny-greeting@file:/);
  assert.match(
    installed.stdout,
    /left out, GitBook's own tooling: @gitbook\/runtime@workspace:\*, @gitbook\/cli@workspace:\*, @gitbook\/tsconfig@workspace:\*/,
  );
  const file = join(folder, 'node_modules/tiny-greeting/index.js');
  assert.ok(lstatSync(file).isFile(), 'a copy in the folder, not a link out of it');
  assert.deepEqual(
    readdirSync(folder).filter((f) => f.startsWith('.switchyard')),
    [],
    'nothing left beside it',
  );

  const check = await runCli(['check', 'integrations/gb-analytics', '--json'], { cwd });
  const j = JSON.parse(check.stdout);
  assert.equal(check.code, 0, JSON.stringify(j.errors));
  assert.equal(j.ok, true);

  // Run again: the folder's node_modules is replaced, not nested.
  const again = await runCli(['gitbook', 'install', folder], { cwd, env: NPM_OFFLINE, timeoutMs: 120_000 });
  assert.equal(again.code, 0, again.stderr);
  assert.ok(lstatSync(file).isFile());
});

test('gitbook install: a folder without package.json, or with only workspace:* packages, says so', async (t) => {
  const cwd = tmpDir(t);
  mkdirSync(join(cwd, 'empty'));
  const none = await runCli(['gitbook', 'install', 'empty'], { cwd });
  assert.equal(none.code, 2);
  assert.match(none.stderr, /empty has no package\.json: it has no dependencies to install/);
  mkdirSync(join(cwd, 'tools'));
  writeFileSync(join(cwd, 'tools/package.json'), JSON.stringify({ devDependencies: { '@gitbook/cli': 'workspace:*' } }));
  const tools = await runCli(['gitbook', 'install', 'tools'], { cwd });
  assert.equal(tools.code, 0, tools.stderr);
  assert.match(tools.stdout, /no dependencies to install \(left out, GitBook's own tooling: @gitbook\/cli@workspace:\*\)/);
  // A name is handed to npm as an argument: one that would be an option never reaches it, and the
  // folder's node_modules is left as it was.
  mkdirSync(join(cwd, 'tools/node_modules/kept'), { recursive: true });
  for (const [dependencies, said] of [
    [{ '--registry=https://evil.example/': '1' }, /dependencies: "--registry=https:\/\/evil\.example\/" is not an npm package name/],
    ['x', /dependencies must be a map of package name to version/],
    [{ a: 1 }, /dependencies: "a" has no version string/],
  ] as const) {
    writeFileSync(join(cwd, 'tools/package.json'), JSON.stringify({ dependencies }));
    const refused = await runCli(['gitbook', 'install', 'tools'], { cwd, env: NPM_OFFLINE });
    assert.equal(refused.code, 2, refused.stderr);
    assert.match(refused.stderr, said);
    assert.doesNotMatch(refused.stderr, /npm install/, 'npm never ran');
    assert.ok(existsSync(join(cwd, 'tools/node_modules/kept')));
  }
  const missing = await runCli(['gitbook', 'install', 'nowhere'], { cwd });
  assert.equal(missing.code, 2);
  assert.match(missing.stderr, /nowhere is not a folder/);
});

test("a catalogue folder whose tsconfig.json extends GitBook's workspace config: one warning, in this program's words, never the bundler's plugin wording", async (t) => {
  const { cwd, folder } = catalogueFolder(t);
  writeFileSync(join(folder, 'tsconfig.json'), '{\n  "extends": "@gitbook/tsconfig/integration.json",\n  "compilerOptions": { "lib": ["ES6", "DOM"] }\n}\n');
  mkdirSync(join(folder, 'node_modules/tiny-greeting'), { recursive: true });
  cpSync(join(cwd, 'packages/tiny-greeting'), join(folder, 'node_modules/tiny-greeting'), { recursive: true });
  const r = await runCli(['check', 'integrations/gb-analytics', '--json'], { cwd });
  const j = JSON.parse(r.stdout);
  assert.equal(r.code, 0, JSON.stringify(j.errors));
  const about = j.warnings.filter((w: { where: string }) => w.where.includes('tsconfig.json'));
  assert.equal(about.length, 1, JSON.stringify(about, null, 2));
  assert.equal(about[0].where, 'integrations/gb-analytics/tsconfig.json:2:14');
  assert.equal(about[0].message, 'extends "@gitbook/tsconfig/integration.json", which is not in the integration folder: its compiler options are not applied');
  assert.match(about[0].hint, /JSX and the runtime are set here/);
  const text = await runCli(['check', 'integrations/gb-analytics'], { cwd });
  assert.doesNotMatch(text.stdout + text.stderr, /plugin|switchyard-confine|Cannot find base config/i);
});
