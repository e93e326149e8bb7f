/**
 * The supervisor's stop: SIGTERM (or SIGINT) drains every serving process (each finishes what it
 * serves within `server.shutdown_timeout`; one that does not is killed a little later); a second
 * signal kills them at once. The supervisor goes on once the last serving process is gone
 * (supervisor.ts, its `finish`).
 */
import type { Logger } from '../log/index.ts';
import type { Slot } from './slots.ts';

/** What a serving process gets beyond shutdown_timeout before it is killed. */
const KILL_GRACE_MS = 3_000;

export interface Drain {
  /** A stop has begun: no serving process is started any more. */
  readonly stopping: boolean;
  /** Drain every serving process (once; later calls do nothing). */
  stop(why: string): void;
  /** SIGTERM and SIGINT: the first one drains, a second one kills. */
  listen(): void;
}

export function createDrain(
  slots: readonly Slot[],
  opts: {
    log: Logger;
    shutdownTimeoutMs: number;
    /** Told as the stop begins (the heartbeat stops). */
    onStop: () => void;
    /** No serving process runs when the stop begins: nothing to wait for. */
    finish: () => void;
  },
): Drain {
  const { log } = opts;
  let stopping = false;
  function stop(why: string): void {
    if (stopping) return;
    stopping = true;
    opts.onStop();
    log.info('shutting down', { reason: why });
    const live = slots.filter((s) => s.serving);
    if (!live.length) return opts.finish();
    for (const s of live) s.serving!.process.kill('SIGTERM');
    // Each process drains within shutdown_timeout; one that does not is killed a little later.
    const timer = setTimeout(() => {
      for (const s of slots) s.serving?.process.kill('SIGKILL');
    }, opts.shutdownTimeoutMs + KILL_GRACE_MS);
    timer.unref();
  }
  let signals = 0;
  const onSignal = (sig: string) => {
    if (++signals > 1) {
      log.warn('second signal: stopping now', { signal: sig });
      for (const s of slots) s.serving?.process.kill('SIGKILL');
      return;
    }
    stop(sig);
  };
  return {
    get stopping() {
      return stopping;
    },
    stop,
    listen() {
      process.on('SIGTERM', () => onSignal('SIGTERM'));
      process.on('SIGINT', () => onSignal('SIGINT'));
    },
  };
}
