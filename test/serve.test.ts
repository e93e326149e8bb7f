import { test } from 'node:test';
import assert from 'node:assert/strict';
import { connect, createServer } from 'node:net';
import { mkdirSync, rmSync, statSync, truncateSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fillDisk, runCli, spawnCli, startTestServer, testConfig, tmpDir, tmpfs, waitFor } from './helpers/index.ts';
import { openStore } from '../src/store/index.ts';
import { allMigrations } from '../src/server/migrations.ts';
import { gatedIntegration } from './registry-support.ts';
import { VERSION } from '../src/version.ts';
import { startServer } from '../src/server/server.ts';
import { memoryLogger } from '../src/log/index.ts';
import { samplePayload } from '../src/events/index.ts';
import { capabilityOf } from '../src/module/capabilities.ts';

test('GET /healthz reports version, uptime and store', async (t) => {
  const server = await startTestServer(t);
  const res = await fetch(`${server.url}/healthz`);
  assert.equal(res.status, 200);
  const body = (await res.json()) as any;
  assert.equal(body.version, VERSION);
  assert.equal(body.store, 'ok');
  assert.equal(typeof body.uptime_s, 'number');
});

test('/api/v1 refuses a missing or wrong token with the JSON error shape', async (t) => {
  const server = await startTestServer(t);
  const none = await fetch(`${server.url}/api/v1/anything`);
  assert.equal(none.status, 401);
  assert.equal(((await none.json()) as any).error.code, 'unauthorized');
  const wrong = await server.api('GET', '/api/v1/anything', undefined, 'nope');
  assert.equal(wrong.status, 401);
  assert.match(wrong.body.error.message, /not valid/);
});

/** Send `request` on a fresh connection and read until the server closes it: what came back, and any socket error. */
function rawExchange(url: string, request: string): Promise<{ text: string; error?: string }> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const socket = connect(Number(port), hostname);
    let text = '';
    socket.setEncoding('utf8');
    socket.on('data', (d) => (text += d));
    socket.on('error', (e) => resolve({ text, error: (e as NodeJS.ErrnoException).code ?? e.message }));
    // The answer has come and the server ends the connection: end ours (a client done reading).
    socket.on('end', () => socket.end());
    socket.on('close', () => resolve({ text }));
    socket.write(request);
  });
}

test('a request line or headers past 16 KiB are answered 431 in the error shape, never a reset connection; garbage 400', async (t) => {
  const server = await startTestServer(t);
  const auth = `authorization: Bearer ${server.token}`;
  for (const size of [100_000, 1_000_000]) {
    const r = await rawExchange(server.url, `GET /api/v1/events?type=${'a'.repeat(size)} HTTP/1.1\r\nhost: x\r\n${auth}\r\n\r\n`);
    assert.equal(r.error, undefined, `a ${size}-byte query: the connection was reset`);
    assert.match(r.text, /^HTTP\/1\.1 431 Request Header Fields Too Large\r\n/);
    const body = JSON.parse(r.text.slice(r.text.indexOf('\r\n\r\n') + 4));
    assert.equal(body.error.code, 'headers_too_large');
    assert.match(body.error.message, /the request line and headers are larger than 16384 bytes/);
  }
  const header = await rawExchange(server.url, `GET /healthz HTTP/1.1\r\nhost: x\r\nx-big: ${'b'.repeat(40_000)}\r\n\r\n`);
  assert.equal(header.error, undefined);
  assert.match(header.text, /^HTTP\/1\.1 431 /);
  const viaFetch = await fetch(`${server.url}/api/v1/events?type=${'a'.repeat(100_000)}`, { headers: { authorization: `Bearer ${server.token}` } });
  assert.equal(viaFetch.status, 431);
  assert.equal(((await viaFetch.json()) as any).error.code, 'headers_too_large');
  const garbage = await rawExchange(server.url, 'NOT HTTP AT ALL\r\n\r\n');
  assert.match(garbage.text, /^HTTP\/1\.1 400 Bad Request\r\n/);
  assert.equal(JSON.parse(garbage.text.slice(garbage.text.indexOf('\r\n\r\n') + 4)).error.code, 'bad_request');
  // Under the limit, the same route answers.
  assert.equal((await fetch(`${server.url}/api/v1/events?type=${'a'.repeat(10_000)}`, { headers: { authorization: `Bearer ${server.token}` } })).status, 200);
});

