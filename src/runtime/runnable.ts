/**
 * What may run: the integration serving a name with a script to run (waiting for it while the
 * server starts, see Registry.whenLoaded), and an installation neither uninstalled nor paused.
 */
import { SwitchyardError } from '../errors.ts';
import type { Installation } from '../installations/index.ts';
import type { LoadedIntegration, Registry } from '../registry/index.ts';

/** The integration to run; while the server starts, waits for it to load (see Registry.whenLoaded). */
export function loadedOf(registry: Registry) {
  return async function loaded(name: string): Promise<LoadedIntegration> {
    const integration = registry.get(name) ?? (await registry.whenLoaded(name));
    if (!integration)
      throw new SwitchyardError('not_found', `integration "${name}" is not loaded`, { hint: 'see `switchyard integrations list`' });
    if (!integration.script)
      throw new SwitchyardError('not_found', `integration "${name}" has no script to run`, { hint: 'set `script` in its platform-manifest.yaml' });
    return integration;
  };
}

/** Refuses an installation that is uninstalled (`gone`) or paused (`paused`). */
export function runnable(installation: Installation): void {
  if (installation.status === 'uninstalled')
    throw new SwitchyardError('gone', `installation ${installation.id} is uninstalled`);
  if (installation.status === 'paused')
    throw new SwitchyardError('paused', `installation ${installation.id} is paused`, { hint: 'resume it with `switchyard installations resume`' });
}
