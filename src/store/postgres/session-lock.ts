/**
 * A PostgreSQL advisory lock held for as long as a process runs. Such a lock belongs to a session:
 * a database restart, a failover or a terminated backend ends it, and from then on any other
 * session may take it. So the lock has a connection of its own, and when that connection ends it
 * connects again at once (and again, while the server is away) and takes the lock back before
 * anything else; if another session holds it by then, `lost` is called, once, and nothing is
 * tried again: the lock is no longer this process's, and the caller stops doing what it guarded.
 *
 * The connection this process let go is not always gone on the server: a check that timed out (a
 * stalled backend, a network that dropped packets for a while) closes it here, while its backend
 * lives on, holding the lock, until it reads the close (or, for a peer that vanished, until its
 * TCP keepalives fail). Each lock's sessions carry one application_name with a random part, so a
 * holder by that name is this lock's own earlier session, never another process: it is ended
 * (pg_terminate_backend) and waited for in the lock's queue, where a waiting session is served
 * before any that only tries. Only a holder by another name is another process.
 *
 * At the start, a holder that does something (a statement while we look, or a session queued to
 * take it back) is another live process: refused. One that does nothing is a session whose client
 * went away (a host that crashed, a node restarted at once) or is frozen: it is waited for as long
 * as the server's keepalives need to end it, and the lock is taken if it ends; it is never ended
 * from here (a frozen node is alive, and its id is its own).
 *
 * Asynchronous, on the calling process's event loop, with the driver on a connection of its own
 * (not the store's pool): it must notice a dropped connection when nothing else runs a statement,
 * and take the lock back in the moment the server answers again, whatever the store is doing.
 */
import { randomBytes } from 'node:crypto';
import type pg from 'pg';

export interface SessionLockOptions {
  url: string;
  /** The two keys of pg_try_advisory_lock(int, int): a number, and a text hashed by the server (hashtext). */
  key: number;
  name: string;
  /** The sessions' application_name; a random part is added, which marks them as this lock's. */
  applicationName: string;
  /** The connection ended: the lock is not held until taken back (called once per outage). */
  dropped?(error: Error): void;
  /** This lock's own earlier session still holds it (the server has not seen it close): it is ended, then the lock taken. */
  endingOwn?(holder: LockHolder): void;
  /** Taken back after a drop. */
  retaken?(afterMs: number): void;
  /** Another session held it when this one came back: the lock is gone for good. */
  lost(holder: LockHolder): void;
  /** At the start, how long after its last statement a holder that does nothing is waited for (default 30 s). */
  silentWaitMs?: number;
}

export interface SessionLock {
  /** Unlock and close the connection (the lock is free for another process once this resolves). */
  release(): Promise<void>;
}

/** The session that holds the lock, as pg_stat_activity shows it. */
export interface LockHolder {
  /** Its backend's process id on the server (pg_terminate_backend takes it). */
  pid: number;
  applicationName: string;
  /** Its client's address (null over a Unix socket, or when the server does not show it). */
  clientAddr: string | null;
  /** When it last began a statement (the server's clock); null when the server does not show it (another role's session, track_activities off). */
  lastActive: Date | null;
}

