/**
 * HTTPS on the server's own port (server.tls): certificates made here with openssl, clients that
 * verify them (node:https with the certificate as CA, node:http2), HTTP/2 and HTTP/1.1 on the same
 * port, a renewal while requests flow (under the supervisor, two serving processes), and the
 * refusals at start (exit 2, the file named, no stack).
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, renameSync, writeFileSync, readFileSync } from 'node:fs';
import { X509Certificate } from 'node:crypto';
import http from 'node:http';
import http2 from 'node:http2';
import https from 'node:https';
import type { TLSSocket } from 'node:tls';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import { H3 } from 'h3';
import { toNodeHandler } from 'h3/node';
import { once } from 'node:events';
import { ROOT, runCli, spawnCli, startTestServer, testConfig, tmpDir, waitFor } from './helpers/index.ts';
import { startServer } from '../src/server/server.ts';
import { memoryLogger } from '../src/log/index.ts';
import { createListener } from '../src/http/listener.ts';
import { readTlsPair } from '../src/http/tls.ts';

const TOKEN = 'test-admin-token-tls';

interface Pair {
  cert: string;
  key: string;
  pem: string;
  fingerprint: string;
}

/** A self-signed certificate for localhost and 127.0.0.1 (expired: valid until yesterday). */
function makePair(dir: string, name: string, opts: { cn?: string; expired?: boolean } = {}): Pair {
  mkdirSync(dir, { recursive: true });
  const cert = join(dir, `${name}.crt`);
  const key = join(dir, `${name}.key`);
  const subj = `/CN=${opts.cn ?? name}`;
  const san = 'subjectAltName=DNS:localhost,IP:127.0.0.1';
  if (opts.expired) {
    const ext = join(dir, `${name}.ext`);
    writeFileSync(ext, `${san}\n`);
    execFileSync(
      'openssl',
      ['req', '-new', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', key, '-subj', subj, '-out', `${cert}.csr`],
      { stdio: 'pipe' },
    );
    execFileSync('openssl', ['x509', '-req', '-in', `${cert}.csr`, '-signkey', key, '-days', '-1', '-extfile', ext, '-out', cert], { stdio: 'pipe' });
  } else {
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:prime256v1',
        '-nodes',
        '-keyout',
        key,
        '-out',
        cert,
        '-days',
        '2',
        '-subj',
        subj,
        '-addext',
        san,
      ],
      { stdio: 'pipe' },
    );
  }
  const pem = readFileSync(cert, 'utf8');
  return { cert, key, pem, fingerprint: new X509Certificate(pem).fingerprint256 };
}

interface Answer {
  status: number;
  body: string;
  headers: http.IncomingHttpHeaders;
  fingerprint: string;
  alpn: string | false | null;
}

/** One HTTPS request on a connection of its own (a new handshake: the certificate served now). */
function httpsRequest(
  url: string,
  ca: string | string[],
  opts: { method?: string; headers?: Record<string, string>; body?: string; servername?: string } = {},
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = https.request(url, { ca, agent: false, method: opts.method ?? 'GET', headers: opts.headers, servername: opts.servername }, (res) => {
      const socket = res.socket as TLSSocket;
      const fingerprint = socket.getPeerCertificate().fingerprint256;
      const alpn = socket.alpnProtocol;
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode!, body, headers: res.headers, fingerprint, alpn }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.setTimeout(20_000, () => req.destroy(new Error('timed out')));
    req.end(opts.body);
  });
}

/** One request on an HTTP/2 session. */
function h2Request(
  session: http2.ClientHttp2Session,
  headers: http2.OutgoingHttpHeaders,
  body?: string,
): Promise<{ status: number; headers: http2.IncomingHttpHeaders; body: string }> {
  return new Promise((resolve, reject) => {
    const req = session.request(headers);
    let text = '';
    let head: http2.IncomingHttpHeaders = {};
    req.setEncoding('utf8');
    req.on('response', (h) => (head = h));
    req.on('data', (d) => (text += d));
    req.on('end', () => resolve({ status: Number(head[':status']), headers: head, body: text }));
    req.on('error', reject);
    req.end(body);
  });
}

function h2Connect(t: TestContext, origin: string, ca: string | string[], servername?: string): Promise<http2.ClientHttp2Session> {
  return new Promise((resolve, reject) => {
    const session = http2.connect(origin, { ca, servername });
    t.after(() => session.destroy());
    session.once('connect', () => resolve(session));
    session.once('error', reject);
  });
}

