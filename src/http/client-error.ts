/**
 * Requests that never reach the app because Node's HTTP parser refused them: a request line and
 * headers past `maxHeaderSize` (16 KiB unless --max-http-header-size says otherwise), a request that
 * took too long to send its headers, bytes that are not HTTP. Node's own answer to these is a bare
 * status line, written as the socket is destroyed: a client still sending its 100 kB query string
 * gets a connection reset instead of the answer. This one answers in the API's error shape, then
 * reads and drops what the client is still sending until it has read the answer and closed.
 *
 * On a keep-alive connection the refused bytes may follow requests still being answered (pipelined:
 * a valid POST, then garbage). Responses go out in the order of their requests, so those are
 * written first and the refusal after them; answering at once would put the refusal in place of a
 * response the client is owed (its event stored, the client never told).
 */
import type { EventEmitter } from 'node:events';
import { maxHeaderSize, type IncomingMessage, type ServerResponse } from 'node:http';
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

/** The requests of each connection whose responses are not yet written, oldest first. */
const unanswered = new WeakMap<Duplex, Array<{ req: IncomingMessage; res: ServerResponse }>>();
/** Connections already refused (the parser may report its error again, at the client's end). */
const refused = new WeakSet<Duplex>();

/** Answer what Node's HTTP parser refuses on `server` in the API's error shape, after the responses each connection is owed. */
export function answerClientErrors(server: EventEmitter): void {
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    let list = unanswered.get(req.socket);
    if (!list) unanswered.set(req.socket, (list = []));
    const entry = { req, res };
    list.push(entry);
    res.once('close', () => list.splice(list.indexOf(entry), 1));
  });
  server.on('clientError', answerClientError);
}

/** The server's `clientError` listener. */
function answerClientError(err: NodeJS.ErrnoException, socket: Duplex): void {
  if (refused.has(socket)) return;
  if (err.code === 'ECONNRESET' || !socket.writable) {
    socket.destroy();
    return;
  }
  refused.add(socket);
  const r = refusalOf(err.code);
  const body = JSON.stringify({ error: { code: r.code, message: r.message, ...(r.hint ? { hint: r.hint } : {}) } });
  // The parser that refused the request would read on (and refuse again): what follows is dropped.
  let answered = false;
  socket.removeAllListeners('data');
  socket.on('data', () => {});
  socket.on('end', () => answered && socket.destroy());
  socket.resume();
  const pending = unanswered.get(socket) ?? [];
  // The requests received whole are answered first; one cut by the error (a bad chunk in its body)
  // is the refused one: the refusal is its answer, unless its response has started.
  const owed = pending.filter(({ req }) => req.complete);
  const cut = pending.find(({ req }) => !req.complete);
  const answer = () => {
    answered = true;
    if (!socket.writable) return; // the last response closed the connection
    setTimeout(() => socket.destroy(), DRAIN_MS).unref();
    if (cut?.res.headersSent) socket.end();
    else
      socket.end(
        `HTTP/1.1 ${r.status} ${r.reason}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
      );
  };
  let left = owed.length;
  if (!left) return answer();
  for (const { res } of owed) res.once('close', () => --left === 0 && answer());
}
