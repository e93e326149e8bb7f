/**
 * The registry: integrations loaded from the integrations directory, bundled for the sandbox and
 * followed while the server runs. Attaches `services.registry` and serves
 * `GET /api/v1/integrations` and `GET /api/v1/integrations/:name`.
 */
import { echoOf } from '../log/index.ts';
import type { Parking } from '../process/messages.ts';
import { dirname, join } from 'node:path';
import type { H3 } from 'h3';
import { readDotenv } from '../config/env.ts';
import { SwitchyardError } from '../errors.ts';
import { route } from '../http/route.ts';
import { integrationAnswer, integrationListAnswer } from './api.ts';
import { defineModule, type Services } from '../module/contract.ts';
import { createRegistry, LOAD_WAIT_MS, type GuestScript, type IntegrationState, type Registry } from './registry.ts';
import { BUILTIN_INTEGRATIONS, builtinManifest } from './shipped.ts';

export { BUILTIN_DIR, createRegistry, isIntegrationFolderName, LOAD_WAIT_MS } from './registry.ts';
export { BUILTIN_INTEGRATIONS, builtinManifest, readShippedIntegrations, SHIPPED_INTEGRATIONS, shippedFiles, type ShippedFiles } from './shipped.ts';
export type { GuestScript, LoadedIntegration, IntegrationState, Readiness, Registry, RegistryOptions } from './registry.ts';
export { createBundleCache, type BundleCache } from './bundle-cache.ts';
import { readinessView } from './readiness.ts';
import { watchPeers } from './peers.ts';
import { useNodeId } from '../store/lease-owner.ts';

export { readinessView };
export { bundleScript, contentHash, formatBytes, RUNTIME_MODULE, type Bundle, type BundleResult } from './bundle.ts';
export { prepareFolder, type Preparation, type PreparedIntegration } from './prepare.ts';

/** Load a script (in the sandbox); an error message when it fails. */
export type VerifyScript = (script: GuestScript) => Promise<string | undefined>;

declare module '../module/contract.ts' {
  interface Capabilities {
    registry?: Registry;
  }
}

/**
 * New versions swap in only when their script loads: `services.verifyScript` (the sandbox module's
 * check, or a stand-in's). Looked up at each load, so a sandbox module started after this one still
 * guards every hot reload (start it first to guard the first load too). No verifier: nothing to
 * verify against, the version swaps in after validation and bundling.
 */
export function verifierOf(services: Services): VerifyScript {
  return async (script) => services.verifyScript?.(script);
}

/** The environment secrets are read from: a `.env` beside config.yaml, the real environment wins. */
export function secretsEnvironment(services: Pick<Services, 'config'>): Record<string, string | undefined> {
  const base = services.config.source ? dirname(services.config.source) : process.cwd();
  return { ...readDotenv(join(base, '.env')), ...process.env };
}

/** The JSON shape of one integration in the management API. */
export function integrationView(s: IntegrationState, parked?: Parking) {
  const m = s.current?.manifest;
  const version = s.current ? (s.current.script?.version ?? null) : null;
  // Parked for a version no longer current means nothing any more: the new version runs.
  const park = parked && (!parked.version || parked.version === version) ? parked : undefined;
  return {
    name: s.name,
    title: m?.title ?? null,
    status: s.status,
    /** Set while the supervisor refuses to run this version (its code kept taking serving processes down). */
    parked: park ? { reason: park.reason, since: new Date(park.at).toISOString() } : null,
    /** True when a version is serving (also while the latest change is rejected). */
    serving: Boolean(s.current),
    /** True when the version serving is the one built into the program (no folder of that name serves). */
    builtin: Boolean(s.current?.builtin),
    version: s.current ? (s.current.script?.version ?? null) : null,
    dir: s.dir,
    loadedAt: s.current ? new Date(s.current.loadedAt).toISOString() : null,
    updatedAt: new Date(s.updatedAt).toISOString(),
    errors: s.errors,
    warnings: s.warnings,
    manifest: m
      ? {
          description: m.description,
          summary: m.summary ?? null,
          organization: m.organization,
          visibility: m.visibility,
          categories: m.categories ?? [],
          script: m.script ?? null,
          icon: m.icon ?? null,
          previewImages: m.previewImages ?? [],
          externalLinks: m.externalLinks ?? [],
          /** Names only: values never leave the server. */
          secrets: Object.keys(m.secrets ?? {}),
        }
      : null,
    scopes: m?.scopes ?? [],
    blocks: m?.blocks ?? [],
    configurations: m?.configurations ?? {},
  };
}
export type IntegrationView = ReturnType<typeof integrationView>;

/**
 * While the start-up load runs, management routes that need integrations wait for them (bounded by
 * LOAD_WAIT_MS, then 503 `starting`): the per-integration API (`/api/v1/integrations/<name>/...`)
 * for that integration, installations (configuration is checked against a manifest, an
 * installation token's scopes come from it) and the catalogue (what is public) for all of them. Everything else answers at once:
 * events are taken (handler runs for integrations not loaded yet are owed and run once they are).
 */
