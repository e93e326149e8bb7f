/**
 * When the sender looks for due work: a pump (on a wake, when a record turn finds a retry due
 * already, on the timer) claims what there is room for and starts what has a slot, one pump at a
 * time (a wake meanwhile runs it again); and one timer, armed for the earliest scheduled retry.
 * The sender does not poll.
 */
import type { Logger } from '../log/index.ts';
import { LOCK_BUSY, type Database } from '../store/contract.ts';
import type { Queue } from './queue.ts';
import type { AheadQueue } from './sender-ahead.ts';
import type { WebhooksConfig } from './sender-leases.ts';
import type { Slots } from './sender-slots.ts';

export interface Schedule {
  /** Look for due work now (or again once the pump running now is done). */
  pump(): void;
  /** Arm the timer for the earliest due delivery after `now` (none while the sender is full: a completion will pump). */
  arm(now: number): void;
  /** Stop: no timer any more. */
  cancel(): void;
}

export interface ScheduleDeps {
  queue: Queue;
  database: Database;
  config: () => WebhooksConfig;
  clock: () => number;
  slots: Slots;
  ahead: AheadQueue;
  stopped(): boolean;
  log: Logger;
  health?: { failed(error: unknown): void };
}

const MAX_TIMER = 60 * 60_000;

export function createSchedule(deps: ScheduleDeps): Schedule {
  const { queue, database, clock, slots, ahead, log } = deps;
  let timer: NodeJS.Timeout | undefined;
  let pumping = false;
  let again = false;

  function arm(now: number): void {
    if (timer) clearTimeout(timer);
    timer = undefined;
    if (deps.stopped() || slots.inFlight() + ahead.count() >= 2 * deps.config().concurrency) return; // a completion will pump
    const next = queue.nextDueAfter(now);
    if (next === undefined) return;
    timer = setTimeout(pump, Math.min(Math.max(next - now, 0), MAX_TIMER));
    timer.unref();
  }

  function pump(): void {
    if (deps.stopped()) return;
    if (pumping) {
      again = true;
      return;
    }
    pumping = true;
    void pumpNow();
  }

  async function pumpNow(): Promise<void> {
    try {
      do {
        again = false;
        const now = clock();
        // The write lock only when there may be something to claim (a wake after every ingest
        // commit would otherwise take it for nothing); queued only once committed.
        const claimed = ahead.worthClaiming(now) ? await database.transactionUnlessBusy((tx) => ahead.claimDue(tx, now)) : [];
        if (claimed === LOCK_BUSY) {
          // Another process is committing: try again next turn, without waiting for its lock here.
          setImmediate(pump);
          break;
        }
        ahead.add(claimed);
        ahead.drainAll();
        arm(now);
      } while (again && !deps.stopped());
    } catch (e) {
      // Fail safe: a database hiccup must not stop delivery for good; try again shortly.
      deps.health?.failed(e);
      log.error('delivery scheduler failed; retrying in 1 s', { error: e as Error });
      if (timer) clearTimeout(timer);
      timer = setTimeout(pump, 1000);
      timer.unref();
    } finally {
      pumping = false;
    }
  }

  return {
    pump,
    arm,
    cancel() {
      if (timer) clearTimeout(timer);
    },
  };
}
