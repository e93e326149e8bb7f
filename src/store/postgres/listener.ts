/**
 * LISTEN on a connection of its own (a pooled connection goes back to the pool between statements,
 * and its LISTENs with it). Opened by the first listener; when it breaks (a restart, a cut, keepalive
 * finding a silent server), it is opened again with back-off, every channel listened to again, and
 * every listener told to look again (`undefined`): what was notified meanwhile is unknown. The same
 * is said when a channel's LISTEN first takes effect: a listener added before then (while the
 * connection opened) may have missed a notification sent in between.
 */
import pg from 'pg';

export interface ListenerOptions {
  url: string;
  applicationName: string;
  connectTimeoutMs: number;
}

type Listener = (payload: string | undefined) => void;

const MAX_BACKOFF_MS = 5_000;

export function createListener(opts: ListenerOptions) {
  const channels = new Map<string, Set<Listener>>();
  /** Channels whose LISTEN is in effect on the current connection, and who waits for one to be. */
  const active = new Set<string>();
  const waiting = new Map<string, Array<() => void>>();
  let client: pg.Client | undefined;
  let connecting: Promise<void> | undefined;
  let retry: NodeJS.Timeout | undefined;
  let backoff = 100;
  let closed = false;

  const safely = (fn: Listener, payload: string | undefined) => {
    try {
      fn(payload);
    } catch (e) {
      // A listener's failure is its own; the others still run.
      process.stderr.write(`store: a PostgreSQL notification listener failed: ${(e as Error)?.stack ?? String(e)}\n`);
    }
  };
  const quote = (channel: string) => `"${channel.replace(/"/g, '""')}"`;
  /** `channel`'s LISTEN took effect: whoever listened before may have missed something, so look again. */
  const listening = (channel: string) => {
    active.add(channel);
    for (const fn of channels.get(channel) ?? []) safely(fn, undefined);
    for (const resolve of waiting.get(channel) ?? []) resolve();
    waiting.delete(channel);
  };

  async function connect(): Promise<void> {
    const c = new pg.Client({
      connectionString: opts.url,
      application_name: opts.applicationName,
      connectionTimeoutMillis: opts.connectTimeoutMs,
      keepAlive: true,
      keepAliveInitialDelayMillis: 10_000,
    });
    c.on('error', () => lost(c));
    c.on('end', () => lost(c));
    c.on('notification', (n) => {
      for (const fn of channels.get(n.channel) ?? []) safely(fn, n.payload ?? '');
    });
    try {
      await c.connect();
      for (const channel of channels.keys()) await c.query(`LISTEN ${quote(channel)}`);
    } catch {
      void c.end().catch(() => {});
      return schedule();
    }
    if (closed) return void c.end().catch(() => {});
    client = c;
    backoff = 100;
    holdProcess();
    // (Re)connected: what was sent while no connection listened is unknown.
    for (const channel of channels.keys()) listening(channel);
  }

  function lost(c: pg.Client): void {
    if (client !== c) return;
    client = undefined;
    active.clear();
    void c.end().catch(() => {});
    schedule();
  }

  function schedule(): void {
    if (closed || retry) return;
    retry = setTimeout(() => {
      retry = undefined;
      connecting = connect().finally(() => (connecting = undefined));
    }, backoff);
    backoff = Math.min(backoff * 2, MAX_BACKOFF_MS);
    holdProcess();
  }

  /** Held while something listens (a server waits for notifications); otherwise the process may end. */
  function holdProcess(): void {
    const listening = [...channels.values()].some((s) => s.size > 0);
    const socket = (client as unknown as { connection?: { stream?: { ref?(): void; unref?(): void } } } | undefined)?.connection?.stream;
    if (listening) socket?.ref?.();
    else socket?.unref?.();
    if (retry) listening ? retry.ref() : retry.unref();
  }

  return {
    listen(channel: string, fn: Listener): () => void {
      let set = channels.get(channel);
      if (!set) {
        channels.set(channel, (set = new Set()));
        const c = client;
        if (c)
          c.query(`LISTEN ${quote(channel)}`).then(
            () => client === c && listening(channel),
            () => lost(c),
          );
        else if (!connecting && !retry) connecting = connect().finally(() => (connecting = undefined));
      }
      set.add(fn);
      holdProcess();
      return () => {
        set.delete(fn);
        holdProcess();
      };
    },
    /** Resolves once `channel`'s LISTEN is in effect (notifications sent from then on are heard). */
    ready(channel: string): Promise<void> {
      if (active.has(channel)) return Promise.resolve();
      return new Promise((resolve) => {
        let list = waiting.get(channel);
        if (!list) waiting.set(channel, (list = []));
        list.push(resolve);
      });
    },
    async close(): Promise<void> {
      closed = true;
      if (retry) clearTimeout(retry);
      await connecting;
      await client?.end().catch(() => {});
      client = undefined;
    },
  };
}
