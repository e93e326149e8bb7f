/**
 * Files the server keeps in `<data_dir>/cache/<kind>/` to start faster (bundles of unchanged
 * integrations, what their scripts export). A cache is only ever an optimisation: every entry is
 * named by a hash of everything it depends on, so a changed input looks for another name.
 *
 * - Written atomically (a temp file in the same folder, then rename): several serving processes may
 *   write the same entry at once, and a crash leaves a whole entry or none, never a torn one.
 * - Read defensively: an entry that is missing, unreadable or not what its reader expects is a miss.
 * - Pruned by age: an entry not used for `maxAgeMs` goes (a use refreshes its time at most once
 *   a day, so a hit costs no write); temp files a crash left go after an hour.
 *
 * Failure policy: fail open. A cache that cannot be read or written costs time, never correctness:
 * its errors are reported once through `onError` and the caller does the work itself.
 */
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';

const DAY_MS = 24 * 60 * 60_000;
const TEMP_MAX_AGE_MS = 60 * 60_000;
/** Names the cache writes: hashes and the temp files beside them (nothing a caller passes can escape the folder). */
const ENTRY_NAME = /^[A-Za-z0-9_-]{1,128}$/;

export interface DiskCache {
  readonly dir: string;
  /** The entry's text, or undefined (absent, unreadable). Refreshes the entry's time when it is older than a day. */
  read(name: string): string | undefined;
  /** Store an entry atomically; false when it could not be written. */
  write(name: string, text: string): boolean;
  /** Remove one entry (a reader found it corrupt). */
  remove(name: string): void;
  /** Remove entries unused for `maxAgeMs` (except `keep`) and stale temp files; returns how many went. */
  prune(maxAgeMs: number, keep?: ReadonlySet<string>): number;
}

export function createDiskCache(dir: string, onError: (e: Error) => void = () => {}): DiskCache {
  let ready = false;
  let reported = false;
  const report = (e: unknown) => {
    if (reported) return;
    reported = true;
    onError(e as Error);
  };
  const check = (name: string) => {
    if (!ENTRY_NAME.test(name)) throw new Error(`not a cache entry name: ${name}`);
    return join(dir, name);
  };
  const ensure = () => {
    if (ready) return;
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    ready = true;
  };

  return {
    dir,
    read(name) {
      const file = check(name);
      let text: string;
      try {
        text = readFileSync(file, 'utf8');
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== 'ENOENT') report(e);
        return undefined;
      }
      try {
        const now = Date.now();
        if (now - statSync(file).mtimeMs > DAY_MS) utimesSync(file, new Date(now), new Date(now));
      } catch {
        // pruned meanwhile: the text read is still whole
      }
      return text;
    },
    write(name, text) {
      const file = check(name);
      const temp = `${file}.${process.pid}-${randomBytes(4).toString('hex')}.tmp`;
      try {
        ensure();
        writeFileSync(temp, text, { mode: 0o600 });
        renameSync(temp, file);
        return true;
      } catch (e) {
        rmSync(temp, { force: true });
        report(e);
        return false;
      }
    },
    remove(name) {
      rmSync(check(name), { force: true });
    },
    prune(maxAgeMs, keep = new Set()) {
      let names: string[];
      try {
        names = readdirSync(dir);
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== 'ENOENT') report(e);
        return 0;
      }
      const now = Date.now();
      let removed = 0;
      for (const name of names) {
        const temp = name.endsWith('.tmp');
        if (!temp && keep.has(name)) continue;
        try {
          const age = now - statSync(join(dir, name)).mtimeMs;
          if (age > (temp ? TEMP_MAX_AGE_MS : maxAgeMs)) {
            rmSync(join(dir, name), { force: true });
            removed++;
          }
        } catch {
          // gone already (another process pruned it)
        }
      }
      return removed;
    },
  };
}
