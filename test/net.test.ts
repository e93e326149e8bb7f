import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { guardedLookup, httpRequest, isPrivateAddress, parseIPv4, pooledRequest, refusedAheadResolved } from '../src/net/index.ts';
import { waitFor } from './helpers/index.ts';

test('private, loopback, link-local, metadata and reserved addresses are private', () => {
  for (const ip of [
    '127.0.0.1',
    '127.255.255.254',
    '10.1.2.3',
    '172.16.0.1',
    '172.31.255.255',
    '192.168.1.1',
    '169.254.169.254',
    '100.64.0.1',
    '100.100.100.200',
    '0.0.0.0',
    '255.255.255.255',
    '224.0.0.1',
    '192.0.0.192',
    '::',
    '::1',
    '[::1]',
    'fe80::1',
    'fe80::1%eth0',
    'fc00::1',
    'fd00:ec2::254',
    'ff02::1',
    '::ffff:127.0.0.1',
    '::ffff:7f00:1',
    '::ffff:169.254.169.254',
    '::ffff:10.0.0.1',
    '::127.0.0.1',
    '::7f00:1',
    '64:ff9b::127.0.0.1',
    '2002:7f00:1::',
    '2002:a9fe:a9fe::1',
    '::ffff:0:127.0.0.1',
  ]) {
    assert.equal(isPrivateAddress(ip), true, ip);
  }
});

test('public addresses are not private', () => {
  for (const ip of [
    '8.8.8.8',
    '1.1.1.1',
    '93.184.216.34',
    '172.32.0.1',
    '100.128.0.1',
    '2606:4700::1111',
    '::ffff:8.8.8.8',
    '64:ff9b::808:808',
    '2002:808:808::1',
  ]) {
    assert.equal(isPrivateAddress(ip), false, ip);
  }
});

test('numeric IPv4 forms are read as the OS resolver reads them', () => {
  assert.equal(parseIPv4('2130706433'), 0x7f000001);
  assert.equal(parseIPv4('0x7f.1'), 0x7f000001);
  assert.equal(parseIPv4('0177.0.0.1'), 0x7f000001);
  assert.equal(parseIPv4('127.1'), 0x7f000001);
  assert.equal(parseIPv4('0xa9.254.0xa9fe'), (169 * 256 + 254) * 65536 + 0xa9fe);
  assert.equal(parseIPv4('example.com'), null);
  for (const form of ['2130706433', '0x7f000001', '0177.0.0.1', '0x7f.1', '127.1', '0xa9fea9fe', '2852039166', '017700000001']) {
    assert.equal(isPrivateAddress(form), true, form);
  }
  assert.equal(isPrivateAddress('134744072'), false); // 8.8.8.8
  assert.equal(isPrivateAddress('1.2.3.256'), true, 'numeric but malformed fails closed');
  assert.equal(isPrivateAddress('example.com'), false, 'a hostname is checked after resolution, not here');
});

test('guardedLookup refuses hosts that resolve to private addresses, with the host and address named', async () => {
  const lookup = guardedLookup(false);
  const err = await new Promise<any>((resolve) => lookup('localhost', { all: true }, (e) => resolve(e)));
  assert.equal(err?.code, 'EPRIVATEADDR');
  assert.match(err.message, /localhost/);
  assert.match(err.message, /127\.0\.0\.1|::1/);
  const allowed = await new Promise<any>((resolve) => guardedLookup(true)('localhost', {}, (e, address) => resolve({ e, address })));
  assert.equal(allowed.e, null);
  assert.match(String(allowed.address), /127\.0\.0\.1|::1/);
});

test("refusedAheadResolved: a host name is resolved by the guard's lookup and refused as a send would be; literals, allowed networks and names that do not resolve say nothing more", async () => {
  const { hostname } = await import('node:os');
  // localhost is refused by its name; this machine's own name resolves to a loopback address on most systems.
  assert.match((await refusedAheadResolved('http://localhost:9/', false)) ?? '', /localhost is a private or loopback address/);
  const own = await new Promise<string | undefined>((resolve) => guardedLookup(true)(hostname(), {}, (e, address) => resolve(e ? undefined : String(address))));
  if (own && isPrivateAddress(own))
    assert.match(
      (await refusedAheadResolved(`https://${hostname()}/x`, false)) ?? '',
      new RegExp(`^${hostname().replace(/\./g, '\\.')} resolves to .*, a private or loopback address: deliveries to it will be refused`),
    );
  assert.equal(await refusedAheadResolved(`http://${hostname()}/`, true), undefined);
  assert.equal(await refusedAheadResolved('http://93.184.216.34/', false), undefined);
  assert.equal(await refusedAheadResolved('https://no-such-host.invalid/', false), undefined);
  assert.equal(await refusedAheadResolved('not a url', false), undefined);
});

