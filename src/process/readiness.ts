/**
 * Readiness across the serving processes: each tells the supervisor when its start-up pass is over
 * (`loaded`); the supervisor tells every one of them whether all have (`readiness`, for /readyz),
 * whenever that changes, and logs `switchyard ready` the first time, with the time since it started.
 */
import type { Logger } from '../log/index.ts';
import { broadcast, type Slot } from './slots.ts';

export interface Readiness {
  /** Whether every slot runs a serving process that has loaded its integrations (told to a new one). */
  readonly allLoaded: boolean;
  /** A slot's process loaded, died or was replaced: tell everyone if the answer changed. */
  changed(): void;
}

export function createReadiness(slots: readonly Slot[], opts: { log: Logger; startedAt: number }): Readiness {
  let allLoaded = false;
  let everLoaded = false;
  return {
    get allLoaded() {
      return allLoaded;
    },
    changed() {
      const now = slots.every((s) => s.serving && s.loaded);
      if (now === allLoaded) return;
      allLoaded = now;
      broadcast(slots, { t: 'readiness', ready: now });
      if (now && !everLoaded) {
        everLoaded = true;
        opts.log.info('switchyard ready: every serving process has loaded its integrations', { processes: slots.length, ms: Date.now() - opts.startedAt });
      }
    },
  };
}
