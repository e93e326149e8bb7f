/**
 * The JSON shape of a handler run as the management API shows it (documented in the README). Free
 * of Node imports so the web console's browser code shares it.
 */
import type { DeliveryStatus } from '../webhooks/views.ts';

/** One event owed to one installation's handler: its status, attempts and schedule, like a webhook delivery's. */
export interface HandlerRun {
  id: string;
  eventId: string;
  eventType: string;
  installationId: string;
  integration: string;
  /** `delivered`: the handler ran without a fault; `failed`: every attempt failed (replayable); `cancelled`: the installation is gone. */
  status: DeliveryStatus;
  /** Attempts made so far (each is an invocation carrying the eventId and installationId). */
  attemptCount: number;
  maxAttempts: number;
  nextAttemptAt: string | null;
  /** True while a process holds its lease (an attempt in flight, or a dead process's lease not yet run out). */
  running: boolean;
  /** Request id of the latest attempt's invocation (`switchyard logs show <id>`). */
  lastInvocation: string | null;
  lastError: string | null;
  createdAt: string;
  updatedAt: string;
  completedAt: string | null;
}
