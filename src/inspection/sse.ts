/**
 * Server-sent events for the live feeds (`deliveries tail`, `logs --follow`). A feed is a cursor
 * read over rows whose ids only grow, plus a change signal: each signal triggers a read of
 * everything after the last id sent, so a burst, a slow client or a reconnect (`?after=` or
 * `Last-Event-ID`) never skips a row. The change signal carries no data: the database is the
 * source of truth. Reads pause while the client is behind (back-pressure) and resume as it drains.
 */
import { oncePerTurn } from '../lib/batch.ts';
import { wholeNumber } from '../http/params.ts';

export interface FeedItem {
  cursor: number;
  event: string;
  data: unknown;
}

export interface Feed {
  /** Where the stream starts: items after this cursor are sent. */
  start: number | Promise<number>;
  /** Items after `after`, oldest first, at most `limit` (read from the store: may answer later). */
  read(after: number, limit: number): FeedItem[] | Promise<FeedItem[]>;
  /**
   * Subscribe to changes: `changed()` when rows may have been added; `push(item)` for an event
   * that is not a row (sent without an id; `item.cursor` says which row it belongs to, and it is
   * skipped when that row has not been sent yet, because the row will carry it). Returns the unsubscribe.
   */
  subscribe(changed: () => void, push: (item: FeedItem) => void): () => void;
}

const READ_BATCH = 200;
const HIGH_WATER = 64;
const HEARTBEAT_MS = 15_000;
const enc = new TextEncoder();

const frame = (event: string, data: unknown, id?: number) =>
  enc.encode(`${id === undefined ? '' : `id: ${id}\n`}event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);

/** The open streams of one server: heartbeats, and closing them all when shutdown begins. */
export interface StreamHub {
  readonly size: number;
  /** The stream's answer; once its start is read, when that comes from the store. */
  response(req: Request, feed: Feed): Response | Promise<Response>;
  closeAll(): void;
}

export function createStreamHub(opts: {
  closing: () => boolean;
  checkEveryMs?: number;
  /**
   * Other processes write to the same store (serving processes under the supervisor): their rows
   * come with no change signal here, so every stream also reads on each check (one indexed read
   * per open stream every `checkEveryMs`).
   */
  poll?: boolean;
}): StreamHub {
  const open = new Set<{ close(): void; beat(): void; poke(): void }>();
  let timer: NodeJS.Timeout | undefined;
  let sinceBeat = 0;
  const every = opts.checkEveryMs ?? 200;

  // One timer for all streams, only while some are open: the HTTP server drains open requests on
  // shutdown, so streams must end as soon as `closing` is set, not at the shutdown time-out.
  function watch(): void {
    if (timer || !open.size) return;
    timer = setInterval(() => {
      if (opts.closing()) return closeAll();
      if (opts.poll) for (const s of open) s.poke();
      sinceBeat += every;
      if (sinceBeat >= HEARTBEAT_MS) {
        sinceBeat = 0;
        for (const s of open) s.beat();
      }
    }, every);
    timer.unref();
  }

  function unwatch(): void {
    if (timer && !open.size) {
      clearInterval(timer);
      timer = undefined;
    }
  }

  function closeAll(): void {
    for (const s of [...open]) s.close();
    unwatch();
  }

  function response(req: Request, feed: Feed): Response | Promise<Response> {
    // A start read from the store is read before the answer: a store that fails says so (503), not a broken stream.
    return typeof feed.start === 'number' ? stream(req, feed, feed.start) : feed.start.then((start) => stream(req, feed, start));
  }

  function stream(req: Request, feed: Feed, start: number): Response {
    let cursor = start;
    let behind = false;
    let done = false;
    let unsubscribe: (() => void) | undefined;
    let controller!: ReadableStreamDefaultController<Uint8Array>;

    const handle = {
      close() {
        if (done) return;
        done = true;
        unsubscribe?.();
        open.delete(handle);
        unwatch();
        try {
          controller.close();
        } catch {
          /* already closed or cancelled */
        }
      },
      beat() {
        if (!done) controller.enqueue(enc.encode(': keep-alive\n\n'));
      },
      poke() {
        if (!behind) schedule();
      },
    };

    let pumping = false;
    let again = false;
    /** Reads and sends until the client is behind or nothing is left; one read at a time. */
    async function pump(): Promise<void> {
      if (done) return;
      if (pumping) return void (again = true);
      pumping = true;
      try {
        do {
          again = false;
          behind = false;
          for (;;) {
            // Read no more than the stream has room for: a slow client holds at most HIGH_WATER items.
            const room = Math.min(READ_BATCH, controller.desiredSize ?? 1);
            if (room <= 0) {
              behind = true; // the client's pull resumes us
              return;
            }
            const items = await feed.read(cursor, room);
            if (done) return;
            for (const it of items) {
              controller.enqueue(frame(it.event, it.data, it.cursor));
              cursor = it.cursor;
            }
            if (items.length < room) break;
          }
        } while (again && !done);
      } finally {
        pumping = false;
      }
    }

    const pumpSoon = oncePerTurn(() => {
      // The store closed under us (shutdown): end the stream, the client resumes.
      pump().catch(() => handle.close());
    });
    const schedule = () => {
      if (!done) pumpSoon();
    };

    const body = new ReadableStream<Uint8Array>(
      {
        start(c) {
          controller = c;
          c.enqueue(enc.encode('retry: 1000\n\n'));
          c.enqueue(frame('ready', { cursor: String(cursor) }));
          unsubscribe = feed.subscribe(schedule, (item) => {
            if (!done && item.cursor <= cursor) controller.enqueue(frame(item.event, item.data));
          });
          open.add(handle);
          watch();
          schedule();
        },
        pull() {
          if (behind) schedule();
        },
        cancel() {
          handle.close();
        },
      },
      { highWaterMark: HIGH_WATER },
    );
    req.signal?.addEventListener('abort', () => handle.close(), { once: true });

    return new Response(body, {
      headers: {
        'content-type': 'text/event-stream; charset=utf-8',
        'cache-control': 'no-cache, no-transform',
        'x-accel-buffering': 'no',
        // A stream's connection is not reused: when the stream ends (shutdown), the socket goes too.
        connection: 'close',
      },
    });
  }

  return {
    get size() {
      return open.size;
    },
    response,
    closeAll,
  };
}

/**
 * The cursor a client asks to resume after: `after` (the query's, already checked) or the
 * `Last-Event-ID` header; undefined for "from now", NaN when the header is no cursor (a whole number
 * both stores hold, as a query's cursor must be).
 */
export function resumeCursor(req: Request, after: string | undefined): number | undefined {
  const raw = after || req.headers.get('last-event-id') || '';
  if (!raw) return undefined;
  return wholeNumber(raw) ?? Number.NaN;
}