async function listen(handler: http.RequestListener): Promise<{ url: string; close: () => void }> {
  const server = http.createServer(handler);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  return { url: `http://127.0.0.1:${port}`, close: () => server.close() };
}

// One contract, two transports: httpRequest (node:http, the guest fetch's) and pooledRequest (undici, deliveries').
for (const [name, send] of [
  ['httpRequest', httpRequest],
  ['pooledRequest', pooledRequest],
] as const) {
  test(`${name} sends the body and returns status, headers and the capped body; never follows redirects`, async (t) => {
    const seen: string[] = [];
    const srv = await listen((req, res) => {
      let body = '';
      req.on('data', (d) => (body += d));
      req.on('end', () => {
        seen.push(`${req.method} ${req.url} ${req.headers['content-type']} ${body}`);
        if (req.url === '/redirect') {
          res.writeHead(302, { location: '/elsewhere' }).end();
          return;
        }
        res.writeHead(201, { 'x-a': 'b' }).end('x'.repeat(5000));
      });
    });
    t.after(srv.close);
    const r = await send(`${srv.url}/p?q=1`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"a":1}',
      timeoutMs: 2000,
      maxBodyBytes: 100,
      allowPrivate: true,
    });
    assert.equal(r.status, 201);
    assert.equal(r.headers['x-a'], 'b');
    assert.equal(r.body.length, 100);
    assert.equal(r.truncated, true);
    assert.ok(r.durationMs >= 0);
    assert.equal(seen[0], 'POST /p?q=1 application/json {"a":1}');
    const redirect = await send(`${srv.url}/redirect`, { method: 'POST', body: 'x', timeoutMs: 2000, maxBodyBytes: 100, allowPrivate: true });
    assert.equal(redirect.status, 302);
    assert.ok(!seen.some((s) => s.includes('/elsewhere')));
  });

  test(`${name} refuses private addresses after resolution and for literals, unless allowed`, async (t) => {
    const srv = await listen((_req, res) => res.end('ok'));
    t.after(srv.close);
    const port = new URL(srv.url).port;
    for (const url of [
      `http://127.0.0.1:${port}/`,
      `http://localhost:${port}/`,
      `http://2130706433:${port}/`,
      `http://0x7f.1:${port}/`,
      `http://[::ffff:127.0.0.1]:${port}/`,
    ]) {
      await assert.rejects(
        send(url, { method: 'GET', timeoutMs: 2000, maxBodyBytes: 10, allowPrivate: false }),
        (e: any) => e.code === 'EPRIVATEADDR' && /127\.0\.0\.1|::1|::ffff:7f00:1|::ffff:127/.test(e.message),
        url,
      );
    }
    const ok = await send(`http://localhost:${port}/`, { method: 'GET', timeoutMs: 2000, maxBodyBytes: 10, allowPrivate: true });
    assert.equal(ok.body.toString(), 'ok');
  });

  test(`${name} reports refused, reset and timed-out connections with a code`, async (t) => {
    const closed = await listen(() => {});
    const port = new URL(closed.url).port;
    closed.close();
    // Said once: Node's own message (`connect ECONNREFUSED 127.0.0.1:<port>`) repeats the code and the address.
    await assert.rejects(send(`http://127.0.0.1:${port}/`, { method: 'POST', timeoutMs: 2000, maxBodyBytes: 10, allowPrivate: true }), {
      code: 'ECONNREFUSED',
      message: `http://127.0.0.1:${port}: ECONNREFUSED (connection refused)`,
    });

    const resetter = net.createServer((s) => s.on('data', () => s.resetAndDestroy()));
    await new Promise<void>((r) => resetter.listen(0, '127.0.0.1', r));
    t.after(() => resetter.close());
    await assert.rejects(
      send(`http://127.0.0.1:${(resetter.address() as AddressInfo).port}/`, {
        method: 'POST',
        body: 'x',
        timeoutMs: 2000,
        maxBodyBytes: 10,
        allowPrivate: true,
      }),
      { code: 'ECONNRESET' },
    );

    const slow = await listen(() => {});
    t.after(slow.close);
    await assert.rejects(
      send(`${slow.url}/`, { method: 'POST', timeoutMs: 150, maxBodyBytes: 10, allowPrivate: true }),
      (e: any) => e.code === 'ETIMEDOUT' && /150 ms/.test(e.message),
    );

    const ac = new AbortController();
    const p = send(`${slow.url}/`, { method: 'GET', timeoutMs: 5000, maxBodyBytes: 10, allowPrivate: true, signal: ac.signal });
    ac.abort();
    await assert.rejects(p, { code: 'ABORT_ERR' });
  });

  test(`${name}: one signal cuts every exchange on it, and one already aborted sends nothing`, async (t) => {
    let arrived = 0;
    const slow = await listen(() => void arrived++);
    t.after(slow.close);
    const ac = new AbortController();
    const opts = { method: 'POST', body: '{}', timeoutMs: 5000, maxBodyBytes: 10, allowPrivate: true, signal: ac.signal };
    // One that ended before the abort is not touched by it.
    const quick = await listen((_req, res) => res.end('ok'));
    t.after(quick.close);
    assert.equal((await send(`${quick.url}/`, opts)).status, 200);
    const pending = [1, 2, 3].map((i) => send(`${slow.url}/${i}`, opts));
    await waitFor(() => arrived === 3);
    ac.abort();
    for (const p of pending) await assert.rejects(p, { code: 'ABORT_ERR' });
    await assert.rejects(send(`${slow.url}/late`, opts), { code: 'ABORT_ERR' });
    await new Promise((r) => setTimeout(r, 100));
    assert.equal(arrived, 3, 'nothing sent on a signal already aborted');
  });

  test(`${name}: the same URL is judged anew for each allowPrivate setting`, async (t) => {
    const server = await listen((_req, res) => res.end('ok'));
    t.after(server.close);
    const opts = (allowPrivate: boolean) => ({ method: 'GET', timeoutMs: 2000, maxBodyBytes: 10, allowPrivate });
    for (const allowPrivate of [true, false, true, false]) {
      if (allowPrivate) assert.equal((await send(`${server.url}/`, opts(true))).status, 200);
      else await assert.rejects(send(`${server.url}/`, opts(false)), { code: 'EPRIVATEADDR' });
    }
  });

  test(`${name} rejects non-http URLs`, async () => {
    await assert.rejects(send('file:///etc/passwd', { method: 'GET', timeoutMs: 100, maxBodyBytes: 10, allowPrivate: true }), { code: 'EINVALIDURL' });
    await assert.rejects(send('not a url', { method: 'GET', timeoutMs: 100, maxBodyBytes: 10, allowPrivate: true }), { code: 'EINVALIDURL' });
  });

  test(`${name}: a kept-alive connection the receiver closed while idle is not reused`, async (t) => {
    let requests = 0;
    let connections = 0;
    const sockets = new Set<net.Socket>();
    const server = net.createServer((s) => {
      sockets.add(s);
      connections++;
      s.on('data', (d) => {
        if (!String(d).includes('\r\n\r\n')) return;
        requests++;
        s.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: keep-alive\r\n\r\nok');
        setTimeout(() => s.end(), 20); // closed while idle, with no Keep-Alive hint beforehand
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    t.after(() => (server.close(), sockets.forEach((s) => s.destroy())));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
    const o = { method: 'POST', body: 'x', timeoutMs: 2000, maxBodyBytes: 10, allowPrivate: true };
    assert.equal((await send(url, o)).body.toString(), 'ok');
    await new Promise((r) => setTimeout(r, 100));
    assert.equal((await send(url, o)).body.toString(), 'ok');
    assert.deepEqual([requests, connections], [2, 2]);
  });

  test(`${name}: https goes through the same guard, and a receiver whose certificate is not trusted is refused with its TLS code before its handler runs`, async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'net-tls-'));
    t.after(() => rmSync(dir, { recursive: true, force: true }));
    execFileSync(
      'openssl',
      ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', join(dir, 'k.pem'), '-out', join(dir, 'c.pem')].concat(
        ['-days', '2', '-subj', '/CN=localhost', '-addext', 'subjectAltName=DNS:localhost,IP:127.0.0.1'],
      ),
      { stdio: 'pipe' },
    );
    let handled = 0;
    const server = https.createServer(
      { key: readFileSync(join(dir, 'k.pem')), cert: readFileSync(join(dir, 'c.pem')) },
      (_req, res) => (handled++, res.end('ok')),
    );
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    t.after(() => server.close());
    const port = (server.address() as AddressInfo).port;
    const o = { method: 'POST', body: 'x', timeoutMs: 2000, maxBodyBytes: 10 };
    await assert.rejects(send(`https://localhost:${port}/`, { ...o, allowPrivate: false }), { code: 'EPRIVATEADDR' });
    await assert.rejects(
      send(`https://localhost:${port}/`, { ...o, allowPrivate: true }),
      (e: any) => e.code === 'DEPTH_ZERO_SELF_SIGNED_CERT' && e.message.startsWith(`https://localhost:${port}: `),
    );
    assert.equal(handled, 0);
  });

  test(`${name}: credentials in the URL go as Basic auth; repeated answer headers are joined`, async (t) => {
    let auth: string | undefined;
    const srv = await listen((req, res) => {
      auth = req.headers.authorization;
      res
        .writeHead(
          200,
          [
            ['x-r', 'a'],
            ['x-r', 'b'],
          ].flat(),
        )
        .end();
    });
    t.after(srv.close);
    const r = await send(srv.url.replace('http://', 'http://us%40er:p%3Aw@') + '/', {
      method: 'POST',
      body: '{}',
      timeoutMs: 2000,
      maxBodyBytes: 10,
      allowPrivate: true,
    });
    assert.equal(auth, `Basic ${Buffer.from('us@er:p:w').toString('base64')}`);
    assert.equal(r.headers['x-r'], 'a, b');
  });
}

