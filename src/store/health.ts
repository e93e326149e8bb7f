/**
 * Whether the store can take writes, as the server last saw it. Writers report their failures
 * (a full disk, a read-only file, a lock held too long, PostgreSQL out of reach); /healthz says
 * "failing" from the first failure until a write succeeds again (for a full disk, a write and a MB
 * free on the data directory's disk), and "unavailable" while the store
 * does not answer a read within READ_WAIT_MS (readable). While failing, a probe writes a second after the latest failure, and each second after, so recovery is
 * seen even when no request comes to try. A SELECT is no test: reads keep working on a full disk.
 *
 * storageError() turns SQLite's, PostgreSQL's and the file system's codes into an answer a client
 * can act on: 507 for a full disk, 503 for a store that is read-only, locked, failing or (PostgreSQL)
 * cannot be reached, each naming
 * the store that failed (the data directory, or the PostgreSQL database) and saying what to do.
 */
import { existsSync, statfsSync } from 'node:fs';
import { dirname, isAbsolute, relative, resolve, sep } from 'node:path';
import { SwitchyardError, type ErrorCode } from '../errors.ts';
import { LOCK_BUSY, statement, type Database } from './contract.ts';

/**
 * The store a message names: SQLite's data directory, or the PostgreSQL database as
 * `postgres://host:port/db` (store/postgres/store.ts displayUrl: never its credentials).
 */
export type StoreName = { engine: 'sqlite'; dataDir: string } | { engine: 'postgres'; database: string };

export interface StoreHealth {
  /** A write failed: the store is failing until a write succeeds. */
  failed(error: unknown): void;
  /** The API's answer to a failed write (see storageError), naming this store. */
  storageError(error: unknown): SwitchyardError;
  /** A write committed (cheap: callers may report every commit). */
  ok(): void;
  status(): { ok: true } | { ok: false; code: string; message: string; since: string; hint: string };
  /**
   * Whether the store answers a read: false when it fails or has not answered within READ_WAIT_MS
   * (a PostgreSQL server that is frozen or away), so /healthz answers at once whatever the store
   * does. One read at a time: callers while it is out share it.
   */
  readable(): Promise<boolean>;
  close(): void;
}

/** How long /healthz waits for the store to answer a read before it says the store is away. */
const READ_WAIT_MS = 500;

const q = {
  probe: statement('INSERT INTO store_probe (id, at) VALUES (1, ?) ON CONFLICT(id) DO UPDATE SET at = excluded.at'),
  read: statement('SELECT 1 AS ok'),
};

export function createStoreHealth(database: Database, store: StoreName, opts: { probeEveryMs?: number; now?: () => number } = {}): StoreHealth {
  const now = opts.now ?? Date.now;
  let failure: { code: string; message: string; since: number } | undefined;
  let probe: NodeJS.Timeout | undefined;
  let closed = false;

  /**
   * One write, in a transaction of its own. On SQLite it does not wait for a write lock another
   * process holds (the probe tries again a second later); on PostgreSQL the store bounds it.
   */
  async function tryWrite(): Promise<void> {
    try {
      const done = await database.transactionUnlessBusy(async (tx) => void (await tx.run(q.probe, [now()])));
      if (done !== LOCK_BUSY) health.ok();
    } catch {
      /* still failing */
    }
  }

  let reading: Promise<boolean> | undefined;
  function readable(): Promise<boolean> {
    reading ??= database.value(q.read).then(
      (v) => v !== undefined,
      (e) => {
        // The store out of reach is a failure as a write's would be: said with its reason, and probed.
        if (storageCode(e)) health.failed(e);
        return false;
      },
    );
    const read = reading;
    void read.finally(() => {
      if (reading === read) reading = undefined;
    });
    return new Promise((answer) => {
      const late = setTimeout(() => answer(false), READ_WAIT_MS);
      late.unref();
      void read.then((ok) => {
        clearTimeout(late);
        answer(ok);
      });
    });
  }

  const health: StoreHealth = {
    failed(error) {
      const e = storageError(error, store);
      if (!failure) failure = { code: e.code, message: e.message, since: now() };
      // The probe runs a while after the latest failure, not on a fixed beat: a small write may
      // fit where the one that failed did not, and must not hide a failure reported just now.
      if (probe) clearTimeout(probe);
      if (!closed) {
        probe = setTimeout(async function tick() {
          await tryWrite();
          if (failure && !closed) {
            probe = setTimeout(tick, opts.probeEveryMs ?? 1000);
            probe.unref();
          }
        }, opts.probeEveryMs ?? 1000);
        probe.unref();
      }
    },
    storageError: (error) => storageError(error, store),
    ok() {
      if (!failure) return;
      // A full disk is not over because a small write fit (a record into WAL pages already there,
      // the probe's one row) while an event is refused: it stays failing until the disk has room.
      if (failure.code === 'storage_full' && store.engine === 'sqlite' && (freeBytes(store.dataDir) ?? Infinity) < NEARLY_FULL_BYTES) return;
      failure = undefined;
      if (probe) clearTimeout(probe);
      probe = undefined;
    },
    status() {
      if (!failure) return { ok: true };
      return { ok: false, code: failure.code, message: failure.message, since: new Date(failure.since).toISOString(), hint: hintFor(failure.code, store) };
    },
    readable,
    close() {
      closed = true;
      if (probe) clearTimeout(probe);
      probe = undefined;
    },
  };
  return health;
}

