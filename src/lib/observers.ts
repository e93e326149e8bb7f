/**
 * Listeners to something a module tells about (an invocation recorded, an attempt made, an
 * integration reloaded). A listener that throws is logged and the others still hear: an observer's
 * bug must not break the work it watches.
 */
import type { Logger } from '../log/index.ts';

export interface Observers<A extends unknown[]> {
  /** Adds a listener; returns what removes it. */
  add(listener: (...args: A) => void): () => void;
  /** Tells every listener. Never throws. */
  notify(...args: A): void;
  readonly size: number;
}

/**
 * `failed` is the log message of a listener that threw; `fields`, what else the log line says
 * about the notice it failed on.
 */
export function createObservers<A extends unknown[]>(log: Logger, failed: string, fields?: (...args: A) => Record<string, unknown>): Observers<A> {
  const listeners = new Set<(...args: A) => void>();
  return {
    add(listener) {
      listeners.add(listener);
      return () => void listeners.delete(listener);
    },
    notify(...args) {
      for (const l of listeners) {
        try {
          l(...args);
        } catch (e) {
          log.error(failed, { ...fields?.(...args), error: e as Error });
        }
      }
    },
    get size() {
      return listeners.size;
    },
  };
}
