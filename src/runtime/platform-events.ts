/**
 * The runtime's other paths in: a `ui_render` of one component for an installation, and a platform
 * event delivered to an installation's `events` handlers (when it has one for the type and its
 * scopes allow it). Both wait for the invocation's record before they answer.
 *
 * A render is also the `ui_render` event of spec 6.1 ("the integration's UI component is
 * rendered"): once the render has answered, an `events.ui_render` handler the integration defines
 * runs as an invocation of its own, which the render never waits for (see announceRender).
 */
import type { Installation } from '../installations/index.ts';
import { scopesAllow } from '../installations/index.ts';
import type { LoadedIntegration } from '../registry/index.ts';
import type { Envelope, InvocationResult } from '../sandbox/index.ts';
import type { Invoke } from './invoke.ts';
import { toResponse } from './public-fetch.ts';
import { renderContextFor } from './render-context.ts';
import { runnable } from './runnable.ts';
import type { RuntimeDeps } from './service-deps.ts';

export function createPlatformEvents(
  deps: Pick<RuntimeDeps, 'installations' | 'registry' | 'log'>,
  run: {
    invoke: Invoke;
    environmentFor: (integration: LoadedIntegration, installation?: Installation) => Record<string, unknown>;
    loaded: (name: string) => Promise<LoadedIntegration>;
    exportsOf: (integration: LoadedIntegration) => Promise<{ events: string[] }>;
  },
) {
  const { invoke, environmentFor, loaded, exportsOf } = run;

  /**
   * Spec 6.1's `ui_render` event after a render: fire and forget. It starts once the render has its
   * answer, in its own invocation (recorded as `ui_render`, what it prints and throws in its record
   * and the server's log), so a slow or failing handler never delays or fails the render. GitBook's
   * runtime has no such event: a gitbook-manifest.yaml's handlers are not called.
   */
  function announceRender(integration: LoadedIntegration, installation: Installation, event: Envelope['event']): void {
    if (integration.dialect === 'gitbook') return;
    void (async () => {
      if (!(await exportsOf(integration)).events.includes('ui_render')) return;
      await invoke({ integration, installation, envelope: { event, environment: environmentFor(integration, installation), dispatch: 'events' } });
    })().catch((e: unknown) =>
      deps.log.warn('the ui_render handler could not run', { integration: integration.name, installation: installation.id, error: (e as Error).message }),
    );
  }

  return {
    /** A ui_render event: initialState / action / render of one component. */
    async render(
      installationId: string,
      input: { componentId: string; props?: unknown; state?: unknown; action?: unknown; context?: unknown },
    ): Promise<Response> {
      const installation = await deps.installations.require(installationId);
      runnable(installation);
      const integration = await loaded(installation.integration);
      const envelope: Envelope = {
        event: {
          type: 'ui_render',
          componentId: input.componentId,
          props: input.props ?? {},
          ...(input.state !== undefined ? { state: input.state } : {}),
          ...(input.action !== undefined ? { action: input.action } : {}),
          context: input.context ?? renderContextFor(integration, input.componentId),
        },
        environment: environmentFor(integration, installation),
      };
      const { id, result } = await invoke({ integration, installation, envelope });
      // A component that was found and ran (an error answer is no render).
      if (result.status < 400) announceRender(integration, installation, envelope.event);
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
      const current = (await deps.installations.find(installation.id)) ?? installation;
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
