/**
 * What each script version exports (its fetch handler, components, event handlers), kept across
 * starts in `<data_dir>/cache/exports/`: after a restart, events know which installations handle
 * them without loading every script in an isolate (isolates start on first use). An entry is named
 * by the script version (the hash of its code) and the guest library that read it (whose
 * `describe()` gives the answer), so a changed script or library is a miss.
 *
 * Only successful reads are kept: a script that failed to load may load next time (a limit hit on a
 * busy machine). Failure policy: a miss, never a wrong answer; a miss costs one load in the sandbox.
 */
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { createDiskCache } from '../cache/index.ts';

export interface ScriptExportsFact {
  fetch: boolean;
  components: string[];
  events: string[];
}

/** Entries unused this long are pruned. */
const MAX_AGE_MS = 30 * 24 * 60 * 60_000;
const VERSION = /^[0-9a-f]{16}$/;
const LIBRARY = /^[0-9a-f]{16}$/;

export interface ExportsCache {
  /** What `version` exports, if it was read with the library this process runs. */
  read(version: string): Promise<ScriptExportsFact | undefined>;
  /** Remember what `version` exports, as read by `library`. */
  write(version: string, library: string | undefined, exports: ScriptExportsFact): void;
  prune(): number;
}

const names = (v: unknown): v is string[] => Array.isArray(v) && v.every((x) => typeof x === 'string');

export function createExportsCache(root: string, library: () => Promise<string>, onError?: (e: Error) => void): ExportsCache {
  const cache = createDiskCache(join(root, 'exports'), onError);
  // A fresh data directory has nothing to read: do not even work out the library's id (in a
  // source checkout that builds the guest library).
  let empty: boolean;
  try {
    empty = readdirSync(cache.dir).length === 0;
  } catch {
    empty = true;
  }
  return {
    async read(version) {
      if (empty || !VERSION.test(version)) return undefined;
      const text = cache.read(`${version}-${await library()}`);
      if (!text) return undefined;
      try {
        const e = JSON.parse(text) as Partial<ScriptExportsFact>;
        if (typeof e.fetch !== 'boolean' || !names(e.components) || !names(e.events)) throw new Error('malformed');
        return { fetch: e.fetch, components: e.components, events: e.events };
      } catch {
        return undefined;
      }
    },
    write(version, lib, exports) {
      if (!lib || !LIBRARY.test(lib) || !VERSION.test(version)) return;
      if (cache.write(`${version}-${lib}`, JSON.stringify({ fetch: exports.fetch, components: exports.components, events: exports.events }))) empty = false;
    },
    prune: () => cache.prune(MAX_AGE_MS),
  };
}