export const storeHealthMigration = 'CREATE TABLE IF NOT EXISTS store_probe (id INTEGER PRIMARY KEY, at INTEGER NOT NULL)';
export const storeHealthMigrationPostgres = 'CREATE TABLE IF NOT EXISTS store_probe (id INTEGER PRIMARY KEY, at BIGINT NOT NULL)';

/** The storage codes of the error table (src/errors.ts). */
type StorageCode = Extract<ErrorCode, `storage_${string}`>;
const STORAGE_CODES = new Set<string>(['storage_full', 'storage_read_only', 'storage_busy', 'storage_failed', 'storage_unavailable'] satisfies StorageCode[]);

function hintFor(code: string, store: StoreName): string {
  if (store.engine === 'postgres') {
    switch (code) {
      case 'storage_full':
        return `free space on the disk of the PostgreSQL server that holds ${store.database}; the server resumes by itself`;
      case 'storage_read_only':
        return `point \`store:\` at a PostgreSQL server that takes writes (the primary, not a standby), or turn off default_transaction_read_only for ${store.database}; the server resumes by itself`;
      case 'storage_busy':
        return `if it lasts, another session holds locks on ${store.database} (a long transaction, a migration by hand): end it; the server resumes by itself`;
      case 'storage_unavailable':
        return `check that the PostgreSQL server of ${store.database} is up, reachable from this node and has connections to spare (max_connections); the server resumes by itself once it answers`;
      default:
        return `check that the PostgreSQL server of ${store.database} is up and reachable from this node; the server resumes by itself once writes succeed`;
    }
  }
  const dataDir = store.dataDir;
  switch (code) {
    case 'storage_full':
      return `free space on the disk that holds ${dataDir}; the server resumes by itself`;
    case 'storage_read_only':
      return `make ${dataDir} and its switchyard.db* files writable by this user again; the server resumes by itself`;
    case 'storage_busy':
      return 'another process holds the database locked (a backup tool, an sqlite3 shell): end it; the server resumes by itself';
    default:
      return `check the disk and file system of ${dataDir}; the server resumes by itself once writes succeed`;
  }
}

/** The storage failure behind an error, if it is one. */
export function storageCode(error: unknown): StorageCode | undefined {
  const code = String((error as { code?: unknown })?.code ?? '');
  if (code === 'SQLITE_FULL' || code === 'ENOSPC' || code === 'EDQUOT') return 'storage_full';
  if (code.startsWith('SQLITE_READONLY') || code === 'EROFS' || code === 'EACCES' || code === 'EPERM') return 'storage_read_only';
  if (code.startsWith('SQLITE_BUSY') || code.startsWith('SQLITE_LOCKED')) return 'storage_busy';
  if (code.startsWith('SQLITE_IOERR') || code === 'SQLITE_CANTOPEN' || code === 'SQLITE_CORRUPT' || code === 'EIO') return 'storage_failed';
  // PostgreSQL's SQLSTATEs: disk full; read-only (a standby, or default_transaction_read_only);
  // a lock not granted, a serialization failure or a deadlock.
  if (code === '53100') return 'storage_full';
  if (code === '25006') return 'storage_read_only';
  if (code === '55P03' || code === '40001' || code === '40P01') return 'storage_busy';
  // The database out of reach, not a write that failed: a lost, refused or timed-out connection
  // (class 08, or the socket's own error when there is no SQLSTATE to give), a server
  // shutting down or starting (57P), no connection slot left (53300). Reads fail alike.
  // The store's own errors, already worded (the pool's, the lock wait's, a module's that passed one on).
  if (STORAGE_CODES.has(code)) return code as StorageCode;
  if (code.startsWith('08') || code.startsWith('57P') || code === 'ECONNREFUSED' || code === 'ECONNRESET' || code === '53300') return 'storage_unavailable';
  return undefined;
}

/** Codes the operating system gives any file or socket: a route meets them without the store being at fault. */
const SYSTEM_CODES = new Set(['ENOSPC', 'EDQUOT', 'EROFS', 'EACCES', 'EPERM', 'EIO', 'ECONNREFUSED', 'ECONNRESET']);

/**
 * storageCode for an error a route threw, where the store is not the only thing that fails: an
 * operating system's code (a full disk, a permission refused, a connection reset) is the store's
 * only when it names a file in the store's own directory (`localDir`). A route that reads another
 * file, or calls another server, meets the same codes with the store well. The store's own errors
 * count as they are: SQLite's codes, PostgreSQL's SQLSTATEs, and what it worded itself (its
 * PostgreSQL connection's socket errors are worded before they leave it, postgres/pool.ts).
 */
