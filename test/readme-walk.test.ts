/**
 * The README's "Five minutes" walk, run as written: its fenced commands are read out of README.md
 * and typed into a shell in the order the README gives them, against a real `switchyard serve`, a
 * real `switchyard receive` and curl. What happens between the blocks (a restart, the receiver
 * stopped for longer than the retries last) is played as a person would. The commands the README
 * holds must be the ones this test expects, so the two cannot drift apart.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import { ROOT, tmpDir, waitFor } from './helpers/index.ts';
import { freePortOutsideEphemeral } from './helpers/ports.ts';

/** The fenced `sh` lines of the README section whose heading starts with `heading`, in order. */
export function fencedCommands(markdown: string, heading: string): string[] {
  const start = markdown.indexOf(`\n## ${heading}`);
  assert.ok(start >= 0, `README.md has a "## ${heading}" section`);
  const next = markdown.indexOf('\n## ', start + 1);
  const section = markdown.slice(start, next < 0 ? undefined : next);
  const commands: string[] = [];
  let inFence = false;
  for (const raw of section.split('\n')) {
    const line = raw.trim();
    if (line.startsWith('```')) {
      inFence = !inFence;
      continue;
    }
    if (!inFence || !line) continue;
    commands.push(line.replace(/\s+#\s.*$/, ''));
  }
  return commands;
}

/** What the test expects, in order: each README command, and what a person does before it. */
const WALK = [
  'switchyard new greeter',
  'switchyard install greeter',
  "curl -X POST <public endpoint> -d '{}'",
  'switchyard logs',
  'switchyard install webhook --set webhook_url=http://127.0.0.1:9000/hook --set event_types=site_view',
  'switchyard receive --port 9000 --secret <signing secret>',
  'switchyard events send site_view',
  'switchyard events send site_view',
  'switchyard deliveries list',
  'switchyard deliveries retry <delivery id>',
];

const quote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

interface Shell {
  /** Run one line in bash in the walk's folder; resolves with its exit code and output. */
  run(line: string): Promise<{ code: number | null; stdout: string; stderr: string }>;
  /** Start one line that keeps running; resolves once `ready` appears in its output. */
  start(line: string, ready: RegExp): Promise<{ child: ChildProcess; output: () => string }>;
}

/** bash in `cwd` with `switchyard` on PATH: this checkout's CLI, run as `npm run switchyard` runs it. */
function shell(t: TestContext, cwd: string): Shell {
  const bin = join(cwd, '.bin');
  mkdirSync(bin);
  writeFileSync(join(bin, 'switchyard'), `#!/bin/sh\nexec ${quote(process.execPath)} --no-node-snapshot ${quote(join(ROOT, 'src/main.ts'))} "$@"\n`);
  chmodSync(join(bin, 'switchyard'), 0o755);
  const env: NodeJS.ProcessEnv = { ...process.env, PATH: `${bin}:${process.env.PATH}`, NO_COLOR: '1' };
  for (const k of Object.keys(env)) if (k.startsWith('SWITCHYARD_')) delete env[k];
  const spawnLine = (line: string) => spawn('bash', ['-c', `exec ${line}`], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
  return {
    run: (line) =>
      new Promise((resolve, reject) => {
        const child = spawnLine(line);
        let stdout = '';
        let stderr = '';
        child.stdout.on('data', (d) => (stdout += d));
        child.stderr.on('data', (d) => (stderr += d));
        const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
        child.on('error', reject);
        child.on('close', (code) => {
          clearTimeout(timer);
          resolve({ code, stdout, stderr });
        });
      }),
    start: (line, ready) =>
      new Promise((resolve, reject) => {
        const child = spawnLine(line);
        t.after(() => {
          if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
        });
        let out = '';
        const timer = setTimeout(() => reject(new Error(`timed out waiting for ${ready} from ${line}:\n${out}`)), 60_000);
        const onData = (d: Buffer) => {
          out += d;
          if (ready.test(out)) {
            clearTimeout(timer);
            resolve({ child, output: () => out });
          }
        };
        child.stdout.on('data', onData);
        child.stderr.on('data', onData);
        child.on('exit', (code) => {
          clearTimeout(timer);
          reject(new Error(`${line} exited with ${code} before it was ready:\n${out}`));
        });
      }),
  };
}

function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  child.kill('SIGINT');
  return exited;
}

test('the README walk, run as written at the default retry schedule: a delivery missed while the receiver was down longer than its retries arrives with the command the README gives', {
  timeout: 180_000,
}, async (t) => {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  const commands = fencedCommands(readme, 'Five minutes');
  assert.deepEqual(commands, WALK, 'the README walk changed: run the new one here too');
  // `npm start` is the server on the shipped config.yaml.
  assert.equal(JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).scripts.start, 'node --no-node-snapshot src/main.ts serve');

  // A folder of its own with the shipped config.yaml; only the ports differ (others may be taken
  // on a shared machine), and one serving process spares the machine.
  const cwd = tmpDir(t);
  const receiverPort = await freePortOutsideEphemeral();
  const shipped = readFileSync(join(ROOT, 'config.yaml'), 'utf8');
  const config = shipped.replace(/^(\s+port:\s+)8787\b/m, '$10   ').replace(/^(\s+processes:\s+)0\b/m, '$11');
  assert.notEqual(config, shipped);
  writeFileSync(join(cwd, 'config.yaml'), config);
  const sh = shell(t, cwd);
  const started = () => sh.start('switchyard serve', /"msg":"integrations loaded"|integrations loaded/);
  let server = await started();
  t.after(() => stop(server.child));

  const known: Record<string, string> = {};
  let receiver: { child: ChildProcess; output: () => string } | undefined;
  t.after(() => receiver && stop(receiver.child));
  const expand = (line: string) =>
    line.replace(/\b9000\b/g, String(receiverPort)).replace(/<([^>]+)>/g, (_, name: string) => {
      assert.ok(known[name], `the walk has not shown <${name}> yet`);
      return quote(known[name]);
    });
  const ok = async (line: string) => {
    const r = await sh.run(expand(line));
    assert.equal(r.code, 0, `${line}\n${r.stdout}${r.stderr}`);
    return r;
  };

  // 1. Make an integration; the running server loads it.
  await ok(commands[0]);
  const api = async (path: string) => {
    const url = readFileSync(join(cwd, 'data/run/server-url'), 'utf8').trim();
    const token = readFileSync(join(cwd, 'data/admin-token'), 'utf8').trim();
    return (await fetch(`${url}${path}`, { headers: { authorization: `Bearer ${token}` } })).json() as Promise<any>;
  };
  await waitFor(async () => (await api('/api/v1/integrations/greeter')).integration?.status === 'loaded', 30_000, 100);

  // 2. Install it and call it.
  const installed = await ok(commands[1]);
  known['public endpoint'] = /public endpoint\s+(\S+)/.exec(installed.stdout)?.[1] ?? assert.fail(`no public endpoint in:\n${installed.stdout}`);
  const called = await ok(commands[2]);
  assert.equal(called.stdout.trim(), '{"received":true}');

  // 3. See what ran.
  assert.match((await ok(commands[3])).stdout, /greeter\s+inst_\w+\s+fetch\s+200\s+ok/);

  // 4. Private networks allowed in config.yaml, the server restarted; the webhook integration installed.
  const allowed = readFileSync(join(cwd, 'config.yaml'), 'utf8').replace(/allow_private_networks: false/, 'allow_private_networks: true');
  writeFileSync(join(cwd, 'config.yaml'), allowed);
  await stop(server.child);
  server = await started();
  const webhook = await ok(commands[4]);
  known['signing secret'] = /signing secret \(shown once\): (\S+)/.exec(webhook.stdout)?.[1] ?? assert.fail(`no signing secret in:\n${webhook.stdout}`);

  // 5. The receiver in a third terminal; a sample event arrives, signed.
  const receive = expand(commands[5]);
  receiver = await sh.start(receive, /receiving on/);
  const first = await ok(commands[6]);
  // A delivery's eventId, the one its receiver prints, is the delivery's own id.
  const firstDelivery = /(dlv_\w+)/.exec(first.stdout)![1];
  await waitFor(() => receiver!.output().includes(`received site_view ${firstDelivery}`), 10_000);

  // 6. The receiver stopped; another event is retried on its schedule...
  await stop(receiver.child);
  const second = await ok(commands[7]);
  known['delivery id'] = /(dlv_\w+)/.exec(second.stdout)?.[1] ?? assert.fail(`no delivery id in:\n${second.stdout}`);
  const listed = await ok(commands[8]);
  assert.match(listed.stdout, new RegExp(`${known['delivery id']}\\s.*\\s(retrying|pending)\\s`), 'listed as retried on its schedule');
  // ... and a person is back later than the retries last (about 7 s): the delivery failed.
  const failed = await waitFor(
    async () => {
      const d = await api(`/api/v1/deliveries/${known['delivery id']}`);
      return d.status === 'failed' && d;
    },
    20_000,
    200,
  );
  assert.equal(failed.attemptCount, 4, 'four attempts: the first and max_retries: 3');
  receiver = await sh.start(receive, /receiving on/);
  const retried = await ok(commands[9]);
  assert.match(retried.stdout, /delivered/);
  await waitFor(() => receiver!.output().includes(`received site_view ${known['delivery id']}`), 10_000);
});