/** The HTTP/1.1 responses in `text`, in order: status line and body of each (bodies by their content-length). */
function responsesIn(text: string): Array<{ status: number; body: string }> {
  const out: Array<{ status: number; body: string }> = [];
  let at = 0;
  while (at < text.length) {
    const headEnd = text.indexOf('\r\n\r\n', at);
    assert.ok(headEnd > 0, `a response is cut: ${JSON.stringify(text.slice(at, at + 200))}`);
    const head = text.slice(at, headEnd);
    const length = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? 0);
    out.push({ status: Number(/^HTTP\/1\.1 (\d{3}) /.exec(head)![1]), body: text.slice(headEnd + 4, headEnd + 4 + length) });
    at = headEnd + 4 + length;
  }
  return out;
}

test('a malformed request pipelined after a valid one on a keep-alive connection: the valid one is answered first, then the 400 or 431', async (t) => {
  const server = await startTestServer(t);
  const auth = `authorization: Bearer ${server.token}`;
  const event = JSON.stringify(samplePayload('site_view'));
  const post = `POST /api/v1/events HTTP/1.1\r\nhost: x\r\n${auth}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(event)}\r\n\r\n${event}`;
  const cases: Array<[string, string, number, number]> = [
    ['an event, then garbage', `${post}GARBAGE\r\n\r\n`, 202, 400],
    [
      'a GET, then a 20 kB request line',
      `GET /api/v1/events?limit=1 HTTP/1.1\r\nhost: x\r\n${auth}\r\n\r\nGET /healthz?${'a'.repeat(20_000)} HTTP/1.1\r\nhost: x\r\n\r\n`,
      200,
      431,
    ],
  ];
  const firstAnswers = [];
  for (const [name, request, first, refusal] of cases) {
    const r = await rawExchange(server.url, request);
    assert.equal(r.error, undefined, name);
    const answers = responsesIn(r.text);
    assert.deepEqual(
      answers.map((a) => a.status),
      [first, refusal],
      `${name}: ${r.text.slice(0, 300)}`,
    );
    firstAnswers.push(JSON.parse(answers[0].body));
    assert.equal(JSON.parse(answers[1].body).error.code, refusal === 431 ? 'headers_too_large' : 'bad_request', name);
  }
  // The client was told of the one event stored.
  const stored = await server.api('GET', '/api/v1/events?limit=10');
  assert.deepEqual(
    stored.body.events.map((e: { eventId: string }) => e.eventId),
    [firstAnswers[0].eventId],
  );
  assert.equal(firstAnswers[1].events.length, 1, 'the GET saw it');
});

test('--version and --help work at every level', async () => {
  const v = await runCli(['--version']);
  assert.equal(v.stdout.trim(), VERSION);
  const h = await runCli(['serve', '--help']);
  assert.equal(h.code, 0);
  assert.match(h.stdout, /switchyard serve/);
  const none = await runCli([]);
  assert.equal(none.code, 2);
});

test('serve starts on the given config and stops cleanly on SIGTERM', async (t) => {
  const dir = tmpDir(t);
  writeFileSync(join(dir, 'config.yaml'), `server:\n  port: 0\ndata_dir: ./data\nlog:\n  format: json\n`);
  const { child, match, output } = await spawnCli(t, ['serve', '--config', join(dir, 'config.yaml')], /"url":"(http:\/\/127\.0\.0\.1:\d+)"/, { cwd: dir });
  const health = await fetch(`${match[1]}/healthz`);
  assert.equal(health.status, 200);
  // The start line says where the generated admin token is (a path, not the token: never redacted away).
  assert.ok(output().includes(`"admin_credential":"${join(dir, 'data', 'admin-token')}"`), output());
  // It is the first record, before the integrations' (an empty folder: the built-in webhook's).
  await waitFor(() => output().includes('"msg":"integrations loaded"'));
  const records = output()
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l).msg as string);
  assert.equal(records[0], 'switchyard serving', output());
  child.kill('SIGTERM');
  const code = await new Promise((r) => child.on('exit', r));
  assert.equal(code, 0);
});

