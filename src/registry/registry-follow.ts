/**
 * Following the integrations directory: which folders there are (scanFolders), and, while the
 * server runs, a file event in a folder reloads it once the folder has been quiet for `debounceMs`.
 */
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { isIntegrationFolderName } from './registry-types.ts';
import { isDirectory, type RegistryState } from './registry-state.ts';
import { watchTree, type TreeWatcher } from './watch.ts';

/** Folder names present now plus those known (so removals are seen). */
export function scanFolders(state: RegistryState): string[] {
  const { root, folders } = state;
  let names: string[] = [];
  try {
    names = readdirSync(root, { withFileTypes: true })
      .filter((e) => isIntegrationFolderName(e.name) && (e.isDirectory() || (e.isSymbolicLink() && isDirectory(join(root, e.name)))))
      .map((e) => e.name);
  } catch (e) {
    state.log.error('cannot read the integrations directory', { dir: root, error: (e as Error).message });
  }
  return [...new Set([...names, ...folders.keys()])].sort();
}

/** Watch the directory (with `opts.watch`) and hand each changed folder to `enqueue` after the quiet time. */
export function followFolders(state: RegistryState, enqueue: (key: string) => void): { close(): void } {
  const debounceMs = state.opts.debounceMs ?? 50;
  const timers = new Map<string, NodeJS.Timeout>();

  function schedule(entry: string | null): void {
    if (state.closed) return;
    if (entry === null) {
      for (const key of scanFolders(state)) schedule(key);
      return;
    }
    if (!isIntegrationFolderName(entry) && !state.folders.has(entry)) return;
    clearTimeout(timers.get(entry));
    timers.set(
      entry,
      setTimeout(() => {
        timers.delete(entry);
        enqueue(entry);
      }, debounceMs),
    );
  }

  let watcher: TreeWatcher | undefined;
  if (state.opts.watch)
    watcher = watchTree(state.root, schedule, (e) => state.log.warn('cannot watch part of the integrations directory', { error: e.message }));
  return {
    close() {
      watcher?.close();
      for (const t of timers.values()) clearTimeout(t);
      timers.clear();
    },
  };
}
