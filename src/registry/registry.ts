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
 *
 * It is built of stages, each in its own file: the shared state and the built-ins
 * (registry-state.ts), loading one folder and the swap (registry-load.ts), the work list
 * (registry-work.ts), following the directory (registry-follow.ts), the start-up pass and
 * readiness (registry-startup.ts), and the views (registry-views.ts); composing them is here.
 */
import { mkdirSync } from 'node:fs';
import { scanFolders, followFolders } from './registry-follow.ts';
import { createFolderLoader } from './registry-load.ts';
import { createRegistryState, parseBuiltins } from './registry-state.ts';
import { createStartupPass } from './registry-startup.ts';
import type { LoadedIntegration, Registry, RegistryOptions } from './registry-types.ts';
import { createRegistryViews } from './registry-views.ts';
import { createWorkList } from './registry-work.ts';

export { BUILTIN_DIR, isIntegrationFolderName, LOAD_WAIT_MS } from './registry-types.ts';
export type { GuestScript, IntegrationState, IntegrationStatus, LoadedIntegration, Readiness, Registry, RegistryOptions } from './registry-types.ts';

export async function createRegistry(opts: RegistryOptions): Promise<Registry> {
  const state = createRegistryState(opts);
  const startup = createStartupPass(state);
  parseBuiltins(state);
  const work = createWorkList(state, {
    load: (key) => loader.loadFolder(key),
    worked: (key) => startup.worked(key),
    held: Boolean(opts.background && opts.startAfter),
  });
  const loader = createFolderLoader(state, startup, work.enqueue);
  const views = createRegistryViews(state, startup);

  mkdirSync(state.root, { recursive: true });
  const follower = followFolders(state, work.enqueue);
  for (const key of scanFolders(state)) work.add(key), startup.atStart.add(key);
  const begin = () => {
    if (!startup.atStart.size) startup.finish();
    work.kick();
  };
  if (opts.background && opts.startAfter)
    void opts.startAfter.then(() => {
      work.release();
      begin();
    });
  else begin();
  if (!opts.background) await startup.whenReady();

  const { get } = views;
  const onChange = (fn: (name: string, current: LoadedIntegration | undefined) => void) => state.listeners.add(fn);

  return {
    get,
    list: views.list,
    state: views.state,
    readiness: startup.readiness,
    whenReady: startup.whenReady,
    whenLoaded: (name, timeoutMs) => startup.whenLoaded(name, timeoutMs, get, work.prioritise),
    onChange,
    async reload() {
      for (const key of scanFolders(state)) work.add(key);
      work.kick();
      await work.idle();
    },
    async close() {
      state.closed = true;
      startup.close();
      follower.close();
      work.clear();
      await work.idle();
    },
  };
}