test('a kept-alive connection reset as a request crosses it: httpRequest tries once afresh (node:http says the socket was reused); pooledRequest reports it, and a new connection that is reset is reported by both', async (t) => {
  // The server answers the first request of each connection and resets the connection at its second.
  let requests = 0;
  const sockets = new Set<net.Socket>(); // the kept connections, ended with the test (a client keeps them open)
  const server = net.createServer((s) => {
    sockets.add(s);
    let n = 0;
    s.on('data', (d) => {
      if (!String(d).includes('\r\n\r\n')) return;
      requests++;
      if (n++ === 0) s.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: keep-alive\r\n\r\nok');
      else s.resetAndDestroy();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.after(() => (server.close(), sockets.forEach((s) => s.destroy())));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
  const o = { method: 'POST', body: 'x', timeoutMs: 2000, maxBodyBytes: 10, allowPrivate: true };
  const settle = () => new Promise((r) => setTimeout(r, 50)); // the first connection back in its pool
  assert.equal((await httpRequest(url, o)).body.toString(), 'ok');
  await settle();
  assert.equal((await httpRequest(url, o)).body.toString(), 'ok'); // reset on the kept connection, answered on a new one
  assert.equal(requests, 3);

  requests = 0;
  assert.equal((await pooledRequest(url, o)).body.toString(), 'ok');
  await settle();
  await assert.rejects(pooledRequest(url, o), { code: 'ECONNRESET' });
  assert.equal(requests, 2);

  for (const send of [httpRequest, pooledRequest]) {
    let fresh = 0;
    const resetter = net.createServer((s) => s.on('data', () => (fresh++, s.resetAndDestroy())));
    await new Promise<void>((r) => resetter.listen(0, '127.0.0.1', r));
    t.after(() => resetter.close());
    await assert.rejects(send(`http://127.0.0.1:${(resetter.address() as AddressInfo).port}/`, o), { code: 'ECONNRESET' }, send.name);
    assert.equal(fresh, 1, send.name);
  }
});
