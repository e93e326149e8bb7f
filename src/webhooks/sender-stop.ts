/**
 * The sender's stop: no timer any more; what waits claimed ahead was never sent, so its leases go
 * back at once (another sender, or the next start, takes it without an interrupted attempt on
 * record); the attempts in flight get up to `graceMs`, then are abandoned (their leases are
 * recovered at the next start); what ended and is not written yet is written.
 */
import type { Logger } from '../log/index.ts';
import type { Database } from '../store/contract.ts';
import type { Queue } from './queue.ts';
import type { AheadQueue } from './sender-ahead.ts';
import type { Attempts } from './sender-attempts.ts';
import type { RecordTurn } from './sender-record.ts';
import type { Schedule } from './sender-schedule.ts';

export interface StopDeps {
  queue: Queue;
  database: Database;
  clock: () => number;
  /** This sender's lease owner. */
  owner: string;
  schedule: Pick<Schedule, 'cancel'>;
  ahead: Pick<AheadQueue, 'takeAll'>;
  attempts: Pick<Attempts, 'settle'>;
  record: Pick<RecordTurn, 'flush'>;
  log: Logger;
}

/** Called once the sender is marked stopped (it takes no more work). */
export async function stopSender(deps: StopDeps, graceMs: number): Promise<void> {
  deps.schedule.cancel();
  const waiting = deps.ahead.takeAll();
  if (waiting.length) {
    try {
      await deps.queue.giveBack(deps.database, waiting, deps.owner, deps.clock());
    } catch (e) {
      deps.log.warn('could not give back the deliveries claimed ahead; their leases run out instead', { error: e as Error, deliveries: waiting.length });
    }
  }
  await deps.attempts.settle(graceMs);
  // Anything ended but not yet written.
  await deps.record.flush();
}
