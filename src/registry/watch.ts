/**
 * Watch a folder tree and report which top-level entry changed. One fs.watch per directory, like
 * Node's recursive mode on Linux, but node_modules and dot-directories are not descended into: an
 * `npm install` changes package.json/package-lock.json at the folder's top, which is seen, without
 * tens of thousands of watches on the packages themselves.
 */
import { watch, readdirSync, statSync, type FSWatcher } from 'node:fs';
import { join, relative, sep } from 'node:path';

function isDirectory(p: string): boolean {
  try {
    return statSync(p).isDirectory();
  } catch {
    return false;
  }
}

export interface TreeWatcher {
  close(): void;
}

/** Directories not descended into. */
export function skipDir(name: string): boolean {
  return name === 'node_modules' || name.startsWith('.');
}

/**
 * Call `onChange(entry)` with the name of the top-level entry under `root` that changed (a file
 * or folder directly in root, or anything below it), or `null` when the root itself changed in a
 * way that needs a full rescan.
 */
export function watchTree(root: string, onChange: (entry: string | null) => void, onError?: (e: Error) => void): TreeWatcher {
  const watchers = new Map<string, FSWatcher>();
  let closed = false;

  const topOf = (abs: string): string | null => {
    const rel = relative(root, abs);
    if (!rel || rel.startsWith('..')) return null;
    return rel.split(sep)[0];
  };

  function unwatchBelow(dir: string): void {
    for (const [d, w] of watchers)
      if (d === dir || d.startsWith(dir + sep)) {
        w.close();
        watchers.delete(d);
      }
  }

  function add(dir: string): void {
    if (closed || watchers.has(dir)) return;
    let w: FSWatcher;
    try {
      w = watch(dir, { persistent: false }, (_event, filename) => {
        if (closed) return;
        if (filename === null) {
          onChange(dir === root ? null : topOf(dir));
          return;
        }
        const abs = join(dir, filename.toString());
        // A new directory gets its own watch; a removed one loses its watches.
        let isDir = false;
        try {
          isDir = statSync(abs).isDirectory();
        } catch {
          unwatchBelow(abs);
        }
        if (isDir && !skipDir(filename.toString())) addTree(abs);
        onChange(topOf(abs));
      });
    } catch (e) {
      // The directory vanished between listing and watching: its parent reports the removal.
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT') onError?.(e as Error);
      return;
    }
    w.on('error', () => {
      w.close();
      watchers.delete(dir);
    });
    watchers.set(dir, w);
  }

  function addTree(dir: string): void {
    add(dir);
    let entries;
    try {
      entries = readdirSync(dir, { withFileTypes: true });
    } catch {
      return;
    }
    for (const e of entries) {
      if (skipDir(e.name)) continue;
      // A symlinked integration folder is followed at the top level only (no cycles below).
      const linkedFolder = dir === root && e.isSymbolicLink() && isDirectory(join(dir, e.name));
      if (e.isDirectory() || linkedFolder) addTree(join(dir, e.name));
    }
  }

  addTree(root);
  return {
    close() {
      closed = true;
      for (const w of watchers.values()) w.close();
      watchers.clear();
    },
  };
}
