/**
 * The supervisor's serving process slots: one per `server.processes`, each holding the serving
 * process running in it now (replaced when it dies) and what the supervisor knows of it. The parts
 * of the supervisor (heartbeat.ts, readiness.ts, drain.ts, metrics-relay.ts) read and write them.
 */
import type { Worker as ServingProcess } from 'node:cluster';
import type { ToServing } from './messages.ts';

export type { ServingProcess };

export interface Slot {
  index: number;
  serving: ServingProcess | null;
  lastPong: number;
  ready: boolean;
  /** Killed for not answering the heartbeat. */
  unresponsive: boolean;
  /** Deaths in a row before becoming ready (a process that cannot start must not spin). */
  failedStarts: number;
  /** It has loaded its integrations (see /readyz). */
  loaded: boolean;
}

export function createSlots(count: number): Slot[] {
  return Array.from({ length: count }, (_, index) => ({
    index,
    serving: null,
    lastPong: 0,
    ready: false,
    unresponsive: false,
    failedStarts: 0,
    loaded: false,
  }));
}

/** Tell one serving process, if it is still connected (a message to one that is going is dropped). */
export function send(w: ServingProcess | null, msg: ToServing): void {
  if (w?.isConnected()) w.send(msg, () => {});
}

/** Tell every serving process running now. */
export function broadcast(slots: readonly Slot[], msg: ToServing): void {
  for (const s of slots) send(s.serving, msg);
}
