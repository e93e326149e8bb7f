/**
 * Whether this process's event loop has been busy lately (performance.eventLoopUtilization): a
 * serving process at its CPU's limit lets the processes beside it take work (webhooks/slot-loans.ts
 * asks for no slots; http/rebalance.ts lets a keep-alive connection go).
 */

/** Busy: the event loop ran this much of the last window or more. */
export const BUSY_UTILIZATION = 0.8;
/** The window utilization is measured over (read at most once per window). */
export const BUSY_WINDOW_MS = 500;

export function loopBusy(clock: () => number = performance.now.bind(performance)): () => boolean {
  let mark = performance.eventLoopUtilization();
  let at = clock();
  let busy = false;
  return () => {
    const now = clock();
    if (now - at >= BUSY_WINDOW_MS) {
      const next = performance.eventLoopUtilization();
      busy = performance.eventLoopUtilization(next, mark).utilization >= BUSY_UTILIZATION;
      mark = next;
      at = now;
    }
    return busy;
  };
}

let shared: (() => boolean) | undefined;
/** One reading for the whole process, shared by its users. */
export function processLoopBusy(): boolean {
  shared ??= loopBusy();
  return shared();
}