function echoIntegration(root: string): void {
  mkdirSync(join(root, 'echo', 'src'), { recursive: true });
  writeFileSync(
    join(root, 'echo', 'platform-manifest.yaml'),
    'name: echo\ntitle: echo\ndescription: test\norganization: test\nvisibility: private\nscopes: []\nscript: src/index.ts\n',
  );
  writeFileSync(
    join(root, 'echo', 'src/index.ts'),
    `import { createIntegration } from '@switchyard/runtime';
export default createIntegration({ fetch: async (request) => new Response(JSON.stringify({ host: request.headers.get('host'), url: request.url }), { headers: { 'content-type': 'application/json', 'keep-alive': 'timeout=5' } }) });
`,
  );
}

test('HTTPS on the server port: a client that checks the certificate is answered, one that does not trust it is refused; public_url and the console say https', async (t) => {
  const dir = tmpDir(t);
  const pair = makePair(join(dir, 'tls'), 'server');
  const server = await startTestServer(t, { server: { tls: { cert: pair.cert, key: pair.key } } });
  const port = server.services.config.server.port;
  assert.equal(server.url, `https://127.0.0.1:${port}`);
  assert.equal(server.consoleUrl, `https://localhost:${port}`);

  const health = await httpsRequest(`${server.url}/healthz`, pair.pem);
  assert.equal(health.status, 200);
  assert.equal(health.fingerprint, pair.fingerprint);
  assert.equal(health.alpn, false, 'a client that offers no protocol (ALPN) is answered in HTTP/1.1');
  assert.equal(JSON.parse(health.body).ok, true);

  // HTTP/1.1 over TLS refuses what Node's parser refuses the same way the plain port does.
  const tooBig = await httpsRequest(`${server.url}/healthz`, pair.pem, { headers: { 'x-big': 'a'.repeat(20_000) } });
  assert.equal(tooBig.status, 431);
  assert.equal(JSON.parse(tooBig.body).error.code, 'headers_too_large');

  // The check is real: without the certificate as CA the handshake is refused by the client.
  await assert.rejects(httpsRequest(`${server.url}/healthz`, []), (e: NodeJS.ErrnoException) => e.code === 'DEPTH_ZERO_SELF_SIGNED_CERT');
  // The port speaks TLS only.
  await assert.rejects(
    new Promise((resolve, reject) => http.get(`http://127.0.0.1:${port}/healthz`, { agent: false }, resolve).on('error', reject)),
    (e: NodeJS.ErrnoException) => e.code === 'ECONNRESET' || e.code === 'HPE_INVALID_CONSTANT' || /socket hang up/.test(e.message),
  );

  // The console answers on its host over TLS, and its session cookie is Secure.
  const login = await httpsRequest(`https://127.0.0.1:${port}/console/login`, pair.pem, {
    method: 'POST',
    servername: 'localhost',
    headers: { host: `localhost:${port}`, 'content-type': 'application/json', 'x-switchyard-console': 'login' },
    body: JSON.stringify({ token: server.token }),
  });
  assert.equal(login.status, 200, login.body);
  const cookie = String(login.headers['set-cookie']);
  assert.match(cookie, /^sy_console=/);
  assert.match(cookie, /; Secure/);
});

