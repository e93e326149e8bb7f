/**
 * What the registry shows: the integration serving a name (get), and every folder's state
 * (list, state), with the built-ins no folder overrides and the folders still waiting for the
 * start-up pass (`loading`).
 */
import { join } from 'node:path';
import { BUILTIN_DIR, type IntegrationState, type LoadedIntegration } from './registry-types.ts';
import { displayName, fallback, type Folder, type RegistryState } from './registry-state.ts';
import type { StartupPass } from './registry-startup.ts';

export function createRegistryViews(state: RegistryState, startup: StartupPass) {
  const { folders, byName, builtins, root } = state;

  function toState(f: Folder): IntegrationState {
    const name = displayName(f);
    // A folder claiming a built-in's name that does not load: the built-in keeps serving, as a
    // last good version would.
    const current = f.current ?? (byName.has(name) ? undefined : fallback(state, name));
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

  const loadingState = (key: string): IntegrationState => ({
    name: key,
    dir: join(root, key),
    status: 'loading',
    errors: [],
    warnings: [],
    updatedAt: startup.startedAt,
  });

  return {
    get(name: string): LoadedIntegration | undefined {
      const key = byName.get(name);
      return (key === undefined ? undefined : folders.get(key)?.current) ?? fallback(state, name);
    },

    list(): IntegrationState[] {
      const states = [...[...folders.values()].map(toState), ...startup.stillLoading().map(loadingState)];
      for (const [name, builtin] of builtins) if (!states.some((s) => s.name === name)) states.push(builtinState(builtin));
      return states.sort((a, b) => a.name.localeCompare(b.name) || a.dir.localeCompare(b.dir));
    },

    state(name: string): IntegrationState | undefined {
      const key = byName.get(name);
      const f = (key !== undefined ? folders.get(key) : undefined) ?? [...folders.values()].find((x) => displayName(x) === name) ?? folders.get(name);
      if (f) return toState(f);
      if (startup.stillLoading().includes(name)) return loadingState(name);
      const builtin = fallback(state, name);
      return builtin ? builtinState(builtin) : undefined;
    },
  };
}
