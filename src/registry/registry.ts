/**
 * The loaded integrations: one per folder of the integrations directory, followed while the server
 * runs. A change is validated and bundled off to the side and swapped in at once; a change that
 * fails keeps the last good version serving and records why (log line + state).
 *
 * Work is done one folder at a time, in name order at start, so which of two folders claiming the
 * same name wins is deterministic (the first in alphabetical order) and every swap sees a settled
 * registry.
 *
 * Start-up: with `background`, the registry is handed back at once and loads its folders behind
 * the server's back (`readiness()`, `whenReady()`); a request for an integration not loaded yet
 * waits for it (`whenLoaded()`), and its folder is loaded next. Scripts are not loaded in the
 * sandbox during the start-up pass (isolates start on first use); changes after it are.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { SwitchyardError } from '../errors.ts';
import { createBundleCache, type BundleCache } from './bundle-cache.ts';
import { isDeepStrictEqual } from 'node:util';
import { join, resolve } from 'node:path';
import type { Config } from '../config/index.ts';
import type { Problem } from '../errors.ts';
import type { Logger } from '../log/index.ts';
import { createObservers } from '../lib/observers.ts';
import { displayPath, isError, manifestFileOf, MANIFEST_FILE, parseManifest, type Manifest, type ManifestDialect } from '../manifest/index.ts';
import { parseYaml } from '../schema/yaml.ts';
import { prepareFolder } from './prepare.ts';
import { watchTree, type TreeWatcher } from './watch.ts';

/** What the sandbox runs: one ES module; `@switchyard/runtime` (and its subpaths) left as imports. */
export interface GuestScript {
  name: string;
  /** Content hash of `code`. */
  version: string;
  code: string;
}

/** A version that passed every check and is (or was) serving. */
export interface LoadedIntegration {
  name: string;
  dir: string;
  manifest: Manifest;
  /** `gitbook` when read from gitbook-manifest.yaml: its code sees GitBook's environment shape. */
  dialect?: ManifestDialect;
  /** Resolved secret values by name. Never log these. */
  secrets: Record<string, string>;
  script?: GuestScript;
  /** The script's source map (JSON text), for stack traces; stays on the host (see runtime/stack-trace.ts). */
  sourceMap?: string;
  warnings: Problem[];
  loadedAt: number;
  /** A built-in integration (see RegistryOptions.builtins): no folder; `dir` is BUILTIN_DIR. */
  builtin?: true;
}

/** What a built-in integration shows as its folder. */
export const BUILTIN_DIR = '(built-in)';

/**
 * One folder's state. `status: 'error'` with `current` set means the last change was rejected and
 * the previous version keeps serving; without `current`, nothing serves from this folder.
 */
export interface IntegrationState {
  name: string;
  dir: string;
  status: IntegrationStatus;
  current?: LoadedIntegration;
  errors: Problem[];
  warnings: Problem[];
  updatedAt: number;
}

/**
 * `needs_configuration`: nothing is wrong with the folder but environment variables its secrets read
 * are unset (a shipped example before its .env is filled in): a one-line warning, not an error.
 */
export type IntegrationStatus = 'loaded' | 'error' | 'needs_configuration' | 'loading';

/** How far the start-up load is: every folder present at start, and how many were tried. */
export interface Readiness {
  /** Every folder present at start was tried (loaded, failed or needs configuration). */
  ready: boolean;
  total: number;
  /** Folders tried so far. */
  done: number;
  /** Folders serving now. */
  loaded: number;
  failed: number;
  /** When the start-up pass began and ended (ms since the epoch). */
  startedAt: number;
  readyAt?: number;
  /** Folders whose bundle was read back from the cache / built by esbuild during the pass. */
  cached: number;
  bundled: number;
}