test('HTTP/2 where the client offers it (ALPN h2), on the same port: API, public endpoints with their Host, the console, and a 413 that says Connection: close', async (t) => {
  const dir = tmpDir(t);
  const pair = makePair(join(dir, 'tls'), 'server');
  const integrations = join(dir, 'integrations');
  echoIntegration(integrations);
  const server = await startTestServer(t, { integrations_dir: integrations, server: { body_limit: 1024, tls: { cert: pair.cert, key: pair.key } } });
  const port = server.services.config.server.port;
  const session = await h2Connect(t, server.url, pair.pem);
  assert.equal(session.alpnProtocol, 'h2');

  const health = await h2Request(session, { ':path': '/healthz' });
  assert.equal(health.status, 200);
  const list = await h2Request(session, { ':path': '/api/v1/integrations', authorization: `Bearer ${server.token}` });
  assert.equal(list.status, 200, list.body);

  // A public endpoint: the integration sees the :authority as Host, and its Keep-Alive header
  // (an HTTP/1.1 connection header HTTP/2 forbids) does not break the answer.
  const created = await h2Request(
    session,
    { ':path': '/api/v1/installations', ':method': 'POST', authorization: `Bearer ${server.token}`, 'content-type': 'application/json' },
    JSON.stringify({ integration: 'echo' }),
  );
  assert.equal(created.status, 201, created.body);
  const { installation } = JSON.parse(created.body);
  const echoed = await h2Request(session, { ':path': `/v1/integrations/echo/installations/${installation.id}/hi` });
  assert.equal(echoed.status, 200, echoed.body);
  assert.deepEqual(JSON.parse(echoed.body), {
    host: `127.0.0.1:${port}`,
    url: `https://127.0.0.1:${port}/v1/integrations/echo/installations/${installation.id}/hi`,
  });

  // Over HTTP/1.1 a body refused unread ends its connection (Connection: close); over HTTP/2 the
  // header has no place: the stream ends, the session serves on.
  const big = JSON.stringify({ type: 'x', pad: 'x'.repeat(4000) });
  const tooLarge = await h2Request(
    session,
    {
      ':path': '/api/v1/events',
      ':method': 'POST',
      authorization: `Bearer ${server.token}`,
      'content-type': 'application/json',
      'content-length': String(big.length),
    },
    big,
  );
  assert.equal(tooLarge.status, 413, tooLarge.body);
  assert.equal(tooLarge.headers.connection, undefined);
  assert.equal((await h2Request(session, { ':path': '/healthz' })).status, 200, 'the session still serves');

  // A live stream (server-sent events; over HTTP/1.1 it says Connection: close) streams over HTTP/2.
  const live = session.request({ ':path': '/api/v1/logs/stream', authorization: `Bearer ${server.token}` });
  const liveHead = await new Promise<http2.IncomingHttpHeaders>((resolve, reject) => live.once('response', resolve).once('error', reject));
  assert.equal(liveHead[':status'], 200);
  assert.match(String(liveHead['content-type']), /^text\/event-stream/);
  assert.equal(liveHead.connection, undefined);
  live.close();

  // The console, on its own host: recognised from :authority (no Host header in HTTP/2).
  const consoleSession = await h2Connect(t, server.url, pair.pem, 'localhost');
  const page = await h2Request(consoleSession, { ':path': '/console/', ':authority': `localhost:${port}` });
  assert.equal(page.status, 200, `the console's page, not a redirect to it (${page.headers.location ?? ''})`);
  assert.match(page.body, /<html/i);
  const refused = await h2Request(consoleSession, { ':path': `/v1/integrations/echo/installations/${installation.id}/hi`, ':authority': `localhost:${port}` });
  assert.equal(refused.status, 404, "integration content is never served on the console's host");
});

test('an answer with HTTP/1.1 connection headers is served over HTTP/2 without them (Node refuses them there, from inside srvx: the process went down)', async (t) => {
  const dir = tmpDir(t);
  const files = makePair(join(dir, 'tls'), 'server');
  const app = new H3();
  app.get(
    '/',
    () => new Response('hop', { headers: { connection: 'close', 'keep-alive': 'timeout=5', 'transfer-encoding': 'chunked', upgrade: 'h2c', 'x-kept': 'yes' } }),
  );
  const listener = createListener(toNodeHandler(app), readTlsPair(files).pair);
  await new Promise<void>((resolve) => listener.server.listen(0, '127.0.0.1', resolve));
  t.after(() => listener.close(Date.now()));
  const url = `https://127.0.0.1:${(listener.server.address() as AddressInfo).port}`;
  const session = await h2Connect(t, url, files.pem);
  const r = await h2Request(session, { ':path': '/' });
  assert.equal(r.status, 200);
  assert.equal(r.body, 'hop');
  assert.equal(r.headers['x-kept'], 'yes');
  for (const h of ['connection', 'keep-alive', 'transfer-encoding', 'upgrade']) assert.equal(r.headers[h], undefined, h);
  const h1 = await httpsRequest(`${url}/`, files.pem);
  assert.equal(h1.body, 'hop', 'HTTP/1.1 keeps its own framing');
  session.close();
});