test('on a terminal the first line says where it serves, the console and where the admin token is, before the integrations load; the CLI finds a port chosen at start', async (t) => {
  const dir = tmpDir(t);
  for (const name of ['greeter', 'welcome']) {
    mkdirSync(join(dir, 'integrations', name), { recursive: true });
    writeFileSync(
      join(dir, 'integrations', name, 'platform-manifest.yaml'),
      `name: ${name}\ntitle: T\ndescription: test\norganization: o\nvisibility: private\nscopes: []\nscript: index.ts\n`,
    );
    writeFileSync(
      join(dir, 'integrations', name, 'index.ts'),
      "import { createIntegration } from '@switchyard/runtime';\nexport default createIntegration({ fetch: async () => new Response('hi') });\n",
    );
  }
  const config = join(dir, 'config.yaml');
  // The lines a terminal gets (format pretty), under the supervisor with its 2 serving processes.
  writeFileSync(config, 'server:\n  port: 0\n  processes: 2\ndata_dir: ./data\nintegrations_dir: ./integrations\nlog:\n  format: pretty\n');
  const s = await spawnCli(t, ['serve', '--config', config], /integrations loaded/, { cwd: dir, timeoutMs: 30_000 });
  const lines = s.output().split('\n');
  const escape = (x: string) => x.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
  const first = new RegExp(
    `^Switchyard serving (http://127\\.0\\.0\\.1:\\d+) \\(2 processes\\)\\. Console: http://localhost:\\d+/console/ \\(log in with the admin token in ${escape(join(dir, 'data', 'admin-token'))}\\)\\. Config: ${escape(config)}$`,
  ).exec(lines[0]);
  assert.ok(first, `the first line is the start line:\n${s.output()}`);
  assert.equal(lines.filter((l) => /integration loaded/.test(l)).length, 2, "the integrations' lines follow it");
  assert.equal((await fetch(`${first[1]}/healthz`)).status, 200);

  // server.port 0: the CLI reads the URL the server recorded rather than looking at :0.
  const listed = await runCli(['integrations', 'list', '--config', config], { cwd: dir });
  assert.equal(listed.code, 0, listed.stderr);
  assert.match(listed.stdout, /greeter[\s\S]*welcome/);
  s.child.kill('SIGTERM');
  assert.equal(await new Promise((r) => s.child.on('exit', r)), 0);
  const stopped = await runCli(['integrations', 'list', '--config', config], { cwd: dir });
  assert.equal(stopped.code, 1);
  assert.match(stopped.stderr, /server\.port is 0 in .*config\.yaml: the server picks its port when it starts, and no running server recorded one/);
  assert.match(stopped.stderr, /SWITCHYARD_URL=http:\/\/127\.0\.0\.1:<port>/);
  assert.doesNotMatch(stopped.stderr, /:0\b/);
});

test('bad input ends serve with one clear message and exit code 2, never a stack', async (t) => {
  const dir = tmpDir(t);
  // malformed config
  writeFileSync(join(dir, 'bad.yaml'), 'server:\n  port: "eighty"\n  colour: blue\n');
  const bad = await runCli(['serve', '--config', join(dir, 'bad.yaml')], { cwd: dir });
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /bad\.yaml:2:9: server\.port: must be a number/);
  assert.match(bad.stderr, /bad\.yaml:3:3: server\.colour: unknown key/);
  assert.doesNotMatch(bad.stderr, /\n\s+at /);

  // a data directory that cannot be written (a path below a regular file)
  writeFileSync(join(dir, 'file'), 'x');
  writeFileSync(join(dir, 'nodir.yaml'), `server:\n  port: 0\ndata_dir: ${join(dir, 'file', 'data')}\n`);
  const nodir = await runCli(['serve', '--config', join(dir, 'nodir.yaml')], { cwd: dir });
  assert.equal(nodir.code, 2);
  assert.match(nodir.stderr, /data directory .* cannot be written/);
  assert.doesNotMatch(nodir.stderr, /\n\s+at /);

  // a port in use
  const blocker = createServer().listen(0, '127.0.0.1');
  await new Promise((r) => blocker.once('listening', r));
  t.after(() => blocker.close());
  const port = (blocker.address() as { port: number }).port;
  writeFileSync(join(dir, 'busy.yaml'), `server:\n  port: ${port}\ndata_dir: ./busy\n`);
  const busy = await runCli(['serve', '--config', join(dir, 'busy.yaml')], { cwd: dir });
  assert.equal(busy.code, 2);
  assert.match(busy.stderr, new RegExp(`port ${port} on 127\\.0\\.0\\.1 is already in use`));
  assert.match(busy.stderr, /hint: .*`switchyard serve --port <port>`/);
  assert.doesNotMatch(busy.stderr, /\n\s+at /);
  // The supervisor says its first process could not start, after that process's error; it
  // announces no replacement it will not start.
  const said = busy.stdout + busy.stderr;
  assert.doesNotMatch(said, /starting another/);
  const order = ['is already in use', 'the first serving process exited before it listened', 'no serving process could start'].map((m) => said.indexOf(m));
  assert.ok(
    order.every((at, i) => at >= 0 && (i === 0 || at > order[i - 1])),
    said,
  );
});

