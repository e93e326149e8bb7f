/**
 * CLI conventions: no ANSI colours when stdout is not a terminal, unknown flags and misspelt commands
 * are usage errors (exit 2) with a "did you mean", and a reader that leaves early (`| head`) ends the
 * command quietly; a stranger's text is printed with its control characters shown.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { writeFileSync } from 'node:fs';
import { ROOT, runCli, startTestServer, tmpDir } from './helpers/index.ts';
import { samplePayload } from '../src/events/index.ts';
import { logLine } from '../src/cli/logs.ts';
import { oneLine } from '../src/cli/inspect.ts';
import { printable } from '../src/cli/table.ts';

// citty colours unless CI, TEST or NO_COLOR=1 is set: clear them so the test means the same everywhere.
const colourEnv = { NO_COLOR: '', CI: '', TEST: '', TERM: 'xterm-256color' };

test('help and usage errors carry no ANSI escapes when stdout and stderr are pipes', async () => {
  for (const args of [['--help'], ['deliveries', '--help'], ['install']]) {
    const r = await runCli(args, { env: colourEnv });
    assert.doesNotMatch(r.stdout + r.stderr, /\x1b\[/, args.join(' '));
    assert.match(r.stdout, /USAGE/);
  }
});

test('help text: a default said once, columns aligned, no padding after the last column', async () => {
  // With colours allowed (stripped for the pipe) as on a terminal: citty padded counting the grey hints.
  const [receive, list] = await Promise.all([runCli(['receive', '--help'], { env: colourEnv }), runCli(['deliveries', 'list', '--help'], { env: colourEnv })]);
  for (const r of [receive, list]) {
    assert.equal(r.code, 0);
    assert.doesNotMatch(r.stdout, /[ \t]$/m, 'no line ends in padding');
    // Every option's description starts in the same column, "(Default: false)" lines too.
    const starts = new Set(
      r.stdout
        .split('\n')
        .filter((l) => /^\s+-/.test(l))
        .map((l) => /^\s*\S+\s+/.exec(l)![0].length),
    );
    assert.equal(starts.size, 1, r.stdout);
  }
  assert.match(receive.stdout, /--port=<port>\s+port to listen on \(default 9000; 0 picks a free one\)$/m);
  assert.doesNotMatch(receive.stdout, /\(Default: 9000\)|\(Default: 127\.0\.0\.1\)/);
  assert.match(list.stdout, /--json\s+print JSON for scripts instead of a table \(Default: false\)$/m, 'a default the description does not give stays');
  // A command is named as it is typed, from the program's name down.
  assert.match(list.stdout, /^USAGE switchyard deliveries list \[OPTIONS\]/m);
  assert.match(receive.stdout, /^USAGE switchyard receive \[OPTIONS\]/m);
});

test('an unknown flag is exit 2 with the closest flag; a misspelt command too', async () => {
  const flag = await runCli(['deliveries', 'list', '--statsu', 'failed'], { env: colourEnv });
  assert.equal(flag.code, 2);
  assert.match(flag.stderr, /unknown option --statsu/);
  assert.match(flag.stderr, /did you mean --status\?/);
  const cmd = await runCli(['delivries', 'list']);
  assert.equal(cmd.code, 2);
  // The guess first, and the names in one line: not 25 lines of usage before it.
  assert.equal(cmd.stdout, '');
  const lines = cmd.stderr.trimEnd().split('\n');
  assert.equal(lines[0], 'switchyard: unknown command "delivries"; did you mean "deliveries"?');
  assert.match(lines[1], /^the commands of switchyard: init, serve, .*, deliveries, .* \(`switchyard --help` says what each does\)$/);
  assert.equal(lines.length, 2);
  const sub = await runCli(['deliveries', 'lsit']);
  assert.equal(sub.code, 2);
  assert.match(sub.stderr, /unknown command "lsit"; did you mean "list"\?/);
  assert.match(sub.stderr, /^the commands of switchyard deliveries: list, show, retry, replay, tail /m);
  // With --help too: the name is checked first, not answered with the parent's help and exit 0.
  const helped = [
    [['delivries', '--help'], 'delivries', 'deliveries'],
    [['deliveries', 'lsit', '--help'], 'lsit', 'list'],
    [['deliveries', 'lsit', '-h'], 'lsit', 'list'],
  ] as const;
  const [replay, tail, rightName, ...results] = await Promise.all([
    runCli(['replay', '--failed']),
    runCli(['tial']),
    runCli(['deliveries', 'list', '--help']),
    ...helped.map(([args]) => runCli([...args])),
  ]);
  helped.forEach(([args, word, guess], i) => {
    assert.equal(results[i].code, 2, args.join(' '));
    assert.match(results[i].stderr, new RegExp(`unknown command "${word}"; did you mean "${guess}"\\?`), args.join(' '));
  });
  // A subcommand's name typed at the top level points at where it lives.
  assert.equal(replay.code, 2);
  assert.match(replay.stderr, /unknown command "replay"; did you mean .*"deliveries replay"/);
  assert.match(tail.stderr, /unknown command "tial"; did you mean "deliveries tail"\?/);
  assert.equal(rightName.code, 0, 'a right name with --help is still help');
  // Declared flags, aliases, negations and --flag=value still pass the check.
  const ok = await runCli(['logs', '-f', '--no-json', '--limit=5', '--offline', '--config', join(ROOT, 'config.yaml')]);
  assert.doesNotMatch(ok.stderr, /unknown option/);
});

test('a reader that closes the pipe early (`| head`) ends the command quietly, exit 0', async () => {
  // A command that keeps printing (deliveries tail, logs --follow, a long table) after its reader
  // has gone: the CLI's entry, then a stream of lines, as those commands write them.
  const main = new URL('../src/main.ts', import.meta.url).href;
  const script = `import { cli } from ${JSON.stringify(main)};
    await cli(['--version']);
    for (let i = 0; i < 5000; i++) { process.stdout.write('line ' + i + '\\n'); await new Promise((r) => setTimeout(r, 1)); }`;
  const child = spawn(process.execPath, ['--no-node-snapshot', '--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d) => (stderr += d));
  child.stdout.once('data', () => child.stdout.destroy());
  const code = await new Promise((r) => child.on('close', r));
  assert.doesNotMatch(stderr, /EPIPE|\n\s+at /, 'no EPIPE stack trace');
  assert.equal(code, 0);
});

test('`deliveries list --offline --json | head`: a real listing longer than the pipe holds, its reader gone after the first chunk, ends quietly with exit 0', async (t) => {
  const s = await startTestServer(t);
  // 500 deliveries, held by a paused installation (nothing is sent anywhere).
  const made = await s.api('POST', '/api/v1/installations', {
    integration: 'webhook',
    configuration: { webhook_url: 'https://hooks.example.com/a/rather/long/path/so/that/the/listing/is/long', event_types: 'site_view' },
  });
  assert.equal(made.status, 201, JSON.stringify(made.body));
  assert.equal((await s.api('POST', `/api/v1/installations/${made.body.installation.id}/pause`)).status, 200);
  assert.equal(
    (
      await s.api(
        'POST',
        '/api/v1/events',
        Array.from({ length: 500 }, () => samplePayload('site_view')),
      )
    ).status,
    202,
  );
  const config = join(tmpDir(t), 'config.yaml');
  writeFileSync(config, `data_dir: ${JSON.stringify(s.config.data_dir)}\n`);
  // --json: the table of 500 rows is about 64 KiB, what a pipe holds; the JSON is several times that.
  const args = ['deliveries', 'list', '--offline', '--limit', '500', '--json', '--config', config];

  const whole = await runCli(args);
  assert.equal(whole.code, 0, whole.stderr);
  assert.equal(JSON.parse(whole.stdout).deliveries.length, 500);
  assert.ok(whole.stdout.length > 128 * 1024, `${whole.stdout.length} bytes: more than a pipe holds, so writing outlives the reader`);

  // The reader takes the first chunk and leaves, as `head` does.
  const child = spawn(process.execPath, ['--no-node-snapshot', join(ROOT, 'src/main.ts'), ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, NO_COLOR: '1' },
  });
  let stderr = '';
  let read = 0;
  child.stderr.on('data', (d) => (stderr += d));
  child.stdout.once('data', (d: Buffer) => {
    read = d.length;
    child.stdout.destroy();
  });
  const code = await new Promise((r) => child.on('close', r));
  assert.ok(read > 0 && read < whole.stdout.length, 'the reader left before the end');
  assert.equal(stderr, '', 'nothing on stderr: no EPIPE, no stack trace');
  assert.equal(code, 0);
});

test("a stranger's text reaches the terminal with its control characters shown, not obeyed", () => {
  const attack = 'ok\x1b]0;owned\x07\x1b[2J\x9b31m\x7f done';
  const line = logLine({ time: '2026-11-25T10:00:00.000Z', level: 'info', message: `${attack}\nsecond line` });
  assert.doesNotMatch(line.replace(/\x1b\[\d+m/g, ''), /[\x00-\x08\x0b-\x1f\x7f-\x9f]/, 'only our own colour codes may remain');
  assert.match(line, /ok\\x1b\]0;owned\\x07\\x1b\[2J\\x9b31m\\x7f done/);
  assert.match(line, /\n {22}second line/, 'newlines still break the line');
  assert.equal(oneLine(`status\x1b[8m hidden`), 'status\\x1b[8m hidden');
  assert.equal(printable('tab\tand\nnewline stay'), 'tab\tand\nnewline stay');
});