export interface Registry {
  get(name: string): LoadedIntegration | undefined;
  list(): IntegrationState[];
  state(name: string): IntegrationState | undefined;
  /** Called after a swap (`current` the new version) or a removal (`current` undefined). */
  onChange(fn: (name: string, current: LoadedIntegration | undefined) => void): () => void;
  /** Re-read every folder now; resolves once done. */
  reload(): Promise<void>;
  readiness(): Readiness;
  /** Resolves true once the start-up pass is over, false when `timeoutMs` passed first. */
  whenReady(timeoutMs?: number): Promise<boolean>;
  /**
   * The integration serving under `name`: at once when it serves; while the start-up pass may
   * still bring it, loads its folder next and waits for it, up to `timeoutMs` (then throws a 503
   * `starting` error). Undefined when no folder serves that name.
   */
  whenLoaded(name: string, timeoutMs?: number): Promise<LoadedIntegration | undefined>;
  close(): Promise<void>;
}

export interface RegistryOptions {
  dir: string;
  log: Logger;
  /** Environment for `${{ env.NAME }}` secrets (a folder's own .env fills in what is missing). */
  env: Record<string, string | undefined>;
  limits: Config['sandbox'];
  watch?: boolean;
  /** Load the script in the sandbox: an error message when it fails. A version swaps in only when this passes. */
  verify?: (script: GuestScript) => Promise<string | undefined>;
  /**
   * Manifest-only integrations served whatever the folder holds: a folder that serves the same
   * name overrides one; while none does (no such folder, or one that fails to load) it serves.
   */
  builtins?: Array<{ name: string; manifest: string }>;
  /** Quiet time after the last file event of a folder before it is reloaded. */
  debounceMs?: number;
  /** Keep bundles here across starts (`<data_dir>/cache`): an unchanged folder is not bundled again. */
  cacheDir?: string;
  /** Remove cached bundles unused for a week (one process of several does it). */
  pruneCache?: boolean;
  /** Hand the registry back at once and load the folders in the background (see readiness()). */
  background?: boolean;
  /**
   * With `background`: begin loading once this resolves (the server's start line first, then the
   * integrations'; see Services.listening).
   */
  startAfter?: Promise<unknown>;
  now?: () => number;
}

