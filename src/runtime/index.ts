/**
 * The runtime: envelopes in, integration code run in the sandbox, responses out; platform events
 * fanned out to the installations whose integrations handle them.
 */
import { concerns, type Installations } from '../installations/index.ts';
import type { EventHandlers, RunOutcome } from '../events/index.ts';
import type { LoadedIntegration, Registry } from '../registry/index.ts';
import type { Sandbox } from '../sandbox/index.ts';
import type { Module, Services } from '../services.ts';
import { createRuntime, type Runtime } from './service.ts';
import { runtimeRoutes } from './routes.ts';
import { integrationAnswerHeaders } from '../http/origins.ts';
import { invocationTokenTtl } from './environment.ts';

export { createRuntime, toResponse, newRequestId, type Runtime, type Invocation, type InvocationNotice } from './service.ts';
export { createInvocations, logRoutes, invocationFilterParams, type Invocations, type InvocationView, type InvocationFilter } from './invocations.ts';
export { decodeEnvelope, encodeEnvelope, readBodyLimited } from './envelope.ts';
export { buildEnvironment, installationEndpoint, installationLocation, integrationEndpoint, invocationTokenTtl, runtimeEndpoint } from './environment.ts';
export { runtimeMigrations } from './schema.ts';
export { RUNTIME_VERSIONS } from './routes.ts';

export const runtimeModule: Module = {
  name: 'runtime',
  async start(services: Services) {
    const sandboxLimits = services.config.sandbox;
    const installations = services.installations as Installations;
    const registry = services.registry as Registry;
    const runtime = createRuntime({
      db: services.store.db,
      log: services.log,
      publicUrl: () => services.config.publicUrl,
      registry,
      sandbox: services.sandbox as Sandbox,
      installations,
      tokenTtlMs: invocationTokenTtl(sandboxLimits),
      publicAnswerHeaders: (headers, req) => integrationAnswerHeaders(headers, req, services),
      organization: () => services.config.gitbook.organization,
      logBudget: {
        perInvocation: sandboxLimits.log_bytes,
        perMinute: sandboxLimits.log_bytes_per_minute,
        diskReserve: sandboxLimits.log_disk_reserve,
        dataDir: services.config.data_dir,
      },
    });
    services.runtime = runtime;
    services.onSandboxLog = (e: { requestId: string; line: import('../sandbox/index.ts').LogLine }) => runtime.appendLateLog(e.requestId, e.line);
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
        if (!integrations.size) return [];
        const only = typeof event.installationId === 'string' && event.installationId ? event.installationId : undefined;
        return installations
          .list({ status: 'active' })
          .filter((i) => integrations.has(i.integration) && (only === undefined ? concerns(i, event) : i.id === only))
          .map((i) => ({ installationId: i.id, integration: i.integration }));
      },
      /** Run one installation's handler; outcomes are recorded as invocations carrying the eventId. */
      async run(installationId, event): Promise<RunOutcome> {
        const installation = installations.get(installationId);
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
    // Read each integration's exports now, so events know without a sandbox round trip which
    // installations handle them (a version not read yet gets runs that are dropped if unneeded).
    const warm = (i: LoadedIntegration | undefined) => {
      if (i?.script) runtime.exportsOf(i).catch(() => undefined);
    };
    for (const s of registry.list()) warm(s.current);
    registry.onChange((_name, current) => warm(current));
    // Records answered but not yet committed are written before the database closes.
    return () => runtime.flush();
  },
  routes: runtimeRoutes,
};
