/**
 * A PostgreSQL advisory lock held for as long as a process runs. Such a lock belongs to a session:
 * a database restart, a failover or a terminated backend ends it, and from then on any other
 * session may take it. So the lock has a connection of its own, and when that connection ends it
 * connects again at once (and again, while the server is away) and takes the lock back before
 * anything else; if another session holds it by then, `lost` is called, once, and nothing is
 * tried again: the lock is no longer this process's, and the caller stops doing what it guarded.
 *
 * Asynchronous, on the calling thread, with the driver (not the store's synchronous bridge): it
 * must notice a dropped connection when nothing else runs a statement, and take the lock back in
 * the moment the server answers again, whatever the store is doing.
 */
import type pg from 'pg';

export interface SessionLockOptions {
  url: string;
  /** The two keys of pg_try_advisory_lock(int, int): a number, and a text hashed by the server (hashtext). */
  key: number;
  name: string;
  applicationName: string;
  /** The connection ended: the lock is not held until taken back (called once per outage). */
  dropped?(error: Error): void;
  /** Taken back after a drop. */
  retaken?(afterMs: number): void;
  /** Another session held it when this one came back: the lock is gone for good. */
  lost(): void;
}

export interface SessionLock {
  /** Unlock and close the connection (the lock is free for another process once this resolves). */
  release(): Promise<void>;
}

/**
 * Waits between attempts to come back: soon after a restart, then twice a second while the server
 * is away (a failed connect is cheap; a process that starts when the server is back needs longer
 * than that to reach the point where it would take the lock).
 */
const RETRY_MS = [50, 100, 200, 500];
/** A connection that went half-open (a host gone without a word) is found by a query this often. */
const PROBE_MS = 5_000;
const TIMEOUT_MS = 5_000;

/** The lock, or undefined when another session holds it now. */
export async function holdSessionLock(opts: SessionLockOptions): Promise<SessionLock | undefined> {
  // Loaded here: a SQLite store never needs the driver on this thread.
  const { default: Pg } = await import('pg');
  let client: pg.Client | undefined;
  let done = false;
  let retry: NodeJS.Timeout | undefined;
  let droppedAt = 0;
  let attempts = 0;

  /** Connect and try the lock: the connection when taken, undefined when another session holds it. */
  async function take(): Promise<pg.Client | undefined> {
    const c = new Pg.Client({
      connectionString: opts.url,
      application_name: opts.applicationName,
      connectionTimeoutMillis: TIMEOUT_MS,
      query_timeout: TIMEOUT_MS,
      keepAlive: true,
      keepAliveInitialDelayMillis: 10_000,
    });
    c.on('error', (e) => drop(c, e));
    c.on('end', () => drop(c, new Error('the connection to PostgreSQL ended')));
    try {
      await c.connect();
      const got = (await c.query('SELECT pg_try_advisory_lock($1::integer, hashtext($2)) AS got', [opts.key, opts.name])).rows[0]?.got;
      if (got === true) {
        // Never what keeps a process alive: the process's own work does that.
        (c as unknown as { connection?: { stream?: { unref?(): void } } }).connection?.stream?.unref?.();
        return c;
      }
    } catch (e) {
      close(c);
      throw e;
    }
    close(c);
    return undefined;
  }

  function drop(c: pg.Client, error: Error): void {
    if (c !== client || done) return;
    client = undefined;
    close(c);
    droppedAt = Date.now();
    attempts = 0;
    opts.dropped?.(error);
    comeBack();
  }

  function comeBack(): void {
    retry = setTimeout(async () => {
      retry = undefined;
      if (done) return;
      let c: pg.Client | undefined;
      try {
        c = await take();
      } catch {
        attempts++;
        return comeBack();
      }
      if (done) return void (c && close(c));
      if (!c) {
        done = true;
        clearInterval(probe);
        return opts.lost();
      }
      client = c;
      opts.retaken?.(Date.now() - droppedAt);
    }, RETRY_MS[Math.min(attempts, RETRY_MS.length - 1)]);
    retry.unref();
  }

  const first = await take();
  if (!first) return undefined;
  client = first;
  let probing = false;
  const probe = setInterval(() => {
    const c = client;
    if (!c || probing) return;
    probing = true;
    c.query('SELECT 1')
      .catch((e: Error) => drop(c, e))
      .finally(() => (probing = false));
  }, PROBE_MS);
  probe.unref();

  return {
    async release() {
      done = true;
      clearTimeout(retry);
      clearInterval(probe);
      const c = client;
      client = undefined;
      if (!c) return;
      // Unlocked explicitly: a process that takes it next right after (a restart in the same
      // process) must not race the server's cleanup of this session.
      await within(c.query('SELECT pg_advisory_unlock($1::integer, hashtext($2))', [opts.key, opts.name]).catch(() => {}), TIMEOUT_MS);
      await within(c.end().catch(() => {}), TIMEOUT_MS);
      close(c);
    },
  };
}

/** End a connection without waiting on it (a half-open one would never answer). */
function close(c: pg.Client): void {
  c.end().catch(() => {});
  (c as unknown as { connection?: { stream?: { destroy?(): void } } }).connection?.stream?.destroy?.();
}

function within(p: Promise<unknown>, ms: number): Promise<unknown> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([p, new Promise((r) => (timer = setTimeout(r, ms)))]).finally(() => clearTimeout(timer));
}
