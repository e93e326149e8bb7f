/**
 * What each script version exports (fetch, components, event handlers), kept in memory once read:
 * read by loading the version in the sandbox, or recalled from an earlier start (exports-cache.ts)
 * without loading it. Events ask it which installations handle a type.
 */
import { scopesAllow } from '../installations/index.ts';
import type { LoadedIntegration } from '../registry/index.ts';
import type { RuntimeDeps } from './service-deps.ts';

export function createKnownExports(deps: Pick<RuntimeDeps, 'sandbox' | 'exportsCache'>) {
  const exportsCache = new Map<string, { fetch: boolean; components: string[]; events: string[] }>();

  /** What a script exports (cached per version; a version read before this start is remembered, see exports-cache.ts). */
  async function exportsOf(integration: LoadedIntegration) {
    const version = integration.script!.version;
    const known = exportsCache.get(version) ?? (await recall(integration));
    if (known) return known;
    const r = await deps.sandbox.check(integration.script!);
    // A load stopped by a limit (a busy machine can slow one past sandbox.startup_time) says nothing
    // of what the script exports: kept as "nothing", every later event for this version would be
    // dropped as unhandled. The caller fails instead (a handler run is retried) and it is read again.
    if (!r.ok && r.limit) throw new Error(`what the script exports could not be read: ${r.error}`);
    const exp = r.ok ? r.exports : { fetch: false, components: [], events: [] };
    exportsCache.set(version, exp);
    if (r.ok) deps.exportsCache?.write(version, r.library, exp);
    return exp;
  }

  /** What an earlier start learnt this version exports, without loading it. */
  async function recall(integration: LoadedIntegration) {
    const version = integration.script?.version;
    if (!version || !deps.exportsCache) return undefined;
    let exp;
    try {
      exp = await deps.exportsCache.read(version);
    } catch {
      return undefined;
    }
    if (exp && !exportsCache.has(version)) exportsCache.set(version, exp);
    return exportsCache.get(version);
  }

  return {
    exportsOf,
    recall,

    /**
     * Whether this integration's current script handles `type`, as far as known without running
     * anything: undefined while its exports have not been read yet (see exportsOf).
     */
    handlesKnown(integration: LoadedIntegration, type: string): boolean | undefined {
      if (!integration.script) return false;
      if (!scopesAllow(integration.manifest.scopes as string[], type)) return false;
      return exportsCache.get(integration.script.version)?.events.includes(type);
    },

    forgetVersion(version: string): void {
      exportsCache.delete(version);
    },
  };
}
