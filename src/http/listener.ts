/**
 * The server's listening socket: plain HTTP/1.1, or with `server.tls` TLS on the same port, HTTP/2
 * for clients that offer it (ALPN h2) and HTTP/1.1 for the others. The app (h3, through srvx's node
 * adapter) sees the same requests either way: an HTTP/2 request gets its `:authority` as `Host`, as
 * an HTTP/1.1 gateway would give it (the console's host check, integrations' request headers), and
 * an answer's connection-specific headers (`Connection: close` after a 413, an integration's
 * `Keep-Alive`), which HTTP/2 forbids and Node refuses with an exception, are left out of it.
 */
import type { EventEmitter } from 'node:events';
import { createServer, type IncomingMessage, type Server as HttpServer, type ServerResponse } from 'node:http';
import { constants, createSecureServer, Http2ServerRequest, Http2ServerResponse, type Http2SecureServer, type ServerHttp2Session } from 'node:http2';
import type { Socket } from 'node:net';
import type { TlsPair } from './tls.ts';

type NodeHandler = (req: IncomingMessage, res: ServerResponse) => unknown;

/** A client that sends nothing this long after a request (HTTP/1.1 keep-alive, an HTTP/2 session with no stream) is closed. */
const KEEP_ALIVE_MS = 5_000;
/** Receiving a whole request (HTTP/1.1) may last this long. */
const REQUEST_TIMEOUT_MS = 120_000;
const HEADERS_TIMEOUT_MS = 30_000;
/** Streams one HTTP/2 connection may have open at once (RFC 9113 advises no fewer than 100). */
const MAX_CONCURRENT_STREAMS = 100;

/** HTTP/1.1 hop-by-hop headers: HTTP/2 has no place for them (RFC 9113 8.2.2). */
const CONNECTION_HEADERS = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade']);

export interface Listener {
  server: HttpServer | Http2SecureServer;
  /** It speaks TLS (server.tls is set). */
  secure: boolean;
  /** Serve `pair` to connections from now on (TLS only; those open keep theirs). Throws when it cannot. */
  setPair(pair: TlsPair): void;
  /**
   * Stop accepting and let the requests in flight finish: idle connections are closed at once
   * (HTTP/2 sessions are told to go away), and those still open at `deadline` are cut.
   */
  close(deadline: number): Promise<void>;
}

/**
 * `silentMs` (TLS only): an HTTP/2 stream through which nothing passed either way this long is
 * cancelled, and a connection silent this long (plus KEEP_ALIVE_MS) is cut: a client that stops
 * sending a body, or that leaves a closed session's socket half open, cannot hold it for ever. It
 * must outlast the longest quiet answer (an invocation's wall time): the server passes it.
 */
export function createListener(
  handler: NodeHandler,
  tls?: TlsPair,
  opts: {
    silentMs?: number;
    /** Makes the server answer the HTTP/1.1 requests Node's parser refuses (src/http/client-error.ts). */
    clientErrors?: (server: EventEmitter) => void;
  } = {},
): Listener {
  if (!tls) {
    const server = createServer({ requestTimeout: REQUEST_TIMEOUT_MS, headersTimeout: HEADERS_TIMEOUT_MS, keepAliveTimeout: KEEP_ALIVE_MS }, handler);
    opts.clientErrors?.(server);
    return {
      server,
      secure: false,
      setPair() {
        throw new Error('the server does not speak TLS');
      },
      close: (deadline) =>
        drain(
          server,
          deadline,
          () => server.closeIdleConnections(),
          () => server.closeAllConnections(),
        ),
    };
  }

  const server = createSecureServer(
    {
      cert: tls.cert,
      key: tls.key,
      allowHTTP1: true,
      Http2ServerRequest: Request2,
      Http2ServerResponse: Response2,
      settings: { maxConcurrentStreams: MAX_CONCURRENT_STREAMS },
    },
    handler as unknown as (req: Http2ServerRequest, res: Http2ServerResponse) => void,
  );
  // The HTTP/1.1 connections it takes follow the same limits (and refusals) as the plain server's.
  Object.assign(server, { requestTimeout: REQUEST_TIMEOUT_MS, headersTimeout: HEADERS_TIMEOUT_MS, keepAliveTimeout: KEEP_ALIVE_MS });
  opts.clientErrors?.(server);
  const silentMs = opts.silentMs ?? REQUEST_TIMEOUT_MS;
  // The TCP connections, by peer: what ends one for good (an HTTP/2 session only half-closes it).
  const sockets = new Map<string, Socket>();
  server.on('connection', (socket: Socket) => {
    const peer = peerOf(socket);
    sockets.set(peer, socket);
    socket.setTimeout(silentMs + KEEP_ALIVE_MS, () => socket.destroy());
    socket.once('close', () => sockets.delete(peer));
  });
  const sessions = trackSessions(server, (session) => sockets.get(peerOf(session.socket)));
  server.on('stream', (stream) => stream.setTimeout(silentMs, () => stream.close(constants.NGHTTP2_CANCEL)));
  return {
    server,
    secure: true,
    setPair(pair) {
      server.setSecureContext({ cert: pair.cert, key: pair.key });
    },
    close(deadline) {
      // Idle HTTP/2 sessions end now. Then the server's close() closes the idle HTTP/1.1
      // connections and tells the busy sessions to go away once their streams are done.
      sessions.drain();
      return drain(
        server,
        deadline,
        () => {},
        () => {
          for (const s of sockets.values()) s.destroy();
        },
      );
    },
  };
}

