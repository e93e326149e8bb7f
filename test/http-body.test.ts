/**
 * The body readers (src/http/body.ts) on the request the server hands routes: srvx's NodeRequest
 * over Node's own, HTTP/1.1 and HTTP/2 on loopback. A client that goes away mid-body is
 * clientGone (400), however the reader meets it: never a cut body taken as whole, never a wait
 * that does not end.
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import http2 from 'node:http2';
import net from 'node:net';
import { NodeRequest } from 'srvx/node';
import { readBodyLimited } from '../src/http/body.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** What the reader did with the request: its bytes, or its error's status and message; 'no answer' if it had not settled within 5 s. */
type Outcome = { bytes: number } | { status: number; message: string } | 'no answer';
async function outcome(read: Promise<Uint8Array>): Promise<Outcome> {
  return Promise.race([
    read.then(
      (b) => ({ bytes: b.byteLength }),
      (e: { status: number; message: string }) => ({ status: e.status, message: e.message }),
    ),
    sleep(5_000).then(() => 'no answer' as const),
  ]);
}

/** A server whose handler waits `gapMs` (as a route awaiting its authentication does) before it reads the body. */
async function server(t: TestContext, gapMs: number, kind: 'http1' | 'http2'): Promise<{ port: number; read: Promise<Outcome> }> {
  let told!: (o: Outcome) => void;
  const read = new Promise<Outcome>((r) => (told = r));
  const handle = async (node: http.IncomingMessage | http2.Http2ServerRequest, res: http.ServerResponse | http2.Http2ServerResponse) => {
    const req = new NodeRequest({ req: node as http.IncomingMessage, res: res as http.ServerResponse }) as unknown as Request;
    await sleep(gapMs);
    told(await outcome(readBodyLimited(req, 1 << 20)));
    if (!res.destroyed) res.end();
  };
  const s = kind === 'http1' ? http.createServer(handle) : http2.createServer(handle);
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  t.after(() => s.close());
  return { port: (s.address() as net.AddressInfo).port, read };
}

test('HTTP/1.1: a client that resets its connection before the reader starts is clientGone, not a wait without end', async (t) => {
  const { port, read } = await server(t, 200, 'http1');
  const socket = net.connect(port, '127.0.0.1');
  socket.on('error', () => {});
  await new Promise((r) => socket.once('connect', r));
  socket.write(`POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 5000\r\n\r\n${'x'.repeat(1000)}`);
  await sleep(20);
  socket.resetAndDestroy();
  assert.deepEqual(await read, { status: 400, message: 'the client closed the connection before the request body ended' });
});

test('HTTP/1.1: the whole body, read after a wait, is the whole body', async (t) => {
  const { port, read } = await server(t, 200, 'http1');
  const socket = net.connect(port, '127.0.0.1');
  await new Promise((r) => socket.once('connect', r));
  socket.write(`POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 5000\r\n\r\n${'x'.repeat(5000)}`);
  assert.deepEqual(await read, { bytes: 5000 });
  socket.destroy();
});

test('HTTP/2: a client that cancels its stream mid-body is clientGone, not a cut body taken as whole', async (t) => {
  const { port, read } = await server(t, 0, 'http2');
  const client = http2.connect(`http://127.0.0.1:${port}`);
  client.on('error', () => {});
  t.after(() => client.close());
  const stream = client.request({ ':method': 'POST', ':path': '/', 'content-length': '5000' });
  stream.on('error', () => {});
  stream.write('x'.repeat(1000));
  await sleep(100);
  stream.close(http2.constants.NGHTTP2_CANCEL);
  assert.deepEqual(await read, { status: 400, message: 'the client closed the connection before the request body ended' });
});

test('HTTP/2: a whole body is the whole body', async (t) => {
  const { port, read } = await server(t, 0, 'http2');
  const client = http2.connect(`http://127.0.0.1:${port}`);
  t.after(() => client.close());
  const stream = client.request({ ':method': 'POST', ':path': '/', 'content-length': '5000' });
  stream.end('x'.repeat(5000));
  assert.deepEqual(await read, { bytes: 5000 });
});
