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
import { closeSync, openSync, readFileSync, renameSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { SwitchyardError } from '../errors.ts';
import { storageStartError } from './health.ts';

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
        throw new SwitchyardError(
          'data_dir_locked',
          `another switchyard server${pid ? ` (pid ${pid})` : ''} is using data directory ${dataDir}`,
          { hint: 'stop that server first, or give this one its own data_dir; two servers must not share one delivery queue' },
        );
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