test('a second serve on the same data directory is refused', async (t) => {
  const dir = tmpDir(t);
  writeFileSync(join(dir, 'config.yaml'), `server:\n  port: 0\ndata_dir: ./data\n`);
  await spawnCli(t, ['serve'], /switchyard serving/, { cwd: dir });
  const second = await runCli(['serve'], { cwd: dir });
  assert.equal(second.code, 2);
  assert.match(second.stderr, /another switchyard server \(pid \d+\) is using data directory/);
});

test('while the integrations load: /healthz answers (ready false), /readyz 503, events are taken, requests for an integration wait for it', async (t) => {
  const config = testConfig(t);
  const integrations = config.integrations_dir;
  mkdirSync(join(integrations, 'hello'), { recursive: true });
  writeFileSync(
    join(integrations, 'hello/platform-manifest.yaml'),
    'name: hello\ntitle: Hello\ndescription: test\norganization: o\nvisibility: private\nscopes: []\nscript: index.ts\n',
  );
  writeFileSync(
    join(integrations, 'hello/index.ts'),
    "import { createIntegration } from '@switchyard/runtime';\nexport default createIntegration({ fetch: async () => new Response('hello') });\n",
  );
  // A first run makes the installation (it lives in the store across starts).
  const first = await startServer(config, { log: memoryLogger() });
  await capabilityOf(first.services, 'registry').whenReady();
  const auth = { authorization: `Bearer ${config.admin_token}`, 'content-type': 'application/json' };
  const made = await fetch(`${first.url}/api/v1/installations`, { method: 'POST', headers: auth, body: JSON.stringify({ integration: 'hello' }) });
  assert.equal(made.status, 201);
  const installationId = ((await made.json()) as any).installation.id as string;
  await first.close();

  // The next start holds on a folder that sorts first until the test releases it.
  const gate = gatedIntegration(integrations, 'aa-gate');
  const s = await startServer(config, { log: memoryLogger() });
  t.after(() => s.close());
  const health = await fetch(`${s.url}/healthz`);
  assert.equal(health.status, 200);
  const body = (await health.json()) as any;
  assert.equal(body.ok, true);
  assert.equal(body.ready, false);
  assert.equal(body.status, 'starting');
  assert.equal(body.integrations.total, 2);
  const ready = await fetch(`${s.url}/readyz`);
  assert.equal(ready.status, 503);
  assert.equal(ready.headers.get('retry-after'), '1');
  assert.equal(((await ready.json()) as any).ready, false);

  const publicEndpoint = fetch(`${s.url}/v1/integrations/hello/installations/${installationId}`, { method: 'POST' });
  let installed = false;
  const install = fetch(`${s.url}/api/v1/installations`, { method: 'POST', headers: auth, body: JSON.stringify({ integration: 'hello' }) }).then(
    (r) => ((installed = true), r),
  );
  const event = await fetch(`${s.url}/api/v1/events`, { method: 'POST', headers: auth, body: JSON.stringify(samplePayload('space_content_updated')) });
  assert.equal(event.status, 202, 'events are taken while the integrations load');
  const list = await fetch(`${s.url}/api/v1/integrations`, { headers: auth });
  const listed = (await list.json()) as any;
  assert.equal(listed.startup.ready, false);
  assert.equal(listed.integrations.find((i: any) => i.name === 'aa-gate').status, 'loading');
  assert.equal(installed, false, 'an installation waits for the integrations (its configuration is checked against a manifest)');

  await gate.entered();
  await gate.release();
  const answer = await publicEndpoint;
  assert.equal(answer.status, 200);
  assert.equal(await answer.text(), 'hello');
  assert.equal((await install).status, 201);
  await waitFor(async () => (await fetch(`${s.url}/readyz`)).status === 200);
  const settled = (await (await fetch(`${s.url}/healthz`)).json()) as any;
  assert.deepEqual([settled.ready, settled.status, settled.integrations.loaded, settled.integrations.total], [true, 'serving', 2, 2]);
});

