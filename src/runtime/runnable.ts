/**
 * What may run: the integration serving a name with a script to run (waiting for it while the
 * server starts, see Registry.whenLoaded), an installation neither uninstalled nor paused, and an
 * event whose scope the integration's manifest requests.
 */
import { SwitchyardError } from '../errors.ts';
import { missingScope, type Installation } from '../installations/index.ts';
import type { LoadedIntegration, Registry } from '../registry/index.ts';

/** The integration to run; while the server starts, waits for it to load (see Registry.whenLoaded). */
/** The integration when it is loaded with a script, without waiting (else undefined: use loadedOf's). */
export function loadedNowOf(registry: Registry) {
  return function loadedNow(name: string): LoadedIntegration | undefined {
    const integration = registry.get(name);
    return integration?.script ? integration : undefined;
  };
}

export function loadedOf(registry: Registry) {
  return async function loaded(name: string): Promise<LoadedIntegration> {
    const integration = registry.get(name) ?? (await registry.whenLoaded(name));
    if (!integration) throw new SwitchyardError('not_found', `integration "${name}" is not loaded`, { hint: 'see `switchyard integrations list`' });
    if (!integration.script)
      throw new SwitchyardError('not_found', `integration "${name}" has no script to run`, { hint: 'set `script` in its platform-manifest.yaml' });
    return integration;
  };
}

/** Refuses an installation that is uninstalled (`gone`) or paused (`paused`). */
export function runnable(installation: Installation): void {
  if (installation.status === 'uninstalled') throw new SwitchyardError('gone', `installation ${installation.id} is uninstalled`);
  if (installation.status === 'paused')
    throw new SwitchyardError('paused', `installation ${installation.id} is paused`, { hint: 'resume it with `switchyard installations resume`' });
}

/**
 * Refuses an event the integration's manifest does not request the scope for (spec 5.2), whoever
 * posts it: the scope is the integration's grant, not the caller's right, so the admin is refused too.
 * Fan-out and handler runs consult the same table (installations/scopes.ts) and skip such events.
 */
export function scopeGranted(integration: LoadedIntegration, eventType: string): void {
  const missing = missingScope(integration.manifest.scopes as string[], eventType);
  if (!missing) return;
  const manifest = integration.dialect === 'gitbook' ? 'gitbook-manifest.yaml' : 'platform-manifest.yaml';
  throw new SwitchyardError('forbidden', `integration "${integration.name}" does not request the scope ${missing}, which ${eventType} events need`, {
    where: 'event.type',
    hint: `add ${missing} to scopes in its ${manifest} if it should receive ${eventType} events`,
  });
}
