/**
 * One server per data directory: a lock file holding the owner's pid. A lock whose process is gone
 * (a crash, kill -9) is stale and taken over; a live one refuses the second server.
 */
import { closeSync, openSync, readFileSync, unlinkSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { SwitchyardError } from '../errors.ts';

export interface Lock {
  file: string;
  release(): void;
}

export const LOCK_FILE = 'switchyard.lock';

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

export function acquireLock(dataDir: string): Lock {
  const file = join(dataDir, LOCK_FILE);
  for (let tries = 0; tries < 3; tries++) {
    try {
      const fd = openSync(file, 'wx', 0o600);
      writeSync(fd, `${process.pid}\n`);
      closeSync(fd);
      let released = false;
      return {
        file,
        release() {
          if (released) return;
          released = true;
          try {
            if (readFileSync(file, 'utf8').trim() === String(process.pid)) unlinkSync(file);
          } catch {
            /* already gone */
          }
        },
      };
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
      const pid = Number.parseInt(readFileSync(file, 'utf8'), 10);
      if (Number.isInteger(pid) && pid > 0 && alive(pid)) {
        throw new SwitchyardError('data_dir_locked', `another switchyard server (pid ${pid}) is using data directory ${dataDir}`, {
          hint: 'stop that server first, or give this one its own data_dir; two servers must not share one delivery queue',
        });
      }
      try {
        unlinkSync(file); // stale: its process is gone
      } catch {
        /* raced with another starter; try again */
      }
    }
  }
  throw new SwitchyardError('data_dir_locked', `could not take the lock ${file}`, { hint: 'remove the file if no server is running' });
}
