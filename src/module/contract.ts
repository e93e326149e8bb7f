/**
 * The module contract: what a module is (Module, defineModule) and the services it is handed and
 * attaches capabilities to. Every module imports it; it imports no module and not the composition
 * root (src/server/), which starts the modules in the order their `needs` and `uses` make
 * (startOrder in capabilities.ts) and stops them in reverse. test/imports.test.ts holds it to that (docs/architecture.md, "Layers").
 */
import type { H3 } from 'h3';
import type { HttpServices } from '../http/app.ts';
import type { ProcessLink } from '../process/serving.ts';

/**
 * The capabilities modules attach to the services object, by name. Each module declares those it
 * provides by augmenting this interface from its index.ts (declaration merging, the pattern of
 * Hono's ContextVariableMap):
 *
 *     declare module '../module/contract.ts' {
 *       interface Capabilities { webhooks?: WebhooksService }
 *     }
 *
 * Every entry is optional here: a server (a test's, a tool's) may run without the module that
 * provides it. A module that cannot work without one lists it in `needs`; it is then handed the
 * services with that capability present (ServicesWith), and startServer refuses to start a set of
 * modules in which a need has no provider (checkNeeds). One it reads when present and does without
 * otherwise it lists in `uses`. Either way its provider starts first (startOrder).
 */
// biome-ignore lint/suspicious/noEmptyInterface: empty here, filled by each module's declaration merging
export interface Capabilities {}

/** A capability's name. */
export type Capability = keyof Capabilities;

export interface Services extends HttpServices, Capabilities {
  /** Isolates run in this process rather than in a sandbox worker process (see startServer). */
  sandboxInProcess?: boolean;
  /** Set in a serving process beside others, under the supervisor (src/process/serving.ts). */
  processes?: ProcessLink;
  /**
   * Resolves once the HTTP server listens and its start line is said: start-up work whose log lines
   * should come after that line (loading the integrations) waits for it.
   */
  listening?: Promise<void>;
}

/** The services with the capabilities `K` present: what a module that needs them is handed. */
export type ServicesWith<K extends Capability> = Services & { [P in K]-?: NonNullable<Capabilities[P]> };

/**
 * A module. `start` sees the capabilities it `needs`; `routes` (called after every module started,
 * and after startServer checked that each module attached what it `provides`) sees those and its own.
 * Routes and helpers in other files take ServicesWith<...> of what they read, and are called from
 * here (not assigned), so a reader asking for more than the module needs fails to type-check.
 */
export interface Module<N extends Capability = never, P extends Capability = never> {
  name: string;
  /** The capabilities start() attaches. */
  provides?: readonly Capability[];
  /** The capabilities this module cannot work without, from any module of the server (itself aside). */
  needs?: readonly Capability[];
  /**
   * The capabilities this module reads when the server has them and does without otherwise (a
   * legal server may leave their module out): optional needs. They stay optional in its services.
   * A read of what a module that needs this one attaches (a hook it fills in) would make a cycle: it
   * is left out, with a comment where it is read.
   */
  uses?: readonly Capability[];
  /** Start background work and attach capabilities; the returned function stops it (bounded). */
  start?(services: ServicesWith<N>): void | Promise<void | (() => Promise<void> | void)>;
  /**
   * Add HTTP routes (called after every module started), each declared with route() or passRoute()
   * (src/http/route.ts): the declaration documents it in GET /openapi.json.
   */
  routes?(app: H3, services: ServicesWith<N | P>): void;
}

/** A module, with `needs` and `provides` read as the capability names its start and routes may rely on. */
export function defineModule<const N extends Capability = never, const P extends Capability = never>(
  module: Module<N, P> & { needs?: readonly N[]; provides?: readonly P[] },
): Module<N, P> {
  return module;
}
