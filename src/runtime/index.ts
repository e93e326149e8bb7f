/**
 * The runtime: envelopes in, integration code run in the sandbox, responses out; platform events
 * fanned out to the installations whose integrations handle them. Attaches `services.runtime` and
 * `services.invocations` (reads of what it recorded) and serves the runtime endpoint, the public
 * endpoints (routes.ts) and the invocation log API (log-routes.ts).
 */
import { concerns, WEBHOOK_INTEGRATION } from '../installations/index.ts';
import type { EventHandlers, RunOutcome } from '../events/index.ts';
import type { LoadedIntegration } from '../registry/index.ts';
import { defineModule } from '../module/contract.ts';
import { createRuntime, type Runtime } from './service.ts';
import { runtimeRoutes } from './routes.ts';
import { logRoutes } from './log-routes.ts';
import { createInvocations, type Invocations } from './invocations.ts';
import { integrationAnswerHeaders } from '../http/origins.ts';
import { guestLibraryId } from '../sandbox/index.ts';
import { createExportsCache } from './exports-cache.ts';
import { join } from 'node:path';
import { invocationTokenTtl } from './environment.ts';

export { createRuntime, toResponse, newRequestId, type Runtime, type Invocation, type InvocationNotice } from './service.ts';
export { createInvocations, type Invocations, type InvocationView, type InvocationFilter } from './invocations.ts';
export { logRoutes } from './log-routes.ts';
export { decodeEnvelope, encodeEnvelope } from './envelope.ts';
export { buildEnvironment, installationEndpoint, installationLocation, integrationEndpoint, invocationTokenTtl, runtimeEndpoint } from './environment.ts';
export { runtimeMigrations } from './schema.ts';
export { RUNTIME_VERSIONS } from './routes.ts';
export { renderContextFor, GITBOOK_BLOCK_CONTEXT } from './render-context.ts';

declare module '../module/contract.ts' {
  interface Capabilities {
    runtime?: Runtime;
    /** Reads of the invocations table (the runtime writes it; the log API, the live feed and retention read it). */
    invocations?: Invocations;
    /** Who handles platform events among the installed integrations, and runs them (read by events). */
    eventHandlers?: EventHandlers;
  }
}

export const runtimeModule = defineModule({
  name: 'runtime',
  provides: ['runtime', 'invocations', 'eventHandlers', 'onSandboxLog'],
  needs: ['registry', 'installations', 'sandbox'],
  async start(services) {
    const sandboxLimits = services.config.sandbox;
    const stops: Array<() => void> = [];
    const { installations, registry } = services;
    const exportsCache = createExportsCache(join(services.config.data_dir, 'cache'), guestLibraryId, (e) =>
      services.log.warn('the exports cache cannot be used', { error: e.message }),
    );
    const runtime = createRuntime({
      database: services.store.database,
      log: services.log,
      publicUrl: () => services.config.publicUrl,
      registry,
      sandbox: services.sandbox,
      installations,
      tokenTtlMs: invocationTokenTtl(sandboxLimits),
      publicAnswerHeaders: (headers, origin) => integrationAnswerHeaders(headers, origin, services),
      organization: () => services.config.gitbook.organization,
      logBudget: {
        perInvocation: sandboxLimits.log_bytes,
        perMinute: sandboxLimits.log_bytes_per_minute,
        diskReserve: sandboxLimits.log_disk_reserve,
        dataDir: services.store.localDir,
      },
      exportsCache,
    });
    services.runtime = runtime;
    services.invocations = createInvocations(services.store.database);
    services.onSandboxLog = (e) => runtime.appendLateLog(e.requestId, e.line);
    // The installation's lifecycle events (installation_setup and the like) once the step has
    // committed: recorded per installation, never blocking the step's caller.
    stops.push(
      installations.onChange(
        (change) => {
          if (change.kind !== 'installed' && change.kind !== 'configured') return;
          void (async () => {
            for (const event of change.emit) {
              try {
                await runtime.emit(change.installation, event);
              } catch (e) {
                services.log.warn('installation event failed', { installation: change.installation.id, type: event.type, error: (e as Error).message });
              }
            }
          })();
        },
        { afterCommit: true },
      ),
    );
    const eventHandlers: EventHandlers = {
      /**
       * A platform event is owed to every active installation whose integration handles its type
       * and whose scopes allow it (only the named one when the event carries an installationId).
       * An integration whose exports are not known yet counts: if it has no handler after all, its
       * run is dropped when it comes up.
       */
      targets(event) {
        const integrations = new Set(
          registry
            .list()
            .filter((s) => s.current && runtime.handlesKnown(s.current, event.type) !== false)
            .map((s) => s.name),
        );
        // While the integrations load at start, one not loaded yet counts too (its run waits for it,
        // and is dropped if it has no handler after all); the built-in webhook integration never has one.
        const starting = !registry.readiness().ready;
        if (!integrations.size && !starting) return [];
        const only = typeof event.installationId === 'string' && event.installationId ? event.installationId : undefined;
        return installations
          .active()
          .filter(
            (i) =>
              (integrations.has(i.integration) || (starting && i.integration !== WEBHOOK_INTEGRATION && !registry.get(i.integration))) &&
              (only === undefined ? concerns(i, event) : i.id === only),
          )
          .map((i) => ({ installationId: i.id, integration: i.integration }));
      },
      /** Run one installation's handler; outcomes are recorded as invocations carrying the eventId. */
      async run(installationId, event): Promise<RunOutcome> {
        const installation = await installations.find(installationId);
        if (!installation || installation.status === 'uninstalled') return { kind: 'gone', reason: `installation ${installationId} was uninstalled` };
        const r = await runtime.emit(installation, event);
        if (r.skipped) return { kind: 'skip', reason: r.skipped };
        const failed = Boolean(r.error) || (r.status ?? 500) >= 500;
        return {
          kind: 'ran',
          ok: !failed,
          invocationId: r.invocationId ?? null,
          error: failed ? (r.error ? `${r.error.kind}: ${r.error.message}` : `the handler answered ${r.status}`) : undefined,
        };
      },
    };
    services.eventHandlers = eventHandlers;
    // What each integration exports, as an earlier start read it, so events know without a sandbox
    // round trip which installations handle them. Nothing is loaded in an isolate here (isolates
    // start on first use): a version never read gets runs that are dropped if unneeded, and is read
    // (and remembered) when the first one runs. A changed version is read at once (the registry
    // loaded it in the sandbox already, to check it).
    const warm = (i: LoadedIntegration | undefined, changed: boolean) => {
      if (!i?.script) return;
      (changed ? runtime.exportsOf(i) : runtime.recall(i)).catch(() => undefined);
    };
    for (const s of registry.list()) warm(s.current, false);
    registry.onChange((_name, current) => warm(current, registry.readiness().ready));
    if (!services.processes?.index) {
      // Once a while after the start, then every few hours (one process of several does it).
      const first = setTimeout(() => exportsCache.prune(), 60_000);
      const every = setInterval(() => exportsCache.prune(), 6 * 60 * 60_000);
      first.unref();
      every.unref();
      stops.push(() => (clearTimeout(first), clearInterval(every)));
    }
    // Records answered but not yet committed are written before the database closes.
    return async () => {
      for (const stop of stops) stop();
      await runtime.flush();
    };
  },
  routes(app, services) {
    runtimeRoutes(app, services);
    logRoutes(app, services);
  },
});
