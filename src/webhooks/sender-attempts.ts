/**
 * The sender's attempts in flight: each runs one attempt of a claimed delivery (attempt.ts: sign,
 * POST, decide) in a slot already taken. The slot is freed, and handed to the next delivery
 * waiting for the origin, as soon as the HTTP exchange ends; the outcome then joins the turn's
 * record (sender-record.ts), without holding the slot.
 */
import type { Logger } from '../log/index.ts';
import { makeAttempt, type AttemptContext } from './attempt.ts';
import type { AttemptRecord, Claimed } from './queue.ts';
import type { AheadQueue } from './sender-ahead.ts';
import type { RecordTurn } from './sender-record.ts';
import type { Schedule } from './sender-schedule.ts';
import type { Slots } from './sender-slots.ts';

export interface Attempts {
  /**
   * Run one attempt of a claimed delivery (its slot already taken); resolves once the outcome is
   * recorded (undefined if it could not be).
   */
  start(c: Claimed, manual: boolean): Promise<AttemptRecord | undefined>;
  /** Stop: wait up to `graceMs` for the attempts in flight, then abort them and wait for them to end. */
  settle(graceMs: number): Promise<void>;
}

export interface AttemptsDeps {
  /** What each attempt is made with (attempt.ts); the signal is this module's, aborted by settle(). */
  context: Omit<AttemptContext, 'signal'>;
  slots: Slots;
  ahead: Pick<AheadQueue, 'drainOrigin'>;
  record: Pick<RecordTurn, 'push'>;
  schedule: Pick<Schedule, 'pump'>;
  log: Logger;
}

export function createAttempts(deps: AttemptsDeps): Attempts {
  const { slots, ahead, record, schedule, log } = deps;
  const { clock, stopped } = deps.context;
  const running = new Set<Promise<unknown>>();
  const abort = new AbortController();
  const context: AttemptContext = { ...deps.context, signal: abort.signal };

  return {
    start(c, manual) {
      const t0 = performance.now();
      const freeSlot = () => {
        slots.release(c.origin);
        slots.freed(c.origin, clock(), performance.now() - t0);
        ahead.drainOrigin(c.origin);
      };
      const p = makeAttempt(c, manual, context).then(
        (r) =>
          new Promise<AttemptRecord | undefined>((done) => {
            const slotMs = performance.now() - t0;
            freeSlot();
            if (!r) return done(undefined);
            record.push({ c, ...r, slotMs, done });
          }),
        (e) => {
          freeSlot();
          log.error('delivery attempt failed unexpectedly', { delivery: c.id, error: e as Error });
          if (!stopped()) setImmediate(schedule.pump);
          return undefined;
        },
      );
      running.add(p);
      void p.finally(() => running.delete(p));
      return p;
    },
    async settle(graceMs) {
      if (running.size) {
        let t: NodeJS.Timeout | undefined;
        await Promise.race([Promise.allSettled([...running]), new Promise((r) => (t = setTimeout(r, graceMs)))]);
        clearTimeout(t);
      }
      abort.abort();
      await Promise.allSettled([...running]);
    },
  };
}
