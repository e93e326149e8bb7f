/**
 * The runtime's other paths in: a `ui_render` of one component for an installation, and a platform
 * event delivered to an installation's `events` handlers (when it has one for the type and its
 * scopes allow it). Both wait for the invocation's record before they answer.
 */
import type { Installation } from '../installations/index.ts';
import { scopesAllow } from '../installations/index.ts';
import type { LoadedIntegration } from '../registry/index.ts';
import type { Envelope, InvocationResult } from '../sandbox/index.ts';
import type { Invoke } from './invoke.ts';
import { toResponse } from './public-fetch.ts';
import { runnable } from './runnable.ts';
import type { RuntimeDeps } from './service-deps.ts';

export function createPlatformEvents(
  deps: Pick<RuntimeDeps, 'installations' | 'registry'>,
  run: {
    invoke: Invoke;
    environmentFor: (integration: LoadedIntegration, installation?: Installation) => Record<string, unknown>;
    loaded: (name: string) => Promise<LoadedIntegration>;
    exportsOf: (integration: LoadedIntegration) => Promise<{ events: string[] }>;
  },
) {
  const { invoke, environmentFor, loaded, exportsOf } = run;
  return {
    /** A ui_render event: initialState / action / render of one component. */
    async render(
      installationId: string,
      input: { componentId: string; props?: unknown; state?: unknown; action?: unknown; context?: unknown },
    ): Promise<Response> {
      const installation = deps.installations.require(installationId);
      runnable(installation);
      const integration = await loaded(installation.integration);
      const envelope: Envelope = {
        event: {
          type: 'ui_render',
          componentId: input.componentId,
          props: input.props ?? {},
          ...(input.state !== undefined ? { state: input.state } : {}),
          ...(input.action !== undefined ? { action: input.action } : {}),
          context: input.context ?? { type: 'api' },
        },
        environment: environmentFor(integration, installation),
      };
      const { id, result } = await invoke({ integration, installation, envelope });
      return toResponse(result, id);
    },

    /**
     * Deliver a platform event to one installation's `events` handlers (when it has one for the
     * type and its scopes allow it). Returns the invocation, or why it was skipped.
     */
    async emit(
      installation: Installation,
      event: { type: string; eventId?: unknown; [k: string]: unknown },
    ): Promise<{ invocationId?: string; status?: number; error?: InvocationResult['error']; skipped?: string }> {
      // Owed from before a restart, it may run while the integrations still load: wait for this one.
      const integration = deps.registry.get(installation.integration) ?? (await deps.registry.whenLoaded(installation.integration));
      if (!integration?.script) return { skipped: 'no script' };
      if (!scopesAllow(integration.manifest.scopes as string[], event.type)) return { skipped: 'scope' };
      const exp = await exportsOf(integration);
      if (!exp.events.includes(event.type)) return { skipped: 'no handler' };
      const current = deps.installations.get(installation.id) ?? installation;
      const { id, result } = await invoke({
        integration,
        installation: current,
        envelope: { event, environment: environmentFor(integration, current) },
        eventId: typeof event.eventId === 'string' ? event.eventId : undefined,
      });
      return { invocationId: id, status: result.status, error: result.error };
    },
  };
}
