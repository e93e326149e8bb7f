/**
 * Requests that never reach the app because Node's HTTP parser refused them: a request line and
 * headers past `maxHeaderSize` (16 KiB unless --max-http-header-size says otherwise), a request that
 * took too long to send its headers, bytes that are not HTTP. Node's own answer to these is a bare
 * status line, written as the socket is destroyed: a client still sending its 100 kB query string
 * gets a connection reset instead of the answer. This one answers in the API's error shape, then
 * reads and drops what the client is still sending until it has read the answer and closed.
 */
import { maxHeaderSize } from 'node:http';
import type { Duplex } from 'node:stream';
import type { ErrorCode } from '../errors.ts';

/** How long a refused connection may keep sending before it is cut. */
const DRAIN_MS = 5_000;

interface Refusal {
  status: number;
  reason: string;
  code: ErrorCode;
  message: string;
  hint?: string;
}

function refusalOf(code: string | undefined): Refusal {
  switch (code) {
    case 'HPE_HEADER_OVERFLOW':
      return {
        status: 431,
        reason: 'Request Header Fields Too Large',
        code: 'headers_too_large',
        message: `the request line and headers are larger than ${maxHeaderSize} bytes`,
        hint: 'send long data in a request body, not in the URL or a header',
      };
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return { status: 408, reason: 'Request Timeout', code: 'bad_request', message: 'the request was not received in time' };
    case 'HPE_CHUNK_EXTENSIONS_OVERFLOW':
      return { status: 413, reason: 'Payload Too Large', code: 'payload_too_large', message: 'the chunk extensions of the body are too large' };
    default:
      return { status: 400, reason: 'Bad Request', code: 'bad_request', message: 'the request is not valid HTTP/1.1' };
  }
}

/** The server's `clientError` listener. */
export function answerClientError(err: NodeJS.ErrnoException, socket: Duplex): void {
  if (err.code === 'ECONNRESET' || !socket.writable) {
    socket.destroy();
    return;
  }
  const r = refusalOf(err.code);
  const body = JSON.stringify({ error: { code: r.code, message: r.message, ...(r.hint ? { hint: r.hint } : {}) } });
  // The parser that refused the request would read on (and refuse again): what follows is dropped.
  socket.removeAllListeners('data');
  socket.on('data', () => {});
  socket.on('end', () => socket.destroy());
  setTimeout(() => socket.destroy(), DRAIN_MS).unref();
  socket.end(
    `HTTP/1.1 ${r.status} ${r.reason}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
  );
  socket.resume();
}
