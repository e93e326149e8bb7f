/**
 * Whether this process's event loop has been busy lately (performance.eventLoopUtilization): a
 * serving process at its CPU's limit asks the processes beside it for no delivery slots
 * (webhooks/slot-loans.ts): what it cannot take goes to them through the store.
 */

/** Busy: the event loop ran this much of the last window or more. */
export const BUSY_UTILIZATION = 0.8;
/** The window utilization is measured over (read at most once per window). */
export const BUSY_WINDOW_MS = 500;

/**
 * A reading of whether the loop has been busy lately: taken every BUSY_WINDOW_MS by an unref'd
 * timer, and at a call that comes a window or more after the last reading, so what it judges is
 * the last window or so, never the time since a reading long ago.
 */
export function loopBusy(clock: () => number = performance.now.bind(performance)): () => boolean {
  let mark = performance.eventLoopUtilization();
  let at = clock();
  let busy = false;
  const read = () => {
    const next = performance.eventLoopUtilization();
    busy = performance.eventLoopUtilization(next, mark).utilization >= BUSY_UTILIZATION;
    mark = next;
    at = clock();
  };
  setInterval(read, BUSY_WINDOW_MS).unref();
  return () => {
    if (clock() - at >= BUSY_WINDOW_MS) read();
    return busy;
  };
}

let shared: (() => boolean) | undefined;
/** One reading for the whole process, shared by its users. */
export function processLoopBusy(): boolean {
  shared ??= loopBusy();
  return shared();
}