test('serve restarts from the bundle cache when nothing changed, and serves a file edited between two starts as edited', async (t) => {
  const dir = tmpDir(t);
  const integrations = join(dir, 'integrations');
  mkdirSync(join(integrations, 'greeter'), { recursive: true });
  writeFileSync(
    join(integrations, 'greeter/platform-manifest.yaml'),
    'name: greeter\ntitle: Greeter\ndescription: test\norganization: o\nvisibility: private\nscopes: []\nscript: index.ts\n',
  );
  const script = (word: string) =>
    `import { createIntegration } from '@switchyard/runtime';\nexport default createIntegration({ fetch: async () => new Response('${word}') });\n`;
  writeFileSync(join(integrations, 'greeter/index.ts'), script('first'));
  const token = 'test-admin-token-restarts';
  writeFileSync(
    join(dir, 'config.yaml'),
    `server:\n  port: 0\n  processes: 2\ndata_dir: ./data\nintegrations_dir: ./integrations\nadmin_token: ${token}\nlog:\n  format: json\n`,
  );
  const auth = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
  // The cache keeps only builds of files that had settled (changed more than a second before).
  await new Promise((r) => setTimeout(r, 1_100));

  const start = async () => {
    const s = await spawnCli(t, ['serve', '--config', join(dir, 'config.yaml')], /"msg":"switchyard serving","url":"(http:\/\/[^"]+)"/, {
      cwd: dir,
      timeoutMs: 30_000,
    });
    const url = s.match[1];
    await waitFor(async () => (await fetch(`${url}/readyz`)).status === 200, 15_000);
    const stop = async () => {
      s.child.kill('SIGTERM');
      await new Promise((r) => s.child.on('exit', r));
    };
    return { url, output: s.output, stop };
  };
  const loadedLine = (output: string) => JSON.parse(output.split('\n').find((l) => l.includes('"msg":"integrations loaded"'))!);

  const one = await start();
  const made = await fetch(`${one.url}/api/v1/installations`, { method: 'POST', headers: auth, body: JSON.stringify({ integration: 'greeter' }) });
  // Port 0: each start picks its own port; the endpoint's path stays.
  const path = new URL(((await made.json()) as any).installation.urls.publicEndpoint as string).pathname;
  const call = async (base: string) => (await fetch(`${base}${path}`, { method: 'POST' })).text();
  assert.equal(await call(one.url), 'first');
  const readyz = (await (await fetch(`${one.url}/readyz`)).json()) as any;
  assert.deepEqual(readyz.processes, { count: 2, ready: true });
  assert.deepEqual([loadedLine(one.output()).bundles_cached, loadedLine(one.output()).bundles_built], [0, 1]);
  await one.stop();

  const two = await start();
  assert.deepEqual([loadedLine(two.output()).bundles_cached, loadedLine(two.output()).bundles_built], [1, 0], 'nothing changed: read back');
  assert.equal(await call(two.url), 'first');
  await two.stop();

  writeFileSync(join(integrations, 'greeter/index.ts'), script('second'));
  const three = await start();
  assert.deepEqual([loadedLine(three.output()).bundles_cached, loadedLine(three.output()).bundles_built], [0, 1], 'the edited file is bundled');
  assert.equal(await call(three.url), 'second');
  await three.stop();
});

test('serve on a full disk ends with one storage_full message and its hint, exit 2, with a database there or none', async (t) => {
  const disk = tmpfs(t, 4);
  if (!disk) return t.skip('cannot mount a tmpfs here (needs root)');
  const existing = join(disk, 'existing');
  openStore(existing, { migrations: allMigrations() }).close();
  const dir = tmpDir(t);
  for (const [name, dataDir] of [
    ['no database', join(disk, 'none')],
    ['a database', existing],
  ]) {
    const config = join(dir, `${name.replace(/ /g, '-')}.yaml`);
    writeFileSync(config, `server:\n  port: 0\ndata_dir: ${dataDir}\n`);
    // No byte free, then 8 kB: SQLite meets the full disk in other places (the lock, the -shm, a migration).
    for (const free of [0, 8192]) {
      const filler = fillDisk(disk);
      truncateSync(filler, statSync(filler).size - free);
      for (const processes of ['1', '2']) {
        const r = await runCli(['serve', '--config', config, '--processes', processes], { cwd: dir, timeoutMs: 20_000 });
        const what = `${name}, ${free} bytes free, --processes ${processes}: ${r.stderr}${r.stdout}`;
        assert.equal(r.code, 2, what);
        assert.match(
          r.stderr,
          /^switchyard: the disk that holds \S+ is full \(\d+ kB free; [A-Z_]+\)\nhint: free space on that disk [^\n]*then try again\n$/,
          what,
        );
      }
    }
    rmSync(join(disk, 'filler'));
  }
});
