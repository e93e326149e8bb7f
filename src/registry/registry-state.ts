/**
 * What the registry's stages share: every folder's state, which folder serves which name, the
 * built-in integrations (parsed once, at construction), the bundle cache, and the listeners told
 * of each swap. The stages read and change it; nothing outside this folder sees it.
 */
import { statSync } from 'node:fs';
import { resolve } from 'node:path';
import type { Problem } from '../errors.ts';
import type { Logger } from '../log/index.ts';
import { createObservers, type Observers } from '../lib/observers.ts';
import { isError, MANIFEST_FILE, parseManifest } from '../manifest/index.ts';
import { createBundleCache, type BundleCache } from './bundle-cache.ts';
import { BUILTIN_DIR, type IntegrationStatus, type LoadedIntegration, type RegistryOptions } from './registry-types.ts';

export interface Folder {
  key: string;
  dir: string;
  label: string;
  status: IntegrationStatus;
  current?: LoadedIntegration;
  errors: Problem[];
  warnings: Problem[];
  /** The name the latest attempt claimed. */
  claimed?: string;
  /** Set when the latest attempt lost a name to another folder: retried when that name frees up. */
  conflictWith?: string;
  /** The current version's key in the bundle cache (kept when the cache is pruned). */
  bundleKey?: string;
  updatedAt: number;
}

export interface RegistryState {
  readonly opts: RegistryOptions;
  readonly root: string;
  readonly log: Logger;
  readonly now: () => number;
  readonly folders: Map<string, Folder>;
  /** Serving name -> folder key. */
  readonly byName: Map<string, string>;
  readonly builtins: Map<string, LoadedIntegration>;
  readonly cache: BundleCache | undefined;
  readonly listeners: Observers<[name: string, current: LoadedIntegration | undefined]>;
  /** Set by close(): no more loads, swaps or timers. */
  closed: boolean;
}

/** The shared state before any folder is read; the built-ins are parsed apart (parseBuiltins). */
export function createRegistryState(opts: RegistryOptions): RegistryState {
  const log = opts.log;
  const now = opts.now ?? Date.now;
  const cache: BundleCache | undefined = opts.cacheDir
    ? createBundleCache(opts.cacheDir, (e) =>
        log.warn('the bundle cache cannot be used: integrations are bundled at every start', { dir: opts.cacheDir, error: e.message }),
      )
    : undefined;
  return {
    opts,
    root: resolve(opts.dir),
    log,
    now,
    folders: new Map(),
    byName: new Map(),
    builtins: new Map(),
    cache,
    listeners: createObservers<[name: string, current: LoadedIntegration | undefined]>(log, 'a registry listener failed', (name) => ({ integration: name })),
    closed: false,
  };
}

/** The built-in integrations (RegistryOptions.builtins), parsed into `state.builtins`. */
export function parseBuiltins(state: RegistryState): void {
  const { opts, log, now, builtins } = state;
  for (const b of opts.builtins ?? []) {
    const r = parseManifest(b.manifest, `${BUILTIN_DIR}/${b.name}/${MANIFEST_FILE}`, opts.env);
    // Failure policy: a built-in that does not validate is a faulty build; say so and serve the rest.
    if (!r.manifest || r.manifest.name !== b.name || r.manifest.script) {
      log.error('a built-in integration does not load: this build is faulty', {
        integration: b.name,
        problems: r.problems.filter(isError).map((p) => `${p.where}: ${p.message}`),
      });
      continue;
    }
    builtins.set(b.name, { name: b.name, dir: BUILTIN_DIR, manifest: r.manifest, secrets: r.secrets, warnings: [], loadedAt: now(), builtin: true });
  }
}

/** The name a folder goes by: the serving version's, else the one its latest attempt claimed, else its key. */
export const displayName = (f: Folder) => f.current?.name ?? f.claimed ?? f.key;

/** What serves `name` once no folder does: its built-in version, if there is one. */
export const fallback = (state: RegistryState, name: string) => state.builtins.get(name);

export function isDirectory(p: string): boolean {
  try {
    return statSync(p).isDirectory();
  } catch {
    return false;
  }
}