export function storeFailureCode(error: unknown, localDir: string | undefined): StorageCode | undefined {
  const code = storageCode(error);
  if (!code || !SYSTEM_CODES.has(String((error as { code?: unknown }).code))) return code;
  const path = (error as { path?: unknown }).path;
  if (typeof path !== 'string' || !localDir) return undefined;
  const rel = relative(resolve(localDir), resolve(path));
  return rel !== '..' && !rel.startsWith(`..${sep}`) && !isAbsolute(rel) ? code : undefined;
}

/**
 * A storage failure as the API answers it: 507 when the disk is full, 503 (with Retry-After) when the
 * store is read-only, locked or failing. Nothing was stored; the client should send again later.
 */
export function storageError(error: unknown, store: StoreName): SwitchyardError {
  const code = storageCode(error) ?? 'storage_failed';
  const what: Record<StorageCode, string> =
    store.engine === 'postgres'
      ? {
          storage_full: `the PostgreSQL database ${store.database} is out of disk space: nothing was stored`,
          storage_read_only: `the PostgreSQL database ${store.database} cannot be written (read-only): nothing was stored`,
          storage_busy: `the PostgreSQL database ${store.database} is busy (a lock not granted, a deadlock or a serialization failure): nothing was stored`,
          storage_failed: `the PostgreSQL database ${store.database} failed to write: nothing was stored`,
          storage_unavailable: `the PostgreSQL database ${store.database} cannot be reached or did not answer in time: nothing was stored`,
        }
      : {
          storage_full: `the data directory's disk is full (${store.dataDir}): nothing was stored`,
          storage_read_only: `the database in ${store.dataDir} cannot be written (read-only): nothing was stored`,
          storage_busy: `the database in ${store.dataDir} is locked by another process: nothing was stored`,
          storage_failed: `the database in ${store.dataDir} failed to write: nothing was stored`,
          storage_unavailable: `the database in ${store.dataDir} cannot be reached: nothing was stored`,
        };
  const cause = String((error as { code?: unknown })?.code ?? (error as Error)?.message);
  return new SwitchyardError(code, `${what[code]} (${cause})`, {
    hint: `${hintFor(code, store)}; send the request again`,
    headers: { 'retry-after': '5' },
    cause: error,
  });
}

/**
 * Below this much room an I/O error is taken for a full disk: SQLite reports a -shm file it cannot
 * grow as SQLITE_IOERR, not SQLITE_FULL (measured on a tmpfs with 8 to 32 kB free).
 */
const NEARLY_FULL_BYTES = 1024 * 1024;

/** Bytes free on the disk that holds `path` (its nearest existing folder), or undefined if it cannot be read. */
function freeBytes(path: string): number | undefined {
  let at = resolve(path);
  while (!existsSync(at) && dirname(at) !== at) at = dirname(at);
  try {
    const s = statfsSync(at);
    return s.bavail * s.bsize;
  } catch {
    return undefined;
  }
}

/**
 * A storage failure while the server starts (or a command opens the store), as one message with
 * what to do before trying again: no stack, and the command line's exit code 2. `dataDir` is
 * named unless the error names a file of its own (a file system error's path). Undefined when the
 * error is no storage failure.
 */
export function storageStartError(error: unknown, dataDir: string): SwitchyardError | undefined {
  let code = storageCode(error);
  if (!code) return undefined;
  const path = (error as { path?: unknown })?.path;
  const where = typeof path === 'string' ? dirname(path) : dataDir;
  const free = freeBytes(where);
  if (code === 'storage_failed' && free !== undefined && free < NEARLY_FULL_BYTES) code = 'storage_full';
  const cause = String((error as { code?: unknown })?.code ?? (error as Error)?.message);
  const room = free === undefined ? '' : `${Math.floor(free / 1024)} kB free; `;
  const what: Record<StorageCode, [string, string]> = {
    storage_full: [
      `the disk that holds ${where} is full (${room}${cause})`,
      `free space on that disk (the database needs room to grow, and a few MB for its WAL), then try again`,
    ],
    storage_read_only: [
      `the database in ${where} cannot be written (read-only; ${cause})`,
      `make ${where} and its switchyard.db* files writable by this user, then try again`,
    ],
    storage_busy: [
      `the database in ${where} is locked by another process (${cause})`,
      'end the process that holds it (a backup tool, an sqlite3 shell), then try again',
    ],
    storage_failed: [`the database in ${where} failed to write (${cause})`, `check the disk and file system of ${where}, then try again`],
    storage_unavailable: [`the database in ${where} cannot be reached (${cause})`, 'check that the store is up and reachable, then try again'],
  };
  return new SwitchyardError(code, what[code][0], { hint: what[code][1], cause: error, usage: true });
}
