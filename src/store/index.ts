/**
 * The store: by default one SQLite file under the data directory (WAL mode, foreign keys on, a busy
 * timeout), or a PostgreSQL database (`store:`; postgres/store.ts); versioned migrations owned by
 * modules, and the data directory's lock so one server owns it. Modules reach it through its
 * asynchronous contract (contract.ts, `Store.database`) alone; what only one engine has (SQLite's
 * backup and checkpoints, PostgreSQL's sessions) stays inside src/store/.
 */
import BetterSqlite from 'better-sqlite3';
import { accessSync, chmodSync, closeSync, constants, existsSync, mkdirSync, openSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { SwitchyardError } from '../errors.ts';
import { BACKSTOP_PAGES, WAL_BOUND_PAGES, checkpointsOnThread, startCheckpointer, type Checkpointer } from './checkpointer.ts';
import { acquireLock, storeLocksMigration, type Lock } from './lock.ts';
import { createStoreHealth, storageStartError, storeHealthMigration, type StoreHealth } from './health.ts';
import { installTransactionHooks } from './transactions.ts';
import { applySteps } from './migrate.ts';
import { connectPostgresStore } from './postgres/store.ts';
import type { PostgresDatabase } from './postgres/pool.ts';
import { generationsMigration } from './generations.ts';
import { createDatabase } from './database.ts';
import type { Database, Engine } from './contract.ts';
import type { Logger } from '../log/index.ts';

export { afterCommit, onRollback } from './transactions.ts';

export type Db = BetterSqlite.Database;

/** A module's schema: its name and its migration steps in order (never edit a landed step). */
export interface ModuleMigrations {
  module: string;
  steps: string[];
  /** The same module's steps for PostgreSQL (its own numbering: a database is one engine's). */
  postgres?: string[];
}

export interface Store {
  /** The database through the store's asynchronous contract (contract.ts): how modules reach it. */
  database: Database;
  /** The SQLite file, or the PostgreSQL database as `postgres://host:port/db` (no credentials). */
  file: string;
  engine: Engine;
  /** Other nodes (machines) may use this store at the same time: PostgreSQL (a SQLite file is one machine's). */
  shared: boolean;
  /** The directory whose disk holds the data (SQLite's data directory); absent for a server's store (PostgreSQL's disk is its own). */
  localDir?: string;
  /** Whether writes succeed (health.ts); the server's /healthz reports it. */
  health: StoreHealth;
  /** The thread that checkpoints the WAL, when the store has one (the server's). */
  checkpointer?: Checkpointer;
  /**
   * After a batch of deletes (retention): SQLite writes the pages it freed back a little at a time
   * (a passive WAL checkpoint), rather than one batch paying for a whole automatic checkpoint;
   * nothing on PostgreSQL, whose own checkpointer and autovacuum do this.
   */
  checkpointPassive(): Promise<void>;
  /** Opened read-only (the CLI's --offline): nothing is written, nothing migrated. */
  readonly: boolean;
  /** SQLite's own connection, for what only SQLite has (backup's VACUUM INTO, a copy's source): the store's business, absent on PostgreSQL. */
  sqlite?: Db;
  /** PostgreSQL's pool, for what needs a session of its own (a copy's target): the store's business, absent on SQLite. */
  postgres?: PostgresDatabase;
  close(): Promise<void>;
}

export const DB_FILE = 'switchyard.db';

export interface OpenOptions {
  /** `store:` of the configuration: a postgres:// URL puts the store in PostgreSQL; absent, the SQLite file. */
  url?: string;
  /** Read-only access that never takes the lock and never migrates (the CLI's --offline). */
  readonly?: boolean;
  /** Take the data directory's lock (the server does; tests of single modules need not). Also checkpoints the WAL on a thread of its own (checkpointer.ts). */
  lock?: boolean;
  /** The modules' schemas to bring up to date (src/server/migrations.ts has them all); none by default. */
  migrations?: ModuleMigrations[];
  /**
   * A serving process beside others (src/process/): the supervisor holds the lock and checkpoints
   * the WAL on its thread, so this connection keeps only the backstop threshold.
   */
  shared?: boolean;
  /** Path of a native addon already loaded (the single executable). */
  nativeBinding?: unknown;
  /** Where a transaction hook that throws is reported (stderr otherwise). */
  log?: Logger;
}

let nativeBinding: unknown;
/** The single executable hands in the better-sqlite3 addon it extracted. */
export function setNativeBinding(addon: unknown): void {
  nativeBinding = addon;
}

/**
 * The store of the configuration: the SQLite file under `dataDir`, or PostgreSQL when `opts.url`
 * is set (migrated, then served by a pool on this process's event loop).
 */
export async function connectStore(dataDir: string, opts: OpenOptions = {}): Promise<Store> {
  if (!opts.url) return openStore(dataDir, opts);
  const lock = prepareDataDir(dataDir, opts);
  const pg = await connectPostgresStore(opts.url, { readonly: opts.readonly, migrations: opts.migrations, log: opts.log }, lock);
  return { ...pg, readonly: opts.readonly ?? false };
}

/** The data directory made (owner-only) and writable, and its lock taken when asked. */
function prepareDataDir(dataDir: string, opts: OpenOptions): Lock | undefined {
  if (opts.readonly) return undefined;
  try {
    // The folder holds webhook secrets, the invocation-token key and OAuth tokens: only its owner
    // may enter it. An existing folder is narrowed too; its files are created 0600 (below).
    makeDirectory(dataDir);
    if ((statSync(dataDir).mode & 0o077) !== 0 && statSync(dataDir).uid === process.getuid?.()) chmodSync(dataDir, 0o700);
    accessSync(dataDir, constants.W_OK);
  } catch (e) {
    throw new SwitchyardError('data_dir_unwritable', `data directory ${dataDir} cannot be written (${(e as NodeJS.ErrnoException).code})`, {
      hint: 'set data_dir in config.yaml to a folder this user can write, or fix its permissions',
      cause: e,
    });
  }
  return opts.lock ? acquireLock(dataDir) : undefined;
}

/** The SQLite store, synchronously (tests and tools that know they have one; connectStore for the configuration's). */
export function openStore(dataDir: string, opts: OpenOptions = {}): Store {
  if (opts.url) throw new Error('a PostgreSQL store is opened with connectStore');
  const file = join(dataDir, DB_FILE);
  const lock = prepareDataDir(dataDir, opts);
  let db: Db;
  try {
    if (!opts.readonly) ownerOnly(file);
    db = new BetterSqlite(file, {
      readonly: opts.readonly ?? false,
      fileMustExist: opts.readonly ?? false,
      ...(nativeBinding ? { nativeBinding: nativeBinding as string } : {}),
    });
  } catch (e) {
    lock?.release();
    if (opts.readonly) throw new SwitchyardError('not_found', `no database at ${file}`, { hint: 'start the server once with `switchyard serve`', cause: e });
    const full = storageStartError(e, dataDir);
    if (full?.code === 'storage_full') throw full;
    throw new SwitchyardError('data_dir_unwritable', `cannot open ${file}: ${(e as Error).message}`, { cause: e });
  }
  try {
    db.pragma('busy_timeout = 5000');
    if (!opts.readonly) writeTransactionsImmediate(db, opts.log);
    if (!opts.readonly) {
      db.pragma('journal_mode = WAL');
      db.pragma('synchronous = NORMAL');
      db.pragma('foreign_keys = ON');
      // Statement and savepoint journals in memory rather than temp files (measured: a savepoint per
      // stored event cost 40 us with file journals, 9 us in memory).
      db.pragma('temp_store = MEMORY');
      // The WAL is cut back to this size whenever it starts over, so a burst's WAL does not keep its
      // disk space (see checkpointer.ts: the space a full disk needs to recover).
      db.pragma(`journal_size_limit = ${WAL_BOUND_PAGES * Number(db.pragma('page_size', { simple: true }))}`);
      migrate(db, opts.migrations ?? []);
      db.exec(storeHealthMigration);
      db.exec(storeLocksMigration);
      db.exec(generationsMigration);
    } else db.pragma('query_only = ON');
  } catch (e) {
    // The first writes (the WAL's -shm, the migrations) meet a full or read-only disk here: one
    // message saying so, not SQLite's error with a stack.
    db.close();
    lock?.release();
    throw (!(e instanceof SwitchyardError) && storageStartError(e, dataDir)) || e;
  }
  const database = createDatabase(db);
  const health = createStoreHealth(database, { engine: 'sqlite', dataDir });
  const checkpointer = opts.lock && !opts.readonly ? startCheckpointer(db, file, { log: opts.log }) : undefined;
  // The supervisor's thread checkpoints for its serving processes, where there is a thread.
  if (opts.shared && !opts.readonly && checkpointsOnThread()) db.pragma(`wal_autocheckpoint = ${BACKSTOP_PAGES}`);
  return {
    database,
    get sqlite() {
      return database.connection();
    },
    file,
    engine: 'sqlite',
    shared: false,
    localDir: dataDir,
    readonly: opts.readonly ?? false,
    health,
    checkpointer,
    async checkpointPassive() {
      if (!opts.readonly) db.pragma('wal_checkpoint(PASSIVE)');
    },
    async close() {
      health.close();
      checkpointer?.stop();
      if (db.open) {
        if (!opts.readonly && !opts.shared) {
          try {
            database.connection().pragma('wal_checkpoint(TRUNCATE)');
          } catch {
            /* another reader may hold the WAL; a checkpoint is an optimisation only */
          }
        }
        db.close();
      }
      lock?.release();
    },
  };
}

/**
 * Every `db.transaction(fn)` begins with BEGIN IMMEDIATE: it takes the write lock first, waiting
 * up to busy_timeout for it. A deferred one that reads and then writes fails at once with
 * SQLITE_BUSY when another process committed in between (its snapshot is stale, and SQLite does not
 * wait in that case): with several serving processes writing the same file that is every ingest
 * under load (measured: batch ingest with 2 processes failed within a second). Nested calls are
 * savepoints as before. Each call also keeps its after-commit and on-rollback hooks
 * (transactions.ts).
 */
function writeTransactionsImmediate(db: Db, log?: Logger): void {
  installTransactionHooks(db, {
    begin: 'immediate',
    failed: log && ((which, error) => log.error(`a transaction's ${which} hook failed`, { error: error as Error })),
  });
}

/**
 * mkdir -p, one level at a time from the nearest folder that exists. Node's recursive mkdirSync
 * spins forever on paths it cannot create under /proc (measured: `/proc/1/nope` at 100 % CPU).
 */
function makeDirectory(dir: string): void {
  const missing: string[] = [];
  let at = resolve(dir);
  while (!existsSync(at)) {
    missing.unshift(at);
    const parent = dirname(at);
    if (parent === at) break;
    at = parent;
  }
  for (const d of missing) mkdirSync(d, { mode: 0o700 });
}

/**
 * The database file is created 0600 before SQLite opens it, and SQLite gives its -wal and -shm files
 * the database file's mode. Files made by an older version (0644) are narrowed.
 */
function ownerOnly(file: string): void {
  closeSync(openSync(file, 'a', 0o600));
  for (const f of [file, `${file}-wal`, `${file}-shm`]) if (existsSync(f)) chmodSync(f, 0o600);
}

/** Apply each module's SQLite steps past its recorded version, one transaction per module. */
export function migrate(db: Db, modules: ModuleMigrations[]): void {
  applySteps(db, modules, (m) => m.steps, 'run the newer switchyard version, or use another data_dir');
}
