/**
 * The work list: folders waiting to be (re)loaded, worked off one at a time, a turn of the event
 * loop apart. A folder a request waits for goes first (prioritise), else the first in name order,
 * so which of two folders claiming the same name wins at start is deterministic.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { manifestFileOf } from '../manifest/index.ts';
import { parseYaml } from '../schema/yaml.ts';
import type { RegistryState } from './registry-state.ts';

export type WorkList = ReturnType<typeof createWorkList>;

/**
 * `load` loads one folder; `worked` hears of each folder done. With `held`, nothing is loaded until
 * release() (the server's start line first).
 */
export function createWorkList(state: RegistryState, deps: { load: (key: string) => Promise<void>; worked: (key: string) => void; held: boolean }) {
  const { log, root } = state;
  const pending = new Set<string>();
  let draining: Promise<void> | undefined;
  let held = deps.held;
  /** Folders to load before the others: a request waits for them. */
  const wanted: string[] = [];
  /** The names pending folders claim, read only when a request looks for one. */
  const claims = new Map<string, string | undefined>();

  function kick(): void {
    if (draining || state.closed || held) return;
    draining = (async () => {
      while (pending.size && !state.closed) {
        // A turn of the event loop between folders: a folder whose bundle is cached loads without
        // waiting on anything, and the server must listen and answer while the others load.
        await new Promise((resolve) => setImmediate(resolve));
        if (!pending.size || state.closed) break;
        const key = nextKey();
        pending.delete(key);
        try {
          await deps.load(key);
        } catch (e) {
          log.error('registry: unexpected failure while loading a folder', { folder: key, error: e as Error });
        }
        claims.delete(key);
        deps.worked(key);
      }
    })().finally(() => {
      draining = undefined;
      if (pending.size && !state.closed) kick();
    });
  }

  /** A folder a request waits for first, else the first in name order. */
  function nextKey(): string {
    while (wanted.length) {
      const k = wanted.shift()!;
      if (pending.has(k)) return k;
    }
    let first: string | undefined;
    for (const k of pending) if (first === undefined || k < first) first = k;
    return first!;
  }

  /** The name a pending folder's manifest claims (read once, without validating the rest). */
  function claimOf(key: string): string | undefined {
    if (claims.has(key)) return claims.get(key);
    let name: string | undefined;
    try {
      const dir = join(root, key);
      const value = parseYaml(readFileSync(join(dir, manifestFileOf(dir).name), 'utf8'), key).value as { name?: unknown } | undefined;
      if (typeof value?.name === 'string') name = value.name;
    } catch {
      // no readable manifest: it cannot claim anything
    }
    claims.set(key, name);
    return name;
  }

  return {
    /** Add folders to the list without starting on them. */
    add(key: string): void {
      pending.add(key);
    },
    kick,
    /** Load this folder (again) soon. */
    enqueue(key: string): void {
      pending.add(key);
      kick();
    },
    /**
     * Load next the folder that will serve `name`: the first pending one, in name order, whose
     * manifest claims it (the one that wins it at start, so a request never changes who wins).
     */
    prioritise(name: string): void {
      const winner = [...pending].sort().find((k) => claimOf(k) === name);
      if (winner === undefined || wanted.includes(winner)) return;
      wanted.push(winner);
      kick();
    },
    /** Start working (see `held`). */
    release(): void {
      held = false;
    },
    /** Resolves once the list is worked off. */
    async idle(): Promise<void> {
      while (draining) await draining;
    },
    /** Forget what is waiting (at close). */
    clear(): void {
      pending.clear();
    },
  };
}