test('a stop does not wait for an idle HTTP/2 client: its session is ended at once, not left for the client to close', async (t) => {
  const dir = tmpDir(t);
  const pair = makePair(join(dir, 'tls'), 'server');
  const server = await startServer(testConfig(t, { server: { shutdown_timeout: 60_000, tls: { cert: pair.cert, key: pair.key } } }), { log: memoryLogger() });
  const session = await h2Connect(t, server.url, pair.pem);
  // A client that leaves an answer unread keeps its side of the connection open after a GOAWAY.
  const req = session.request({ ':path': '/healthz' });
  req.end();
  await once(req, 'response');
  const goaway = once(session, 'goaway');
  const timer = new Promise((r) => setTimeout(r, 20_000, 'held until shutdown_timeout').unref());
  const stop = await Promise.race([server.close().then(() => 'stopped'), timer]);
  assert.equal(stop, 'stopped');
  await goaway;
});

test('an expired certificate is served, with a warning at start', async (t) => {
  const dir = tmpDir(t);
  const pair = makePair(join(dir, 'tls'), 'old', { expired: true });
  const server = await startTestServer(t, { server: { tls: { cert: pair.cert, key: pair.key } } });
  const warning = server.logs.find((l) => l.level === 'warn' && /expired/.test(String(l.msg)));
  assert.ok(warning, 'a warning names the expiry');
  assert.match(String(warning.msg), new RegExp(pair.cert.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')));
  await assert.rejects(httpsRequest(`${server.url}/healthz`, pair.pem), (e: NodeJS.ErrnoException) => e.code === 'CERT_HAS_EXPIRED');
});

/** A config.yaml for `serve` with server.tls (paths relative to its folder). */
function tlsConfig(dir: string, cert: string, key: string, extra: string[] = []): string {
  const file = join(dir, 'config.yaml');
  mkdirSync(join(dir, 'integrations'), { recursive: true });
  writeFileSync(
    file,
    [
      'server:',
      '  port: 0',
      '  processes: 2',
      '  tls:',
      `    cert: ${JSON.stringify(cert)}`,
      `    key: ${JSON.stringify(key)}`,
      `data_dir: ./data`,
      `integrations_dir: ./integrations`,
      `admin_token: ${TOKEN}`,
      'log:',
      '  format: json',
      ...extra,
    ].join('\n'),
  );
  return file;
}

const serveTls = (t: TestContext, configFile: string) =>
  spawnCli(t, ['serve', '--config', configFile], /"msg":"switchyard serving","url":"(https:\/\/[^"]+)"/, { timeoutMs: 30_000 });

const servingPids = (supervisor: number) =>
  execFileSync('pgrep', ['-P', String(supervisor), '-f', 'src/main.ts serve'], { encoding: 'utf8' })
    .trim()
    .split('\n')
    .filter(Boolean)
    .map(Number);

/** Replace a file the way a renewal does: write beside it, rename over it. */
function replace(file: string, content: string): void {
  writeFileSync(`${file}.new`, content);
  renameSync(`${file}.new`, file);
}

/** Requests on fresh connections, and on one HTTP/2 session opened before, until stopped; every failure kept. */
function traffic(url: string, ca: string[], session: http2.ClientHttp2Session) {
  let stop = false;
  const failures: string[] = [];
  const seen: string[] = [];
  let onSession = 0;
  const loops = [0, 1, 2].map(async () => {
    while (!stop) {
      try {
        const r = await httpsRequest(`${url}/healthz`, ca);
        if (r.status !== 200) failures.push(`status ${r.status}`);
        seen.push(r.fingerprint);
      } catch (e) {
        failures.push((e as Error).message);
      }
    }
  });
  loops.push(
    (async () => {
      while (!stop) {
        try {
          const r = await h2Request(session, { ':path': '/healthz' });
          if (r.status !== 200) failures.push(`HTTP/2 status ${r.status}`);
          onSession++;
        } catch (e) {
          failures.push(`HTTP/2: ${(e as Error).message}`);
        }
        await new Promise((r) => setTimeout(r, 20));
      }
    })(),
  );
  return {
    failures,
    seen,
    get onSession() {
      return onSession;
    },
    async stop() {
      stop = true;
      await Promise.all(loops);
    },
  };
}

/** `n` fresh connections in a row, all served `fingerprint` (they spread over the serving processes). */
async function allServe(url: string, ca: string[], fingerprint: string, n = 12): Promise<boolean> {
  for (let i = 0; i < n; i++) if ((await httpsRequest(`${url}/healthz`, ca)).fingerprint !== fingerprint) return false;
  return true;
}

/** Wait until every fresh connection is served `pair`; the server's log in the failure. */
async function untilServed(url: string, ca: string[], pair: Pair, output: () => string): Promise<void> {
  try {
    await waitFor(() => allServe(url, ca, pair.fingerprint), 15_000, 100);
  } catch (e) {
    throw new Error(`${(e as Error).message}: ${pair.cert} is not served on every connection; the server said:\n${output()}`);
  }
}

test('a certificate renewed while requests flow: no request fails, every serving process serves the new one, an open HTTP/2 session keeps working, the CLI trusts it', async (t) => {
  const dir = tmpDir(t);
  const first = makePair(join(dir, 'made'), 'first');
  const second = makePair(join(dir, 'made'), 'second');
  mkdirSync(join(dir, 'tls'));
  writeFileSync(join(dir, 'tls', 'server.crt'), first.pem);
  writeFileSync(join(dir, 'tls', 'server.key'), readFileSync(first.key));
  // At debug level each serving process says when it serves a new certificate.
  const configFile = tlsConfig(dir, 'tls/server.crt', 'tls/server.key', ['  level: debug']);
  const s = await serveTls(t, configFile);
  const url = s.match[1];
  const ca = [first.pem, second.pem];
  assert.ok(await allServe(url, ca, first.fingerprint));
  const session = await h2Connect(t, url, ca);
  assert.equal((await h2Request(session, { ':path': '/healthz' })).status, 200);

  // Both serving processes up before the swap (the second may still be starting when the first
  // serves: one started after the swap reads the new pair at its start and has nothing to say).
  await waitFor(() => /"msg":"switchyard ready: every serving process/.test(s.output()), 30_000);
  const flow = traffic(url, ca, session);
  t.after(() => flow.stop()); // a failure below must not leave the loops running
  await waitFor(() => flow.seen.length >= 20, 10_000);
  // The certificate first, then its key a moment later: between the two the files are no pair
  // (refused, the first pair still served), then the pair is taken.
  replace(join(dir, 'tls', 'server.crt'), second.pem);
  await new Promise((r) => setTimeout(r, 150));
  replace(join(dir, 'tls', 'server.key'), readFileSync(second.key, 'utf8'));
  await untilServed(url, ca, second, s.output);
  await flow.stop();
  assert.deepEqual(flow.failures, [], 'no request failed across the swap');
  assert.ok(flow.seen.includes(first.fingerprint) && flow.seen.includes(second.fingerprint));
  assert.ok(flow.onSession > 0);
  console.log(
    `  ${flow.seen.length} requests on new connections and ${flow.onSession} on an HTTP/2 session opened before, across the swap; ${flow.failures.length} failed`,
  );
  assert.match(s.output(), /"msg":"TLS certificate reloaded","cert":"[^"]*server\.crt","subject":"CN=second"/);
  assert.doesNotMatch(s.output(), /the changed TLS files are refused/, 'the moment between the two files is no error: they are read again before that is said');
  // Each serving process says so once the pair reaches it (fresh connections may all have gone to
  // one process: each accepts for itself, so "every connection" above may not have met the other).
  for (const n of [0, 1]) {
    const said = new RegExp(`"msg":"TLS certificate served from now on","subject":"CN=second",[^\n]*"process":${n}`);
    await waitFor(() => said.test(s.output()), 10_000).catch(() => assert.fail(`serving process ${n} serves it:\n${s.output()}`));
  }

  // A serving process started after the swap (the other died) serves the new certificate too.
  const [victim] = servingPids(s.child.pid!);
  process.kill(victim, 'SIGKILL');
  await waitFor(() => {
    const now = servingPids(s.child.pid!);
    return now.length === 2 && !now.includes(victim);
  }, 15_000);
  await waitFor(() => /"msg":"serving process started"/.test(s.output()), 15_000);
  assert.ok(await allServe(url, ca, second.fingerprint));

  // The CLI trusts the certificate of server.tls.cert (self-signed here) for its calls.
  const cli = await runCli(['integrations', 'list', '--config', configFile], { env: { SWITCHYARD_URL: url } });
  assert.equal(cli.code, 0, cli.stderr);
  // A config that does not name it: the CLI says the certificate is the problem, not that no server runs.
  const stranger = join(dir, 'stranger.yaml');
  writeFileSync(stranger, `admin_token: ${TOKEN}\n`);
  const refused = await runCli(['integrations', 'list', '--config', stranger], { env: { SWITCHYARD_URL: url } });
  assert.equal(refused.code, 1);
  assert.match(refused.stderr, /answered with a certificate this command does not trust \(DEPTH_ZERO_SELF_SIGNED_CERT/);
  assert.match(refused.stderr, /NODE_EXTRA_CA_CERTS/);
  s.child.kill('SIGTERM');
});

test('a changed pair that cannot serve is refused with the file and the reason in the log; the pair served is kept, by a process started after too', async (t) => {
  const dir = tmpDir(t);
  const first = makePair(join(dir, 'made'), 'first');
  const third = makePair(join(dir, 'made'), 'third');
  mkdirSync(join(dir, 'tls'));
  const certFile = join(dir, 'tls', 'server.crt');
  writeFileSync(certFile, first.pem);
  writeFileSync(join(dir, 'tls', 'server.key'), readFileSync(first.key));
  const s = await serveTls(t, tlsConfig(dir, 'tls/server.crt', 'tls/server.key'));
  const url = s.match[1];
  const ca = [first.pem, third.pem];

  replace(certFile, 'not a certificate\n');
  const refusal = await waitFor(() => /"level":"error","msg":"the changed TLS files are refused[^\n]*/.exec(s.output()), 15_000, 100);
  assert.match(refusal[0], new RegExp(`"error":"the certificate file ${certFile.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')} is not a PEM certificate`));
  assert.ok(await allServe(url, ca, first.fingerprint));

  // The files on disk are broken: a replacement process still gets the pair that serves.
  const [victim] = servingPids(s.child.pid!);
  process.kill(victim, 'SIGKILL');
  await waitFor(() => /"msg":"serving process started"/.test(s.output()), 15_000);
  assert.ok(await allServe(url, ca, first.fingerprint));

  // A mismatched pair (the third certificate with the first key) is refused the same way.
  replace(certFile, third.pem);
  await waitFor(() => /does not belong to the certificate/.test(s.output()), 15_000, 100);
  assert.ok(await allServe(url, ca, first.fingerprint));
  // Its key arrives: the pair is served.
  replace(join(dir, 'tls', 'server.key'), readFileSync(third.key, 'utf8'));
  await untilServed(url, ca, third, s.output);
  assert.doesNotMatch(s.output(), /BEGIN [A-Z ]*PRIVATE KEY/, 'no key in the log');
  s.child.kill('SIGTERM');
});

test('the checks name what is wrong with a pair: an encrypted key, a truncated certificate, a chain in the wrong order, a directory', (t) => {
  const dir = join(tmpDir(t), 'tls');
  const good = makePair(dir, 'good');
  const refusal = (files: { cert: string; key: string }) => {
    try {
      readTlsPair(files);
    } catch (e) {
      return e as { code: string; where: string; message: string; hint: string };
    }
    assert.fail(`${files.cert} + ${files.key} were taken`);
  };
  const encrypted = join(dir, 'encrypted.key');
  execFileSync('openssl', ['pkey', '-in', good.key, '-aes256', '-passout', 'pass:secret', '-out', encrypted], { stdio: 'pipe' });
  let r = refusal({ cert: good.cert, key: encrypted });
  assert.equal(r.code, 'tls_invalid');
  assert.equal(r.where, 'server.tls.key');
  assert.match(r.message, /is encrypted \(it needs a passphrase\)/);

  const truncated = join(dir, 'truncated.crt');
  writeFileSync(truncated, good.pem.slice(0, 300));
  r = refusal({ cert: truncated, key: good.key });
  assert.equal(r.where, 'server.tls.cert');
  assert.match(r.message, /cannot be read as an X\.509 certificate/);

  // A leaf a CA issued, then the CA: in that order it serves; the other way round it is named.
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-keyout',
      join(dir, 'ca.key'),
      '-out',
      join(dir, 'ca.crt'),
      '-days',
      '2',
      '-subj',
      '/CN=test CA',
    ],
    { stdio: 'pipe' },
  );
  execFileSync(
    'openssl',
    [
      'req',
      '-new',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-keyout',
      join(dir, 'leaf.key'),
      '-subj',
      '/CN=localhost',
      '-out',
      join(dir, 'leaf.csr'),
    ],
    { stdio: 'pipe' },
  );
  execFileSync(
    'openssl',
    [
      'x509',
      '-req',
      '-in',
      join(dir, 'leaf.csr'),
      '-CA',
      join(dir, 'ca.crt'),
      '-CAkey',
      join(dir, 'ca.key'),
      '-CAcreateserial',
      '-days',
      '1',
      '-out',
      join(dir, 'leaf.crt'),
    ],
    { stdio: 'pipe' },
  );
  const leaf = readFileSync(join(dir, 'leaf.crt'), 'utf8');
  const ca = readFileSync(join(dir, 'ca.crt'), 'utf8');
  writeFileSync(join(dir, 'fullchain.pem'), leaf + ca);
  writeFileSync(join(dir, 'backwards.pem'), ca + leaf);
  assert.equal(readTlsPair({ cert: join(dir, 'fullchain.pem'), key: join(dir, 'leaf.key') }).pair.subject, 'CN=localhost');
  r = refusal({ cert: join(dir, 'backwards.pem'), key: join(dir, 'leaf.key') });
  assert.match(r.message, /holds the chain in the wrong order: the certificate of the key .* is number 2 of the file/);

  r = refusal({ cert: dir, key: good.key });
  assert.match(r.message, /is a directory, not a file/);
});

/** `serve` with this config, to its end: code, stderr. As `uid` when given (a root test reading a mode-000 file). */
function serveOnce(configFile: string, args: string[] = [], uid?: number): { code: number | null; stderr: string } {
  const r = spawnSync(process.execPath, ['--no-node-snapshot', join(ROOT, 'src/main.ts'), 'serve', '--config', configFile, ...args], {
    encoding: 'utf8',
    env: { ...process.env, NO_COLOR: '1' },
    timeout: 30_000,
    ...(uid !== undefined ? { uid, gid: uid } : {}),
  });
  return { code: r.status, stderr: r.stderr };
}

test('a certificate or key that cannot serve stops the start: exit 2, the file and the reason, no stack (supervisor and --processes 1)', (t) => {
  const dir = tmpDir(t);
  const good = makePair(join(dir, 'tls'), 'good');
  const other = makePair(join(dir, 'tls'), 'other');
  const garbage = join(dir, 'tls', 'garbage.pem');
  writeFileSync(garbage, 'hello\n');
  const cases: Array<{ name: string; cert: string; key: string; file: string; reason: RegExp }> = [
    { name: 'missing key', cert: good.cert, key: join(dir, 'tls', 'nope.key'), file: join(dir, 'tls', 'nope.key'), reason: /does not exist/ },
    { name: 'mismatched pair', cert: good.cert, key: other.key, file: other.key, reason: /does not belong to the certificate/ },
    { name: 'garbage certificate', cert: garbage, key: good.key, file: garbage, reason: /is not a PEM certificate/ },
    { name: 'key given as the certificate', cert: good.key, key: good.key, file: good.key, reason: /holds a private key, not a certificate/ },
  ];
  for (const c of cases) {
    for (const args of [[], ['--processes', '1']]) {
      const r = serveOnce(tlsConfig(join(dir, c.name.replace(/ /g, '-')), c.cert, c.key), args);
      assert.equal(r.code, 2, `${c.name} ${args.join(' ')}: ${r.stderr}`);
      assert.ok(r.stderr.includes(c.file), `${c.name}: names ${c.file}: ${r.stderr}`);
      assert.match(r.stderr, c.reason, c.name);
      assert.match(r.stderr, /hint: /, c.name);
      assert.doesNotMatch(r.stderr, /\n\s+at /, `${c.name}: no stack`);
    }
  }

  // Unreadable: mode 000. Root reads anything, so as root the server runs as nobody for this case.
  const unreadableDir = join(dir, 'unreadable');
  mkdirSync(unreadableDir, { recursive: true });
  const key = join(unreadableDir, 'server.key');
  writeFileSync(key, readFileSync(good.key));
  chmodSync(key, 0o000);
  const cert = join(unreadableDir, 'server.crt');
  writeFileSync(cert, good.pem);
  const configFile = tlsConfig(unreadableDir, cert, key);
  const root = process.getuid?.() === 0;
  if (root) {
    for (const d of [dir, unreadableDir, join(dir, 'tls')]) chmodSync(d, 0o755);
    chmodSync(configFile, 0o644);
    chmodSync(cert, 0o644);
  }
  const r = serveOnce(configFile, [], root ? 65534 : undefined);
  assert.equal(r.code, 2, r.stderr);
  assert.ok(r.stderr.includes(key), r.stderr);
  assert.match(r.stderr, /cannot be read by this user \(permission denied\)/);
  assert.doesNotMatch(r.stderr, /\n\s+at /);
});