export function awaitIntegrationsFor(registry: Registry): (pathname: string) => Promise<void> | undefined {
  // Once ready, every request goes straight on (no promise, nothing computed).
  let ready = false;
  void registry.whenReady().then((r) => (ready = r));
  return (pathname) => (ready ? undefined : untilNeededLoaded(registry, pathname));
}

/** What a management request waits for while the start-up load runs (see awaitIntegrationsFor). */
async function untilNeededLoaded(registry: Registry, pathname: string): Promise<void> {
  if (registry.readiness().ready) return;
  const own = /^\/api\/v1\/integrations\/([^/]+)\/./.exec(pathname);
  if (own) {
    await registry.whenLoaded(decodeURIComponent(own[1]));
    return;
  }
  if (!/^\/api\/v1\/(installations|catalogue)(\/|$)/.test(pathname)) return;
  if (await registry.whenReady(LOAD_WAIT_MS)) return;
  const r = registry.readiness();
  throw new SwitchyardError('starting', `the server is starting: ${r.done} of ${r.total} integrations loaded`, {
    headers: { 'retry-after': '1' },
    hint: 'try again in a moment; GET /readyz answers 200 once every integration is loaded',
  });
}

export const registryModule = defineModule({
  name: 'registry',
  provides: ['registry'],
  // Checks new versions with it when the server runs a sandbox (read at each check).
  uses: ['verifyScript'],
  async start(services) {
    const registry = await createRegistry({
      dir: services.config.integrations_dir,
      // Every serving process loads the same folder: only the first one reports it.
      log: (services.processes?.index ? echoOf(services.log) : services.log).child({ module: 'registry' }),
      env: secretsEnvironment(services),
      limits: services.config.sandbox,
      watch: true,
      verify: verifierOf(services),
      builtins: BUILTIN_INTEGRATIONS.map((name) => ({ name, manifest: builtinManifest(name) })),
      cacheDir: join(services.config.data_dir, 'cache'),
      pruneCache: !services.processes?.index,
      // The server listens while the integrations load; see awaitIntegrationsFor and /readyz.
      background: true,
      startAfter: services.listening,
    });
    services.registry = registry;
    services.awaitIntegrations = awaitIntegrationsFor(registry);
    services.readiness = () => readinessView(registry.readiness());
    const link = services.processes;
    if (link) void registry.whenReady().then((ready) => ready && link.loaded());
    // On PostgreSQL, other nodes may serve other versions of the same integrations: said in /healthz.
    const peers = services.store.shared
      ? watchPeers(services.store.database, registry, useNodeId(services.config.data_dir), services.log.child({ module: 'registry' }))
      : undefined;
    if (peers) services.peers = peers.view;
    return () => {
      peers?.stop();
      registry.close();
    };
  },
  routes(app: H3, services) {
    const parkedOf = (name: string) => services.processes?.parked().find((p) => p.name === name);
    const nameParam = { name: 'the integration (its folder name)' };
    route(
      app,
      {
        method: 'GET',
        path: '/api/v1/integrations',
        summary:
          'Integrations with their status (loading while the server starts, loaded, error, needs_configuration) and errors; `startup` says how far the start-up load is',
        auth: 'admin',
        response: integrationListAnswer,
      },
      () => {
        const registry = services.registry;
        return { integrations: registry.list().map((s) => integrationView(s, parkedOf(s.name))), startup: readinessView(registry.readiness()) };
      },
    );
    route(
      app,
      {
        method: 'POST',
        path: '/api/v1/integrations/:name/resume',
        summary: 'Run a parked integration again (the supervisor parks one whose code took down a serving process 3 times within a minute)',
        auth: 'admin',
        params: nameParam,
        response: integrationAnswer,
        responses: { '409': { description: 'Not parked' } },
      },
      ({ params }) => {
        const name = decodeURIComponent(params.name);
        if (!services.registry.state(name))
          throw new SwitchyardError('not_found', `integration "${name}" does not exist`, { hint: 'see `switchyard integrations list`' });
        const was = parkedOf(name);
        if (!was)
          throw new SwitchyardError('conflict', `integration "${name}" is not parked`, {
            hint: 'an integration is parked after its code takes down a serving process 3 times within a minute',
          });
        services.processes!.resume(name);
        return { integration: integrationView(services.registry.state(name)!) };
      },
    );
    route(
      app,
      {
        method: 'GET',
        path: '/api/v1/integrations/:name',
        summary: 'One integration: manifest summary, scopes, blocks, configurations, errors, parked',
        auth: 'admin',
        params: nameParam,
        response: integrationAnswer,
      },
      ({ params }) => {
        const name = decodeURIComponent(params.name);
        const s = services.registry.state(name);
        if (!s)
          throw new SwitchyardError('not_found', `integration "${name}" does not exist`, {
            hint: 'see `switchyard integrations list`; an integration is a folder in integrations_dir',
          });
        return { integration: integrationView(s, parkedOf(name)) };
      },
    );
  },
});
