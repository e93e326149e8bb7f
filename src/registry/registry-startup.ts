/**
 * The start-up pass: the folders present at start, which of them were tried, and when the pass is
 * over (readiness(), whenReady()). A request for an integration not loaded yet waits for it
 * (whenLoaded()); the line that says what serves is logged once the pass ends, and the bundle
 * cache's pruning starts then.
 */
import { SwitchyardError } from '../errors.ts';
import { displayPath } from '../manifest/index.ts';
import { BUILTIN_DIR, LOAD_WAIT_MS, type LoadedIntegration, type Readiness } from './registry-types.ts';
import { displayName, type RegistryState } from './registry-state.ts';

const PRUNE_EVERY_MS = 6 * 60 * 60_000;

export type StartupPass = ReturnType<typeof createStartupPass>;

export function createStartupPass(state: RegistryState) {
  const { folders, byName, builtins, log, now, root, opts } = state;
  let starting = true;
  const atStart = new Set<string>();
  const tried = new Set<string>();
  const startedAt = now();
  let readyAt: number | undefined;
  let cachedCount = 0;
  let bundledCount = 0;
  const readyWaiters = new Set<() => void>();
  let pruneTimer: NodeJS.Timeout | undefined;
  /** Asked on every /healthz: computed once per change of the folders (each load ends with one). */
  let readinessMemo: Readiness | undefined;

  function finish(): void {
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
      else
        log.info('built-in integration serving', { integration: name, serving: BUILTIN_DIR, override: `add a folder named ${name} to ${displayPath(root)}` });
    }
    const builtinServing = [...builtins.keys()].filter((name) => !byName.has(name)).length;
    log.info('integrations loaded', {
      dir: displayPath(root),
      serving: all.filter((f) => f.current).length,
      ...(builtinServing ? { built_in: builtinServing } : {}),
      failed: all.filter((f) => f.status === 'error').length,
      ...(all.some((f) => f.status === 'needs_configuration') ? { needs_configuration: all.filter((f) => f.status === 'needs_configuration').length } : {}),
      ...(state.cache ? { bundles_cached: cachedCount, bundles_built: bundledCount } : {}),
      ms: readyAt - startedAt,
      watching: Boolean(opts.watch),
    });
    for (const fn of [...readyWaiters]) fn();
    const cache = state.cache;
    if (cache && opts.pruneCache) {
      const prune = () => {
        if (state.closed) return;
        const keep = new Set([...folders.values()].map((f) => f.bundleKey).filter((k): k is string => Boolean(k)));
        const removed = cache.prune(keep);
        if (removed) log.debug('old cached bundles removed', { removed });
      };
      setTimeout(prune, 1_000).unref();
      pruneTimer = setInterval(prune, PRUNE_EVERY_MS);
      pruneTimer.unref();
    }
  }

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

  /** See Registry.whenLoaded: `prioritise` puts the folder that will serve `name` first in line. */
  async function whenLoaded(
    name: string,
    timeoutMs = LOAD_WAIT_MS,
    get: (name: string) => LoadedIntegration | undefined,
    prioritise: (name: string) => void,
  ): Promise<LoadedIntegration | undefined> {
    const serving = get(name);
    if (serving || !starting) return serving;
    prioritise(name);
    return new Promise<LoadedIntegration | undefined>((resolve, reject) => {
      const finish = () => {
        clearTimeout(timer);
        off();
        readyWaiters.delete(onReady);
      };
      const off = state.listeners.add((n, current) => {
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
  }

  return {
    startedAt,
    /** The folders present at start (filled before the pass begins). */
    atStart,
    get starting() {
      return starting;
    },
    /** The start-up pass is about to try this folder for the first time (its script is not loaded in the sandbox then). */
    firstTry(key: string): boolean {
      return starting && atStart.has(key) && !tried.has(key);
    },
    /** A folder of the pass had its bundle read back from the cache, or built. */
    countBundle(cached: boolean): void {
      if (cached) cachedCount++;
      else bundledCount++;
    },
    /** A folder was worked on: readiness changed, and the pass is over once every folder present at start was tried. */
    worked(key: string): void {
      readinessMemo = undefined;
      if (starting && atStart.has(key)) tried.add(key);
      if (starting && tried.size >= atStart.size) finish();
    },
    /** Folders of the start-up pass not tried yet. */
    stillLoading(): string[] {
      return starting ? [...atStart].filter((k) => !tried.has(k) && !folders.has(k)) : [];
    },
    finish,
    readiness,
    whenReady,
    whenLoaded,
    /** Stop pruning, and let every waiter go. */
    close(): void {
      clearInterval(pruneTimer);
      for (const fn of [...readyWaiters]) fn();
    },
  };
}
