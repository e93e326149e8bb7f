/**
 * The deployment files in deploy/: the container image's and the systemd unit's config.yaml loads
 * with the variables each sets, their paths agree with each other, and systemd accepts the unit
 * (systemd-analyze verify, where systemd is installed). Docker cannot build here (no daemon and no
 * registry for base images), so the Dockerfile is linted (dockerfile-utils, the validator behind
 * editors' Dockerfile support) and checked for what would break a run.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { validate as lintDockerfile } from 'dockerfile-utils';
import { loadConfig } from '../src/config/index.ts';
import { ROOT, tmpDir } from './helpers/index.ts';

const dockerfile = readFileSync(join(ROOT, 'deploy/Dockerfile'), 'utf8');
const unit = readFileSync(join(ROOT, 'deploy/switchyard.service'), 'utf8');

/** ENV lines of the Dockerfile (with `\` continuations) as a map. */
function dockerEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const m of dockerfile.replace(/\\\n\s*/g, ' ').matchAll(/^ENV (.+)$/gm))
    for (const pair of m[1].trim().split(/\s+/)) {
      const [k, ...v] = pair.split('=');
      env[k] = v.join('=');
    }
  return env;
}

/** A diagnostic's text (the linter may give markup, which carries it in `value`). */
const messageOf = (d: { message: string | { value: string } }) => (typeof d.message === 'string' ? d.message : d.message.value);

test('the Dockerfile lints clean, and the linter does catch a broken one', () => {
  const problems = lintDockerfile(dockerfile).map((d) => `line ${d.range.start.line + 1}: ${messageOf(d)}`);
  assert.deepEqual(problems, []);
  // The same linter on the Dockerfile with its COPY of the executable cut short and USER emptied.
  const broken = dockerfile.replace(/^COPY dist\/switchyard .*$/m, 'COPY dist/switchyard').replace(/^USER switchyard$/m, 'USER');
  const found = lintDockerfile(broken).map((d) => messageOf(d));
  assert.ok(
    found.some((m) => /COPY requires at least two arguments/.test(m)),
    JSON.stringify(found),
  );
  assert.ok(
    found.some((m) => /no arguments/.test(m)),
    JSON.stringify(found),
  );
});

test('the container image: its config loads with the ENV it sets, and data lands on the volume', () => {
  const env = dockerEnv();
  const c = loadConfig({ path: join(ROOT, 'deploy/config.yaml'), env });
  assert.equal(c.server.host, '0.0.0.0', 'reachable from outside the container');
  assert.equal(c.server.port, 8787);
  assert.match(dockerfile, /^EXPOSE 8787$/m);
  assert.equal(c.data_dir, '/data');
  assert.match(dockerfile, /^VOLUME \["\/data"\]$/m);
  assert.match(dockerfile, /^USER switchyard$/m, 'never runs as root');
  assert.match(dockerfile, /^COPY dist\/switchyard \/usr\/local\/bin\/switchyard$/m, 'the executable npm run build writes');
  assert.match(dockerfile, /^COPY deploy\/config\.yaml \/etc\/switchyard\/config\.yaml$/m);
  assert.match(dockerfile, /^CMD \["serve", "--config", "\/etc\/switchyard\/config\.yaml"\]$/m);
  assert.match(dockerfile, /ENTRYPOINT \["\/usr\/bin\/tini", "--"/, 'an init reaps the supervised processes and forwards SIGTERM');
});

test('the systemd unit: its config loads with the Environment= it sets, and systemd accepts the unit', (t) => {
  const state = tmpDir(t);
  const expand = (v: string) => v.replace('%S', state).replace('%E', '/etc').replace('%C', '/var/cache');
  const env: Record<string, string> = {};
  for (const m of unit.matchAll(/^Environment=([A-Z_]+)=(.*)$/gm)) env[m[1]] = expand(m[2]);
  const c = loadConfig({ path: join(ROOT, 'deploy/config.yaml'), env });
  assert.equal(c.server.host, '127.0.0.1', 'behind a reverse proxy by default');
  assert.equal(c.data_dir, join(state, 'switchyard'));
  assert.equal(c.integrations_dir, '/etc/switchyard/integrations');
  assert.match(unit, /^ExecStart=\/usr\/local\/bin\/switchyard serve --config %E\/switchyard\/config\.yaml$/m);
  assert.match(unit, /^StateDirectoryMode=0700$/m);

  const analyze = spawnSync('systemd-analyze', ['--version']);
  if (analyze.error) return t.skip('systemd-analyze is not installed');
  // verify wants ExecStart's binary to exist: point it at this Node for the check.
  const copy = join(tmpDir(t), 'switchyard.service');
  writeFileSync(copy, unit.replace(/^ExecStart=\/usr\/local\/bin\/switchyard/m, `ExecStart=${process.execPath}`));
  const out = spawnSync('systemd-analyze', ['verify', copy], { encoding: 'utf8' });
  assert.equal(out.status, 0, out.stderr);
  assert.equal(out.stderr.trim(), '', 'no unknown keys or bad values');
});
