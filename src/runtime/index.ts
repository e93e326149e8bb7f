/**
 * The runtime: envelopes in, integration code run in the sandbox, responses out; platform events
 * fanned out to the installations whose integrations handle them.
 */
import { concerns, type Installations } from '../installations/index.ts';
import type { Registry } from '../registry/index.ts';
import type { Sandbox } from '../sandbox/index.ts';
import type { Module, Services } from '../services.ts';
import { createRuntime, type Runtime } from './service.ts';
import { runtimeRoutes } from './routes.ts';
import { integrationAnswerHeaders } from '../http/origins.ts';

export { createRuntime, toResponse, newRequestId, type Runtime, type Invocation, type InvocationNotice } from './service.ts';
export { createInvocations, logRoutes, invocationFilterParams, type Invocations, type InvocationView, type InvocationFilter } from './invocations.ts';
export { decodeEnvelope, encodeEnvelope, readBodyLimited } from './envelope.ts';
export { buildEnvironment, installationEndpoint, integrationEndpoint, runtimeEndpoint } from './environment.ts';
export { runtimeMigrations } from './schema.ts';
export { RUNTIME_VERSIONS } from './routes.ts';

export const runtimeModule: Module = {
  name: 'runtime',
  async start(services: Services) {
    const sandboxLimits = services.config.sandbox;
    const installations = services.installations as Installations;
    const runtime = createRuntime({
      db: services.store.db,
      log: services.log,
      publicUrl: () => services.config.publicUrl,
      registry: services.registry as Registry,
      sandbox: services.sandbox as Sandbox,
      installations,
      tokenTtlMs: sandboxLimits.wall_time + sandboxLimits.wait_until + 60_000,
      publicAnswerHeaders: (headers, req) => integrationAnswerHeaders(headers, req, services),
      oauthStateInstallation: (state) => (services.oauthStates as { installationOf?(s: string): string | undefined } | undefined)?.installationOf?.(state),
      logBudget: {
        perInvocation: sandboxLimits.log_bytes,
        perMinute: sandboxLimits.log_bytes_per_minute,
        diskReserve: sandboxLimits.log_disk_reserve,
        dataDir: services.config.data_dir,
      },
    });
    services.runtime = runtime;
    services.onSandboxLog = (e: { requestId: string; line: import('../sandbox/index.ts').LogLine }) => runtime.appendLateLog(e.requestId, e.line);
    services.eventHandlers = {
      /**
       * A platform event reaches every active installation whose integration handles its type and
       * whose scopes allow it (only the named one when the event carries an installationId).
       * Outcomes are recorded as invocations carrying the eventId.
       */
      async dispatch(event: { type: string; installationId?: unknown; [k: string]: unknown }, eventId: string): Promise<void> {
        const targets = installations
          .list({ status: 'active' })
          .filter((i) => (typeof event.installationId === 'string' && event.installationId ? i.id === event.installationId : concerns(i, event)));
        await Promise.all(
          targets.map((i) =>
            runtime.emit(i, { ...event, eventId }).catch((e: Error) => services.log.warn('event handler failed', { installation: i.id, error: e.message })),
          ),
        );
      },
    };
    // Records answered but not yet committed are written before the database closes.
    return () => runtime.flush();
  },
  routes: runtimeRoutes,
};
