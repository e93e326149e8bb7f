/**
 * One server per data directory, held by a lock the kernel releases when its holder dies.
 *
 * The lock file is a tiny SQLite database on which the holder keeps a write transaction open
 * (`BEGIN IMMEDIATE`): SQLite takes it with an fcntl lock, which the kernel drops when the process
 * exits in any way (kill -9, OOM, a container restart). Nothing guesses from a pid, so a lock left
 * by a dead process never blocks (a pid check would: in a container the new server is often PID 1,
 * the very pid the old lock named). `switchyard.pid` beside it only names the holder in messages.
 * The lock file is never deleted: unlinking a file another starter has just opened would let two
 * servers lock two different files.
 */
import Database from 'better-sqlite3';
import { randomBytes } from 'node:crypto';
import { closeSync, openSync, readFileSync, renameSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { SwitchyardError } from '../errors.ts';
import { storageStartError } from './health.ts';
import { statement, type Queries } from './contract.ts';

export interface Lock {
  file: string;
  release(): void;
}

export const LOCK_FILE = 'switchyard.lock';
export const PID_FILE = 'switchyard.pid';

function busy(e: unknown): boolean {
  const code = (e as { code?: string }).code ?? '';
  return code.startsWith('SQLITE_BUSY') || code.startsWith('SQLITE_LOCKED');
}

/** Before the kernel lock, the lock file held a pid as text: such a file is replaced. */
function legacy(e: unknown): boolean {
  return (e as { code?: string }).code === 'SQLITE_NOTADB';
}

function holderPid(dataDir: string): number | undefined {
  try {
    const pid = Number.parseInt(readFileSync(join(dataDir, PID_FILE), 'utf8'), 10);
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

export function acquireLock(dataDir: string): Lock {
  const file = join(dataDir, LOCK_FILE);
  for (let tries = 0; ; tries++) {
    let db: Database.Database | undefined;
    try {
      closeSync(openSync(file, 'a', 0o600));
      db = new Database(file, { timeout: 0 });
      db.pragma('journal_mode = DELETE');
      db.exec('BEGIN IMMEDIATE');
    } catch (e) {
      db?.close();
      if (legacy(e) && tries === 0) {
        unlinkSync(file);
        continue;
      }
      if (busy(e)) {
        const pid = holderPid(dataDir);
        throw new SwitchyardError('data_dir_locked', `another switchyard server${pid ? ` (pid ${pid})` : ''} is using data directory ${dataDir}`, {
          hint: 'stop that server first, or give this one its own data_dir; two servers must not share one delivery queue',
        });
      }
      // A full disk is no file-lock problem: SQLite could not write the lock file's header.
      const full = storageStartError(e, dataDir);
      if (full?.code === 'storage_full') throw full;
      throw new SwitchyardError('data_dir_locked', `could not take the lock ${file}: ${(e as Error).message}`, {
        hint: 'check that the data directory is on a local file system that supports file locks',
        cause: e,
      });
    }
    const pidFile = join(dataDir, PID_FILE);
    const temp = `${pidFile}.${process.pid}`;
    try {
      writeFileSync(temp, `${process.pid}\n`, { mode: 0o600 });
      renameSync(temp, pidFile);
    } catch (e) {
      db.close();
      rmSync(temp, { force: true });
      throw storageStartError(e, dataDir) ?? e;
    }
    const held = db;
    let released = false;
    return {
      file,
      release() {
        if (released) return;
        released = true;
        try {
          if (holderPid(dataDir) === process.pid) unlinkSync(pidFile);
        } catch {
          /* already gone */
        }
        held.close(); // ends the open transaction and its lock
      },
    };
  }
}

/**
 * A job that must run once per store, not once per node (retention): a lease row in `store_locks`,
 * taken without waiting, through the store's contract. Undefined when another node holds it. The
 * lease lasts STORE_WIDE_LEASE_MS and is renewed while held, so a node that dies holding it holds
 * it no longer than that. Node clocks decide its expiry: a skew of seconds is harmless next to it,
 * and two runs that overlap anyway (a renewal that failed while the store was away) do the same
 * idempotent work twice, nothing worse. On SQLite one node owns the file, so the lease is always
 * this one's: the statement takes it whatever the row says.
 */
export interface StoreWideLock {
  release(): Promise<void>;
}

export const STORE_WIDE_LEASE_MS = 60_000;

const lease = {
  take: statement({
    sqlite: `INSERT INTO store_locks (name, owner, expires_at) VALUES (@name, @owner, @until)
      ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at`,
    postgres: `INSERT INTO store_locks (name, owner, expires_at) VALUES (@name, @owner, @until)
      ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at WHERE store_locks.expires_at < @now`,
  }),
  renew: statement('UPDATE store_locks SET expires_at = @until WHERE name = @name AND owner = @owner'),
  release: statement('DELETE FROM store_locks WHERE name = @name AND owner = @owner'),
};

export const storeLocksMigration = 'CREATE TABLE IF NOT EXISTS store_locks (name TEXT PRIMARY KEY, owner TEXT NOT NULL, expires_at INTEGER NOT NULL)';
export const storeLocksMigrationPostgres = 'CREATE TABLE IF NOT EXISTS store_locks (name TEXT PRIMARY KEY, owner TEXT NOT NULL, expires_at BIGINT NOT NULL)';

export async function tryStoreWideLock(database: Queries, name: string, now: () => number = Date.now): Promise<StoreWideLock | undefined> {
  const owner = `${process.pid}.${randomBytes(6).toString('hex')}`;
  const at = now();
  if ((await database.run(lease.take, { name, owner, until: at + STORE_WIDE_LEASE_MS, now: at })).changes !== 1) return undefined;
  const renewal = setInterval(() => {
    database.run(lease.renew, { name, owner, until: now() + STORE_WIDE_LEASE_MS }).catch(() => undefined); // the store away: it runs out, harmlessly
  }, STORE_WIDE_LEASE_MS / 3);
  renewal.unref();
  let released = false;
  return {
    async release() {
      if (released) return;
      released = true;
      clearInterval(renewal);
      try {
        await database.run(lease.release, { name, owner });
      } catch {
        /* the store away: the lease runs out */
      }
    },
  };
}