function drain(server: HttpServer | Http2SecureServer, deadline: number, closeIdle: () => void, closeAll: () => void): Promise<void> {
  const drained = new Promise<void>((r) => server.close(() => r()));
  closeIdle();
  const timer = setTimeout(closeAll, Math.max(0, deadline - Date.now()));
  return drained.finally(() => clearTimeout(timer));
}

function peerOf(socket: { remoteAddress?: string; remotePort?: number }): string {
  return `${socket.remoteAddress}|${socket.remotePort}`;
}

/** After a session's GOAWAY and its last stream, the client has this long to close the connection. */
const GOAWAY_GRACE_MS = 1_000;

/**
 * HTTP/2 sessions and their open streams. A session with no stream for KEEP_ALIVE_MS, or none when
 * the server drains, is ended at once: GOAWAY (a request the client sent meanwhile is one it knows
 * was not taken, safe to send again) and the connection closed. One that was busy when the server
 * drained is told to go away, finishes its streams, and its connection is cut GOAWAY_GRACE_MS after
 * the last: Node only half-closes it, and a client that never closes its side held the shutdown
 * for its whole timeout.
 */
function trackSessions(server: Http2SecureServer, socketOf: (session: ServerHttp2Session) => Socket | undefined): { drain(): void } {
  const open = new Map<ServerHttp2Session, { streams: number; socket: Socket | undefined }>();
  let draining = false;
  const cut = (socket: Socket | undefined) => {
    if (!socket) return;
    const timer = setTimeout(() => socket.destroy(), GOAWAY_GRACE_MS);
    timer.unref();
    socket.once('close', () => clearTimeout(timer));
  };
  const end = (session: ServerHttp2Session, socket: Socket | undefined) => {
    // Not closed yet: destroy() sends GOAWAY and closes the connection itself.
    if (!session.closed && !session.destroyed) session.destroy();
    else cut(socket);
  };
  server.on('session', (session: ServerHttp2Session) => {
    const state = { streams: 0, socket: socketOf(session) };
    let timer: NodeJS.Timeout | undefined;
    const idle = () => {
      clearTimeout(timer);
      if (draining) return end(session, state.socket);
      if (session.closed || session.destroyed) return;
      timer = setTimeout(() => end(session, state.socket), KEEP_ALIVE_MS);
      timer.unref();
    };
    open.set(session, state);
    idle();
    session.on('stream', (stream) => {
      state.streams++;
      clearTimeout(timer);
      stream.once('close', () => {
        if (--state.streams === 0) idle();
      });
    });
    session.once('close', () => {
      clearTimeout(timer);
      open.delete(session);
    });
  });
  return {
    drain() {
      draining = true;
      for (const [session, state] of open) if (state.streams === 0) end(session, state.socket);
    },
  };
}

/** An HTTP/2 request with `Host` set from `:authority` when the client sent none (RFC 9113 8.3.1). */
class Request2 extends Http2ServerRequest {
  constructor(...args: ConstructorParameters<typeof Http2ServerRequest>) {
    super(...args);
    const authority = this.headers[':authority'];
    if (typeof authority === 'string' && this.headers.host === undefined) {
      this.headers.host = authority;
      this.rawHeaders.push('host', authority);
    }
  }
}

/** An HTTP/2 answer without the HTTP/1.1 connection headers (Node throws on them, and takes the process down from inside srvx). */
class Response2 extends Http2ServerResponse {
  override writeHead(status: number, ...rest: unknown[]): this {
    const i = rest.length - 1;
    if (i >= 0 && rest[i] && typeof rest[i] === 'object') rest[i] = withoutConnectionHeaders(rest[i] as string[] | Record<string, unknown>);
    return (super.writeHead as (status: number, ...rest: unknown[]) => this)(status, ...rest);
  }
}

function withoutConnectionHeaders(headers: string[] | Record<string, unknown>): string[] | Record<string, unknown> {
  if (Array.isArray(headers)) {
    // srvx hands a flat [name, value, name, value, …] list.
    if (!headers.some((h, i) => i % 2 === 0 && typeof h === 'string' && CONNECTION_HEADERS.has(h.toLowerCase()))) return headers;
    const out: string[] = [];
    for (let i = 0; i < headers.length; i += 2) if (!CONNECTION_HEADERS.has(String(headers[i]).toLowerCase())) out.push(headers[i], headers[i + 1]);
    return out;
  }
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(headers)) if (!CONNECTION_HEADERS.has(k.toLowerCase())) out[k] = v;
  return out;
}
