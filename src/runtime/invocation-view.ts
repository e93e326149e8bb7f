/**
 * The JSON shape of one invocation as the logs API shows it. Free of Node imports so the web
 * console's browser code shares it instead of copying.
 */

/** One invocation as `GET /api/v1/logs` and `switchyard logs --json` show it (stable shape). */
export interface InvocationView {
  requestId: string;
  integration: string;
  installationId: string | null;
  /** `fetch`, `ui_render` or the platform event type. */
  eventType: string;
  eventId: string | null;
  status: number;
  /** `ok`, `http_error` (status >= 400 without a fault), or the fault: `exception`, `limit`, `crash`, `load`. */
  outcome: string;
  durationMs: number;
  cpuMs: number;
  error: { kind: string; message: string; limit: string | null; stack: string | null } | null;
  logs: Array<{ time: string; level: string; message: string }>;
  createdAt: string;
  /** Pass as `after` to the live feed to resume after this invocation. */
  cursor: string;
}
