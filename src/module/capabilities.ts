/**
 * The module contract's check of capabilities, run by the composition root as it starts a server:
 * every module's needs have a provider among the modules of this server (before anything starts),
 * and each module attached what it said it provides (after its start). A missing one fails the
 * start with its name and who needs it, not a TypeError later.
 */
import { SwitchyardError } from '../errors.ts';
import type { Capabilities, Capability, Module, Services } from './contract.ts';

/** Throws naming the first need of `modules` that none of them provides; `known` names where one could come from. */
export function checkNeeds(modules: readonly Module[], known: readonly Module[] = []): void {
  const provided = new Set(modules.flatMap((m) => m.provides ?? []));
  for (const m of modules)
    for (const need of m.needs ?? []) {
      if (provided.has(need)) continue;
      const provider = known.find((k) => k.provides?.includes(need));
      throw new SwitchyardError('capability_missing', `the ${m.name} module needs services.${need}, and no module of this server provides it`, {
        hint: provider ? `start the ${provider.name} module too (see src/server/modules.ts)` : `add a module that provides ${need}, or leave out ${m.name}`,
      });
    }
}

/** Throws when `module` did not attach a capability it provides (called after its start). */
export function checkProvided(module: Module, services: Services): void {
  for (const name of module.provides ?? [])
    if (services[name] === undefined)
      throw new SwitchyardError('capability_missing', `the ${module.name} module did not attach services.${name}, which it provides`, {
        hint: `set services.${name} in its start(), or remove it from its provides`,
      });
}

/**
 * A capability the caller cannot do without, outside a module (a test's or a tool's hold on a
 * running server): its value, or an error naming it.
 */
export function capabilityOf<K extends Capability>(services: Services, name: K): NonNullable<Capabilities[K]> {
  const value: Capabilities[K] = services[name];
  if (value === undefined || value === null)
    throw new SwitchyardError('capability_missing', `this server has no services.${name}`, { hint: 'start the module that provides it' });
  return value;
}
