/**
 * Lease recovery: the webhook attempts and handler runs a serving process held leases on go back
 * (attempts recorded as interrupted and due again) as soon as the supervisor knows their holder is
 * gone, rather than when the leases run out: at start for this node's processes of the last run,
 * and at once for a serving process that dies, so another process sends them.
 */
import type { Logger } from '../log/index.ts';
import type { Store } from '../store/index.ts';
import { leftoverLeases, processLeases } from '../store/lease-owner.ts';
import { createQueue } from '../webhooks/queue.ts';
import { createHandlerRuns } from '../events/handler-runs.ts';

export interface LeaseRecovery {
  /** At start, before any serving process of this node runs: the leases left in the store belong to processes that are gone. */
  recoverLeftovers(): Promise<void>;
  /**
   * A serving process died: give back its leases. Answers how many deliveries were given back
   * (then the caller tells the others they are due); never throws (a failure is logged, and the
   * leases run out instead).
   */
  giveBack(pid: number | undefined): Promise<number>;
}

/** `due` tells every serving process that handler runs are due (when no delivery was given back with them). */
export function createLeaseRecovery(store: Store, opts: { maxAttempts: () => number; log: Logger; due: () => void }): LeaseRecovery {
  const { log } = opts;
  const queue = createQueue(store.database, { maxAttempts: opts.maxAttempts });
  const runs = createHandlerRuns(store.database, { maxAttempts: opts.maxAttempts });
  return {
    async recoverLeftovers() {
      const interrupted = await store.database.transaction((tx) => queue.recoverInterrupted(tx, Date.now(), leftoverLeases(store)));
      await runs.releaseOwnedBy(leftoverLeases(store));
      if (interrupted) log.warn('attempts interrupted by the last stop are sent again', { deliveries: interrupted });
    },
    async giveBack(pid) {
      let released = 0;
      try {
        released = await store.database.transaction((tx) => queue.recoverInterrupted(tx, Date.now(), processLeases(pid)));
        void runs.releaseOwnedBy(processLeases(pid)).then(
          (n) => {
            if (n && !released) opts.due();
          },
          (e) => log.error('could not give back the handler run leases of a dead serving process; they run out instead', { error: e as Error }),
        );
      } catch (e) {
        log.error('could not give back the leases of a dead serving process; they run out instead', { error: e as Error });
      }
      return released;
    },
  };
}