interface Folder {
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

/** How long a request for an integration waits, by default, while the start-up pass may still bring it. */
export const LOAD_WAIT_MS = 10_000;
const PRUNE_EVERY_MS = 6 * 60 * 60_000;

/** Folders starting with `.` or `_` (and node_modules) are not integrations: a way to park one. */
export function isIntegrationFolderName(name: string): boolean {
  return !name.startsWith('.') && !name.startsWith('_') && name !== 'node_modules';
}

function isDirectory(p: string): boolean {
  try {
    return statSync(p).isDirectory();
  } catch {
    return false;
  }
}

export async function createRegistry(opts: RegistryOptions): Promise<Registry> {
  const root = resolve(opts.dir);
  const log = opts.log;
  const now = opts.now ?? Date.now;
  const debounceMs = opts.debounceMs ?? 50;
  const folders = new Map<string, Folder>();
  /** Serving name -> folder key. */
  const byName = new Map<string, string>();
  const listeners = createObservers<[name: string, current: LoadedIntegration | undefined]>(log, 'a registry listener failed', (name) => ({ integration: name }));
  const pending = new Set<string>();
  const timers = new Map<string, NodeJS.Timeout>();
  let draining: Promise<void> | undefined;
  let closed = false;
  let watcher: TreeWatcher | undefined;
  const cache: BundleCache | undefined = opts.cacheDir
    ? createBundleCache(opts.cacheDir, (e) => log.warn('the bundle cache cannot be used: integrations are bundled at every start', { dir: opts.cacheDir, error: e.message }))
    : undefined;

  // The start-up pass: the folders present at start, and which of them were tried.
  let starting = true;
  const atStart = new Set<string>();
  const tried = new Set<string>();
  const startedAt = now();
  let readyAt: number | undefined;
  let cachedCount = 0;
  let bundledCount = 0;
  const readyWaiters = new Set<() => void>();
  /** Folders to load before the others: a request waits for them. */
  const wanted: string[] = [];
  /** The names pending folders claim, read only when a request looks for one. */
  const claims = new Map<string, string | undefined>();
  let pruneTimer: NodeJS.Timeout | undefined;
  let held = Boolean(opts.background && opts.startAfter);

  const displayName = (f: Folder) => f.current?.name ?? f.claimed ?? f.key;

  const builtins = new Map<string, LoadedIntegration>();
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
  /** What serves `name` once no folder does: its built-in version, if there is one. */
  const fallback = (name: string) => builtins.get(name);

  const emit = listeners.notify;

  function kick(): void {
    if (draining || closed || held) return;
    draining = (async () => {
      while (pending.size && !closed) {
        // A turn of the event loop between folders: a folder whose bundle is cached loads without
        // waiting on anything, and the server must listen and answer while the others load.
        await new Promise((resolve) => setImmediate(resolve));
        if (!pending.size || closed) break;
        const key = nextKey();
        pending.delete(key);
        try {
          await loadFolder(key);
        } catch (e) {
          log.error('registry: unexpected failure while loading a folder', { folder: key, error: e as Error });
        }
        claims.delete(key);
        readinessMemo = undefined;
        if (starting && atStart.has(key)) tried.add(key);
        if (starting && tried.size >= atStart.size) finishStart();
      }
    })().finally(() => {
      draining = undefined;
      if (pending.size && !closed) kick();
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

  function finishStart(): void {
    if (!starting) return;
    starting = false;
    readyAt = now();
    readinessMemo = undefined;
    const all = [...folders.values()];
    for (const name of builtins.keys()) {
      const key = byName.get(name);
      const claimant = all.find((f) => displayName(f) === name);
      // Which one serves, said once at start: the folder or the built-in version.
      if (key !== undefined) log.info('integration folder overrides the built-in version', { integration: name, serving: folders.get(key)!.label });
      else if (claimant) log.warn('built-in integration serving: the folder of that name does not load', { integration: name, dir: claimant.label });
      else log.info('built-in integration serving', { integration: name, serving: BUILTIN_DIR, override: `add a folder named ${name} to ${displayPath(root)}` });
    }
    const builtinServing = [...builtins.keys()].filter((name) => !byName.has(name)).length;
    log.info('integrations loaded', {
      dir: displayPath(root),
      serving: all.filter((f) => f.current).length,
      ...(builtinServing ? { built_in: builtinServing } : {}),
      failed: all.filter((f) => f.status === 'error').length,
      ...(all.some((f) => f.status === 'needs_configuration') ? { needs_configuration: all.filter((f) => f.status === 'needs_configuration').length } : {}),
      ...(cache ? { bundles_cached: cachedCount, bundles_built: bundledCount } : {}),
      ms: readyAt - startedAt,
      watching: Boolean(opts.watch),
    });
    for (const fn of [...readyWaiters]) fn();
    if (cache && opts.pruneCache) {
      const prune = () => {
        if (closed) return;
        const keep = new Set([...folders.values()].map((f) => f.bundleKey).filter((k): k is string => Boolean(k)));
        const removed = cache.prune(keep);
        if (removed) log.debug('old cached bundles removed', { removed });
      };
      setTimeout(prune, 1_000).unref();
      pruneTimer = setInterval(prune, PRUNE_EVERY_MS);
      pruneTimer.unref();
    }
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

  /**
   * Load next the folder that will serve `name`: the first pending one, in name order, whose
   * manifest claims it (the one that wins it at start, so a request never changes who wins).
   */
  function prioritise(name: string): void {
    const winner = [...pending].sort().find((k) => claimOf(k) === name);
    if (winner === undefined || wanted.includes(winner)) return;
    wanted.push(winner);
    kick();
  }

  /** Asked on every /healthz: computed once per change of the folders (each load ends with one). */
  let readinessMemo: Readiness | undefined;
  function readiness(): Readiness {
    if (readinessMemo) return readinessMemo;
    const all = [...folders.values()];
    return (readinessMemo = {
      ready: !starting,
      total: atStart.size,
      done: starting ? tried.size : atStart.size,
      loaded: all.filter((f) => f.current).length,
      failed: all.filter((f) => f.status === 'error' && !f.current).length,
      startedAt,
      ...(readyAt !== undefined ? { readyAt } : {}),
      cached: cachedCount,
      bundled: bundledCount,
    });
  }

  function whenReady(timeoutMs?: number): Promise<boolean> {
    if (!starting) return Promise.resolve(true);
    return new Promise((resolve) => {
      let timer: NodeJS.Timeout | undefined;
      const done = (ok: boolean) => {
        clearTimeout(timer);
        readyWaiters.delete(onReady);
        resolve(ok);
      };
      const onReady = () => done(!starting);
      readyWaiters.add(onReady);
      if (timeoutMs !== undefined) timer = setTimeout(() => done(false), timeoutMs);
    });
  }

  function enqueue(key: string): void {
    pending.add(key);
    kick();
  }

  async function idle(): Promise<void> {
    while (draining) await draining;
  }

  function schedule(entry: string | null): void {
    if (closed) return;
    if (entry === null) {
      for (const key of scan()) schedule(key);
      return;
    }
    if (!isIntegrationFolderName(entry) && !folders.has(entry)) return;
    clearTimeout(timers.get(entry));
    timers.set(
      entry,
      setTimeout(() => {
        timers.delete(entry);
        enqueue(entry);
      }, debounceMs),
    );
  }

  /** Folder names present now plus those known (so removals are seen). */
  function scan(): string[] {
    let names: string[] = [];
    try {
      names = readdirSync(root, { withFileTypes: true })
        .filter((e) => isIntegrationFolderName(e.name) && (e.isDirectory() || (e.isSymbolicLink() && isDirectory(join(root, e.name)))))
        .map((e) => e.name);
    } catch (e) {
      log.error('cannot read the integrations directory', { dir: root, error: (e as Error).message });
    }
    return [...new Set([...names, ...folders.keys()])].sort();
  }

  function retryConflicts(name: string): void {
    for (const f of folders.values()) if (f.conflictWith === name) enqueue(f.key);
  }

  function remove(key: string): void {
    const f = folders.get(key);
    if (!f) return;
    folders.delete(key);
    if (f.current && byName.get(f.current.name) === key) {
      byName.delete(f.current.name);
      const builtin = fallback(f.current.name);
      log.info(builtin ? 'integration removed; the built-in version serves again' : 'integration removed', { integration: f.current.name, dir: f.label });
      emit(f.current.name, builtin);
      retryConflicts(f.current.name);
    }
  }

  function fail(f: Folder, errors: Problem[], warnings: Problem[], claimed: string | undefined, conflictWith?: string): void {
    const unset = errors.every((p) => p.needsEnv) ? [...new Set(errors.map((p) => p.needsEnv!))] : [];
    f.status = unset.length ? 'needs_configuration' : 'error';
    f.errors = errors;
    f.warnings = warnings;
    f.claimed = claimed;
    f.conflictWith = conflictWith;
    f.updatedAt = now();
    folders.set(f.key, f);
    if (unset.length && !f.current) {
      const example = existsSync(join(f.dir, '.env.example')) ? ` (copy ${join(f.label, '.env.example')} to ${join(f.label, '.env')} and fill it in)` : '';
      log.warn('integration needs configuration', {
        integration: displayName(f),
        dir: f.label,
        set: `${unset.join(', ')} in the environment or in ${join(f.label, '.env')}${example}`,
      });
      return;
    }
    const builtinServes = !f.current && claimed !== undefined && fallback(claimed) && !byName.has(claimed);
    log.error(f.current ? 'integration change rejected; the last good version keeps serving' : builtinServes ? 'integration failed to load; the built-in version keeps serving' : 'integration failed to load', {
      integration: displayName(f),
      dir: f.label,
      ...(f.current ? { serving: f.current.script?.version ?? 'manifest only' } : {}),
      problems: errors.map((p) => `${p.where}: ${p.message}${p.hint ? ` (${p.hint})` : ''}`),
    });
  }

  /** Where `name:` sits in the manifest, for the duplicate-name error. */
  function namePosition(f: Folder): string {
    const manifestFile = manifestFileOf(f.dir).name;
    const file = join(f.label, manifestFile);
    try {
      const src = parseYaml(readFileSync(join(f.dir, manifestFile), 'utf8'), file);
      const { line, col } = src.locate(['name']);
      return `${file}:${line}:${col}`;
    } catch {
      return file;
    }
  }

  async function loadFolder(key: string): Promise<void> {
    const dir = join(root, key);
    if (!isIntegrationFolderName(key) || !isDirectory(dir)) return remove(key);
    const f: Folder = folders.get(key) ?? { key, dir, label: displayPath(dir), status: 'error', errors: [], warnings: [], updatedAt: now() };

    const firstAtStart = starting && atStart.has(key) && !tried.has(key);
    const p = await prepareFolder(dir, { env: opts.env, label: f.label, maxBytes: opts.limits.script_size, cache });
    if (firstAtStart && p.prepared?.script) p.prepared.bundleCached ? cachedCount++ : bundledCount++;
    const warnings = p.warnings;
    if (!p.prepared) return fail(f, p.errors, warnings, p.claimedName);
    const { manifest, script, secrets, sourceMap, dialect } = p.prepared;
    const name = manifest.name;

    // Failure policy: fail closed. A built-in integration is overridden only by a folder of its own
    // name: a folder named otherwise that claims it in its manifest would take over its
    // installations unasked (the webhook's: their configuration and tokens, enough to point their
    // URL elsewhere).
    if (builtins.has(name) && key !== name)
      return fail(
        f,
        [
          {
            where: namePosition(f),
            message: `name: "${name}" is the built-in integration's: only a folder named ${name} overrides it, so ${f.label} is not loaded`,
            hint: `give this integration a name of its own, or rename the folder to ${name} to override the built-in one`,
            severity: 'error',
          },
        ],
        warnings,
        undefined,
      );

    const owner = byName.get(name);
    if (owner !== undefined && owner !== key) {
      const other = folders.get(owner)!;
      return fail(
        f,
        [
          {
            where: namePosition(f),
            message: `name: "${name}" is already used by the integration in ${other.label}; names are unique, so ${f.label} is not loaded`,
            hint: `rename one of them (${join(other.label, manifestFileOf(other.dir).name)} or ${join(f.label, manifestFileOf(f.dir).name)})`,
            severity: 'error',
          },
        ],
        warnings,
        name,
        name,
      );
    }

    // Isolates start on first use: the start-up pass does not load scripts in the sandbox (a script
    // that only fails when loaded answers its invocations with the load error; `switchyard check`
    // finds it beforehand). A change afterwards is loaded off to the side before it swaps in.
    if (script && opts.verify && !firstAtStart && f.current?.script?.version !== script.version) {
      let message: string | undefined;
      try {
        message = await opts.verify(script);
      } catch (e) {
        message = (e as Error).message ?? String(e);
      }
      if (message)
        return fail(
          f,
          [
            {
              where: join(f.label, p.prepared.scriptPath ?? ''),
              message: `the script failed to load in the sandbox: ${message}`,
              hint: `run \`switchyard check ${f.label}\` to see it again`,
              severity: 'error',
            },
          ],
          warnings,
          name,
        );
    }
    if (closed) return;
    if (!isDirectory(dir)) return remove(key); // removed while bundling

    // The swap: synchronous from here on, so no reader sees a half-updated registry.
    const prev = f.current;
    f.status = 'loaded';
    f.errors = [];
    f.warnings = warnings;
    f.claimed = name;
    f.conflictWith = undefined;
    f.updatedAt = now();
    f.bundleKey = p.prepared.bundleKey ?? (prev?.script?.version === script?.version ? f.bundleKey : undefined);
    folders.set(key, f);
    const unchanged =
      prev !== undefined &&
      prev.name === name &&
      prev.script?.version === script?.version &&
      isDeepStrictEqual(prev.manifest, manifest) &&
      prev.dialect === dialect &&
      isDeepStrictEqual(prev.secrets, secrets);
    if (unchanged) {
      prev.warnings = warnings;
      return;
    }
    const next: LoadedIntegration = { name, dir, manifest, dialect, secrets, script, ...(sourceMap ? { sourceMap } : {}), warnings, loadedAt: now() };
    f.current = next;
    if (prev && prev.name !== name && byName.get(prev.name) === key) byName.delete(prev.name);
    byName.set(name, key);
    log.info(prev ? 'integration reloaded' : 'integration loaded', {
      integration: name,
      version: script?.version ?? 'manifest only',
      dir: f.label,
      ...(!prev && fallback(name) ? { overrides: `the built-in ${name} integration` } : {}),
      ...(warnings.length ? { warnings: warnings.map((p) => `${p.where}: ${p.message}`) } : {}),
    });
    if (prev && prev.name !== name) {
      emit(prev.name, fallback(prev.name));
      retryConflicts(prev.name);
    }
    emit(name, next);
  }

  function toState(f: Folder): IntegrationState {
    const name = displayName(f);
    // A folder claiming a built-in's name that does not load: the built-in keeps serving, as a
    // last good version would.
    const current = f.current ?? (byName.has(name) ? undefined : fallback(name));
    return {
      name,
      dir: f.dir,
      status: f.status,
      ...(current ? { current } : {}),
      errors: f.errors,
      warnings: f.warnings,
      updatedAt: f.updatedAt,
    };
  }

  function builtinState(b: LoadedIntegration): IntegrationState {
    return { name: b.name, dir: BUILTIN_DIR, status: 'loaded', current: b, errors: [], warnings: [], updatedAt: b.loadedAt };
  }

  mkdirSync(root, { recursive: true });
  if (opts.watch)
    watcher = watchTree(root, schedule, (e) => log.warn('cannot watch part of the integrations directory', { error: e.message }));
  for (const key of scan()) pending.add(key), atStart.add(key);
  const begin = () => {
    if (!atStart.size) finishStart();
    kick();
  };
  if (held)
    void opts.startAfter!.then(() => {
      held = false;
      begin();
    });
  else begin();
  if (!opts.background) await whenReady();

  const loadingState = (key: string): IntegrationState => ({ name: key, dir: join(root, key), status: 'loading', errors: [], warnings: [], updatedAt: startedAt });
  /** Folders of the start-up pass not tried yet. */
  const stillLoading = () => (starting ? [...atStart].filter((k) => !tried.has(k) && !folders.has(k)) : []);

  function get(name: string): LoadedIntegration | undefined {
    const key = byName.get(name);
    return (key === undefined ? undefined : folders.get(key)?.current) ?? fallback(name);
  }
  function onChange(fn: (name: string, current: LoadedIntegration | undefined) => void): () => void {
    return listeners.add(fn);
  }

  return {
    get,
    list() {
      const states = [...[...folders.values()].map(toState), ...stillLoading().map(loadingState)];
      for (const [name, builtin] of builtins) if (!states.some((s) => s.name === name)) states.push(builtinState(builtin));
      return states.sort((a, b) => a.name.localeCompare(b.name) || a.dir.localeCompare(b.dir));
    },
    state(name) {
      const key = byName.get(name);
      const f =
        (key !== undefined ? folders.get(key) : undefined) ??
        [...folders.values()].find((x) => displayName(x) === name) ??
        folders.get(name);
      if (f) return toState(f);
      if (stillLoading().includes(name)) return loadingState(name);
      const builtin = fallback(name);
      return builtin ? builtinState(builtin) : undefined;
    },
    readiness,
    whenReady,
    async whenLoaded(name, timeoutMs = LOAD_WAIT_MS) {
      const serving = get(name);
      if (serving || !starting) return serving;
      prioritise(name);
      return new Promise<LoadedIntegration | undefined>((resolve, reject) => {
        const finish = () => {
          clearTimeout(timer);
          off();
          readyWaiters.delete(onReady);
        };
        const off = onChange((n, current) => {
          if (n !== name || !current) return;
          finish();
          resolve(current);
        });
        const onReady = () => {
          finish();
          resolve(get(name));
        };
        readyWaiters.add(onReady);
        const timer = setTimeout(() => {
          finish();
          const r = readiness();
          reject(
            new SwitchyardError('starting', `integration "${name}" is not loaded yet: the server is starting (${r.done} of ${r.total} integrations loaded)`, {
              headers: { 'retry-after': '1' },
              hint: 'try again in a moment; GET /readyz answers 200 once every integration is loaded',
            }),
          );
        }, timeoutMs);
      });
    },
    onChange,
    async reload() {
      for (const key of scan()) pending.add(key);
      kick();
      await idle();
    },
    async close() {
      closed = true;
      clearInterval(pruneTimer);
      for (const fn of [...readyWaiters]) fn();
      watcher?.close();
      for (const t of timers.values()) clearTimeout(t);
      timers.clear();
      pending.clear();
      await idle();
    },
  };
}
