/** How far the start-up load is, as the status views show it (the registry hands it to /healthz as `services.readiness`). */
import type { Readiness } from './registry-types.ts';

/** The start-up load as the status views show it (`/healthz`, `/readyz`, `GET /api/v1/integrations`). */
export function readinessView(r: Readiness) {
  return {
    ready: r.ready,
    loaded: r.loaded,
    failed: r.failed,
    done: r.done,
    total: r.total,
    /** Milliseconds the start-up load took (or has taken so far). */
    ms: (r.readyAt ?? Date.now()) - r.startedAt,
  };
}
