/**
 * The module contract's check of capabilities, run by the composition root as it starts a server:
 * every module's needs have a provider among the modules of this server (before anything starts),
 * and each module attached what it said it provides (after its start). A missing one fails the
 * start with its name and who needs it, not a TypeError later. The start order comes from the same
 * declarations (startOrder): a module starts after the providers of what it needs or uses.
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

/**
 * The order to start `modules` in: each after the modules that provide what it needs or uses (a
 * module that provides nothing another reads keeps its place). Stable: among the modules free to
 * start, the first in `modules` goes first, so an order that already fits stays as it is. Throws
 * naming the modules when they need each other (a cycle), since none of them can start first.
 */
export function startOrder(modules: readonly Module[]): Module[] {
  // after.get(m): the modules m waits for (the providers of what it reads, itself aside).
  const after = new Map<Module, Array<{ provider: Module; capability: Capability }>>();
  for (const m of modules)
    after.set(
      m,
      [...(m.needs ?? []), ...(m.uses ?? [])].flatMap((capability) =>
        modules.filter((p) => p !== m && p.provides?.includes(capability)).map((provider) => ({ provider, capability })),
      ),
    );
  const started = new Set<Module>();
  const order: Module[] = [];
  while (order.length < modules.length) {
    const next = modules.find((m) => !started.has(m) && after.get(m)!.every((d) => started.has(d.provider)));
    if (!next)
      throw cycleError(
        modules.filter((m) => !started.has(m)),
        after,
      );
    started.add(next);
    order.push(next);
  }
  return order;
}

/** The error naming one cycle among `waiting` (modules none of which can start), each step with the capability it waits for. */
function cycleError(waiting: Module[], after: Map<Module, Array<{ provider: Module; capability: Capability }>>): SwitchyardError {
  // Each waiting module waits for a waiting one: walking those steps comes back to a module seen.
  const path: Array<{ module: Module; capability: Capability }> = [];
  let m = waiting[0]!;
  while (!path.some((p) => p.module === m)) {
    const step = after.get(m)!.find((d) => waiting.includes(d.provider))!;
    path.push({ module: m, capability: step.capability });
    m = step.provider;
  }
  const cycle = path.slice(path.findIndex((p) => p.module === m));
  const steps = cycle.map((p, i) => `${p.module.name} reads services.${p.capability} of ${cycle[(i + 1) % cycle.length]!.module.name}`);
  return new SwitchyardError(
    'module_cycle',
    `the modules ${cycle.map((p) => p.module.name).join(', ')} each wait for another to start first: ${steps.join(', ')}`,
    {
      hint: 'one of them must start without the next: leave that capability out of its needs and uses, or move what reads it to another module (see src/server/modules.ts)',
    },
  );
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