/** The lock was not had at the start. */
export interface LockRefused {
  refused: true;
  holder?: LockHolder;
  /** The holder did nothing for as long as it was waited for (see holdSessionLock). */
  silent: boolean;
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
/** How long one wait in the lock's queue lasts (behind this lock's own earlier session) before looking again. */
const QUEUE_WAIT_MS = 10_000;
/**
 * The server ends a session whose client vanished after tcp_keepalives_idle + interval × count
 * without an answer (10 + 5 × 3 s, set below), or after tcp_user_timeout with data unacknowledged.
 */
const KEEPALIVES = { tcp_keepalives_idle: '10', tcp_keepalives_interval: '5', tcp_keepalives_count: '3', tcp_user_timeout: '25000' };
const SILENT_WAIT_MS = 30_000;

/** The lock, or why not: another session holds it now. */
export async function holdSessionLock(opts: SessionLockOptions): Promise<SessionLock | LockRefused> {
  // Loaded here: a SQLite store never needs the driver on this thread.
  const { default: Pg } = await import('pg');
  const applicationName = `${opts.applicationName} ${randomBytes(6).toString('hex')}`;
  let client: pg.Client | undefined;
  /** The connection that is taking the lock back, while it does. */
  let regaining: pg.Client | undefined;
  let done = false;
  let droppedAt = 0;

  /** A connection of this lock's, with server-side keepalives: a session whose client vanished ends in seconds, not hours. */
  async function connect(): Promise<pg.Client> {
    const c = new Pg.Client({
      connectionString: opts.url,
      application_name: applicationName,
      connectionTimeoutMillis: TIMEOUT_MS,
      query_timeout: TIMEOUT_MS,
      keepAlive: true,
      keepAliveInitialDelayMillis: 10_000,
    });
    c.on('error', (e) => drop(c, e));
    c.on('end', () => drop(c, new Error('the connection to PostgreSQL ended')));
    try {
      await c.connect();
      // Those the server knows (tcp_user_timeout is PostgreSQL 12's); lock_timeout bounds a wait in the queue.
      const settings = { ...KEEPALIVES, lock_timeout: String(QUEUE_WAIT_MS) };
      await c.query(
        'SELECT set_config(s.name, s.value, false) FROM json_each_text($1::json) AS s(name, value) WHERE s.name IN (SELECT name FROM pg_settings)',
        [JSON.stringify(settings)],
      );
    } catch (e) {
      close(c);
      throw e;
    }
    return c;
  }

  const tryLock = async (c: pg.Client) =>
    (await c.query('SELECT pg_try_advisory_lock($1::integer, hashtext($2)) AS got', [opts.key, opts.name])).rows[0]?.got === true;

  /** Waits in the lock's queue (ahead of any session that only tries) for at most QUEUE_WAIT_MS: whether it was granted. */
  async function waitLock(c: pg.Client): Promise<boolean> {
    try {
      await c.query({
        text: 'SELECT pg_advisory_lock($1::integer, hashtext($2))',
        values: [opts.key, opts.name],
        query_timeout: QUEUE_WAIT_MS + TIMEOUT_MS,
      } as pg.QueryConfig);
      return true;
    } catch (e) {
      if ((e as { code?: string }).code === '55P03') return false; // lock_timeout: look again
      throw e;
    }
  }

  /** Who holds the lock, whether another session waits for it, and the server's clock. */
  async function look(c: pg.Client): Promise<{ holder?: LockHolder; queued: boolean; now: Date }> {
    const r = await c.query(
      `SELECT now() AS now, s.* FROM (VALUES (1)) AS one (x) LEFT JOIN (
         SELECT l.granted, l.pid, a.application_name, host(a.client_addr) AS client_addr,
                a.query_start AS last_active
           FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid
          WHERE l.locktype = 'advisory' AND l.objsubid = 2 AND l.pid <> pg_backend_pid()
            AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
            AND l.classid = ($1::integer::bigint & 4294967295)::oid AND l.objid = (hashtext($2)::bigint & 4294967295)::oid
       ) AS s ON true`,
      [opts.key, opts.name],
    );
    const rows = r.rows.filter((row) => row.pid !== null);
    const held = rows.find((row) => row.granted);
    const holder: LockHolder | undefined = held && {
      pid: held.pid,
      applicationName: held.application_name ?? '',
      clientAddr: held.client_addr ?? null,
      lastActive: held.last_active ?? null,
    };
    return { holder, queued: rows.some((row) => !row.granted), now: r.rows[0].now };
  }

  function drop(c: pg.Client, error: Error): void {
    if (c !== client || done) return;
    client = undefined;
    close(c);
    droppedAt = Date.now();
    opts.dropped?.(error);
    void regain();
  }

  /** Take the lock back after a drop: connect again until the server answers, end this lock's own earlier session if it still holds it. */
  async function regain(): Promise<void> {
    let attempts = 0;
    let ending: number | undefined;
    let c: pg.Client | undefined;
    let pause = RETRY_MS[0];
    while (!done) {
      await sleep(pause);
      if (done) break;
      try {
        if (!c) {
          regaining = c = await connect();
          // The process's own work keeps it alive, never this.
          unref(c);
          if (done) break;
        }
        if (await tryLock(c)) return won(c);
        const { holder } = await look(c);
        if (holder && holder.applicationName !== applicationName) {
          done = true;
          clearInterval(probe);
          close(c);
          regaining = undefined;
          return opts.lost(holder);
        }
        if (!holder) {
          // It went between the two looks: tried again at once.
          pause = RETRY_MS[0];
          continue;
        }
        // This lock's own earlier session: its backend has not seen the close yet. Ended (if this
        // role may), and waited for in the queue, so the lock is this session's the moment it goes.
        if (ending !== holder.pid) opts.endingOwn?.(holder);
        ending = holder.pid;
        await c.query('SELECT pg_terminate_backend($1)', [holder.pid]).catch(() => {});
        if (await waitLock(c)) return won(c);
        // Still there (frozen, or a server slow to end it): looked at again at once, back in the queue.
        pause = 0;
      } catch {
        if (c) close(c);
        regaining = c = undefined;
        pause = RETRY_MS[Math.min(++attempts, RETRY_MS.length - 1)];
      }
    }
    if (c) close(c);
    regaining = undefined;
  }

  function won(c: pg.Client): void {
    regaining = undefined;
    if (done) return close(c);
    client = c;
    opts.retaken?.(Date.now() - droppedAt);
  }

  /** The lock at the start, or who holds it (see the file's comment for a holder that does nothing). */
  async function first(): Promise<pg.Client | LockRefused> {
    const c = await connect();
    try {
      let watched: LockHolder | undefined;
      let until = Date.now() + 2 * PROBE_MS;
      for (;;) {
        if (await tryLock(c)) return c;
        const { holder, queued, now } = await look(c);
        if (queued || (holder && !holder.lastActive)) return refused(c, holder, false);
        if (holder && watched && (holder.pid !== watched.pid || holder.lastActive! > watched.lastActive!)) return refused(c, holder, false);
        if (holder && !watched) {
          watched = holder;
          // Long enough to see a live holder's check (every PROBE_MS), and for a vanished one's keepalives.
          const silentFor = now.getTime() - holder.lastActive!.getTime();
          until = Date.now() + Math.max(2 * PROBE_MS, (opts.silentWaitMs ?? SILENT_WAIT_MS) - silentFor);
        }
        if (Date.now() >= until) return refused(c, holder ?? watched, true);
        await sleep(500);
      }
    } catch (e) {
      close(c);
      throw e;
    }
  }

  function refused(c: pg.Client, holder: LockHolder | undefined, silent: boolean): LockRefused {
    close(c);
    return { refused: true, ...(holder ? { holder } : {}), silent };
  }

  const got = await first();
  if (!(got instanceof Pg.Client)) return got;
  client = got;
  unref(got);
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
      clearInterval(probe);
      if (regaining) close(regaining);
      const c = client;
      client = undefined;
      if (!c) return;
      // Unlocked explicitly: a process that takes it next right after (a restart in the same
      // process) must not race the server's cleanup of this session.
      await within(
        c.query('SELECT pg_advisory_unlock($1::integer, hashtext($2))', [opts.key, opts.name]).catch(() => {}),
        TIMEOUT_MS,
      );
      await within(
        c.end().catch(() => {}),
        TIMEOUT_MS,
      );
      close(c);
    },
  };
}

/** End a connection without waiting on it (a half-open one would never answer). */
function close(c: pg.Client): void {
  c.end().catch(() => {});
  (c as unknown as { connection?: { stream?: { destroy?(): void } } }).connection?.stream?.destroy?.();
}

/** Never what keeps a process alive: the process's own work does that. */
function unref(c: pg.Client): void {
  (c as unknown as { connection?: { stream?: { unref?(): void } } }).connection?.stream?.unref?.();
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms).unref());
}

function within(p: Promise<unknown>, ms: number): Promise<unknown> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([p, new Promise((r) => (timer = setTimeout(r, ms)))]).finally(() => clearTimeout(timer));
}
