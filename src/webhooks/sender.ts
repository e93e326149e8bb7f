/**
 * The delivery sender: takes due deliveries from the queue, makes their attempts (attempt.ts: sign,
 * POST, decide) and records the outcomes. It does not poll: it runs when a delivery is enqueued
 * (wake), when an attempt ends, on one timer armed for the earliest scheduled retry, and when the
 * service learns of work other processes or nodes made due (due-signals.ts: their announcements,
 * and a look every second). Leases make an attempt owned by exactly one sender; concurrency is
 * bounded in all and per endpoint origin, so a slow endpoint occupies at most
 * `per_endpoint_concurrency` slots and cannot starve healthy ones.
 *
 * A slot is held for the HTTP exchange and nothing else. Deliveries are claimed ahead (leased,
 * waiting here: up to three slots' worth of their origin, or, leased at their ingest, a second of its
 * pace: sender-ahead.ts), so the attempt that ends hands
 * its slot to the next one in the same turn, and its outcome is recorded afterwards, in the turn's
 * group commit, without holding the slot (measured: with the record and the next claim inside the
 * slot, one endpoint at 4 slots took ~1,300 deliveries/s, each slot held ~3 ms for a sub-ms answer).
 *
 * `createSender` composes its parts, each a module with its own contract:
 *
 * - sender-slots.ts: the slots, in all and per origin, and when a slot of each origin last freed;
 * - sender-ahead.ts: the claim-ahead queue (the claims, the room for them, and what waited too
 *   long given back to the queue for the senders beside this one);
 * - sender-schedule.ts: the pump that claims and starts, and the timer for the next retry;
 * - sender-attempts.ts: the attempts in flight, each freeing its slot at the end of its exchange;
 * - sender-record.ts: the record turn (the outcomes' group commit, with the next claims);
 * - sender-manual.ts: a manual attempt, outside the schedule;
 * - sender-stop.ts: the stop (leases claimed ahead given back, attempts in flight waited for);
 * - sender-leases.ts: the config and the leases it gives.
 *
 * Here: the reservations an enqueue takes (a slot, so the delivery is stored leased and sent at
 * its commit) and the sender's surface.
 */
import type { Logger } from '../log/index.ts';
import { pooledRequest, type httpRequest } from '../net/index.ts';
import type { AttemptContext } from './attempt.ts';
import type { Database } from '../store/contract.ts';
import type { AttemptRecord, Claimed, Queue } from './queue.ts';
import type { WebhookSecrets } from './secrets.ts';
import { leaseOwner } from '../store/lease-owner.ts';
import { leaseMs, type WebhooksConfig } from './sender-leases.ts';
import { createSlots } from './sender-slots.ts';
import { createAheadQueue, ingestLeaseMs } from './sender-ahead.ts';
import { createSchedule } from './sender-schedule.ts';
import { createRecordTurn, type RecordedAttempt } from './sender-record.ts';
import { createAttempts, type Attempts } from './sender-attempts.ts';
import { manualAttempts } from './sender-manual.ts';
import { stopSender } from './sender-stop.ts';

export { aheadLeaseMs, leaseMs, type WebhooksConfig } from './sender-leases.ts';
export type { RecordedAttempt } from './sender-record.ts';

export interface SenderDeps {
  queue: Queue;
  database: Database;
  secrets: Pick<WebhookSecrets, 'liveSecrets'>;
  /** Each installation's signature scheme (see attempt.ts). */
  schemeOf?: AttemptContext['schemeOf'];
  config: () => WebhooksConfig;
  log: Logger;
  send?: typeof httpRequest;
  now?: () => number;
  random?: () => number;
  /** The installation's current URL, for manual attempts (a fixed URL takes effect on retry). */
  currentUrl?: (d: { eventType: string; installationId: string }) => string | undefined;
  /** Called after each attempt is recorded (live tail, metrics); must not throw. */
  onAttempt?: (e: RecordedAttempt) => void;
  /** Told when a write fails and when one commits again (store/health.ts). */
  health?: { failed(error: unknown): void; ok(): void };
  /** Deliveries were given back to the queue: other senders sharing it may take them now. */
  gaveBack?: () => void;
  /** This sender's slots per origin of the per-endpoint limit (the serving processes share it); all of them by default. */
  slotsFor?: (origin: string, limit: number) => number;
  /** Whether a delivery leased at its ingest and waiting for a slot may still go (its installation active, pointing to its URL); all may by default. */
  sendable?: (c: Claimed) => boolean;
  /** Deliveries wait here for slots of `origin` (`all`: slots in all) this sender does not hold: see sender-ahead.ts. */
  short?: (origin: string, all: boolean) => void;
}

/**
 * A lease taken for a delivery about to be enqueued: a free slot of its origin, or room to wait
 * here for one (`waits`, sender-ahead.ts), with its body's length.
 */
export interface Reservation {
  owner: string;
  until: number;
  origin: string;
  chars: number;
  waits: boolean;
}

export interface Sender {
  /** Look for due work now (after an enqueue, a resume, a replay). */
  wake(): void;
  /**
   * Take a lease for a delivery about to be enqueued (its body `chars` characters long), so it is stored
   * already leased and sent once its transaction commits, with no claim of its own: a free slot of
   * its origin, or else room to wait in this sender's claim-ahead queue (only while nothing of the
   * origin is due in the store: see sender-ahead.ts). Undefined when neither: then it is enqueued
   * as due and claimed by the scheduler. Each reservation ends in startReserved() or cancelReserved().
   */
  reserve(origin: string, chars: number): Reservation | undefined;
  /** After the commit: the first attempt of a delivery enqueued with a reservation starts, or waits for its slot. */
  startReserved(c: Claimed, r: Reservation): void;
  /** The enqueue was rolled back (or stored the delivery held): the reservation is given back. */
  cancelReserved(r: Reservation): void;
  /** One attempt now, outside the schedule; resolves with the recorded attempt. */
  attemptNow(id: string): Promise<AttemptRecord | 'busy'>;
  /** Attempts in flight. */
  inFlight(): number;
  /** This sender's slots of `origin` (undefined: in all) neither in use lately (Slots.peak) nor waited for by deliveries here: what it may lend. */
  spare(origin: string | undefined): number;
  /** Stop taking work; wait up to `graceMs` for attempts in flight, then abandon them (their leases are recovered at next start). */
  stop(graceMs: number): Promise<void>;
}

export function createSender(deps: SenderDeps): Sender {
  const { queue, log, database, config } = deps;
  const clock = deps.now ?? Date.now;
  const owner = leaseOwner();
  let stopped = false;
  const isStopped = () => stopped;
  const slots = createSlots(deps.slotsFor, clock);
  // The parts call each other in a circle (an attempt that ends starts the next one waiting, whose
  // claim a record turn or the pump made): `attempts` is read at the first claim, once it is built.
  const ahead = createAheadQueue({
    queue,
    database,
    config,
    clock,
    owner,
    slots,
    start: (c) => void attempts.start(c, false),
    stopped: isStopped,
    health: deps.health,
    gaveBack: deps.gaveBack,
    sendable: deps.sendable,
    short: deps.short,
    wake: () => schedule.pump(),
  });
  const schedule = createSchedule({ queue, database, config, clock, slots, ahead, stopped: isStopped, log, health: deps.health });
  const record = createRecordTurn({ queue, database, clock, owner, ahead, schedule, stopped: isStopped, log, onAttempt: deps.onAttempt, health: deps.health });
  const attempts: Attempts = createAttempts({
    context: {
      config: () => deps.config(),
      secrets: deps.secrets,
      schemeOf: deps.schemeOf,
      clock,
      send: deps.send ?? pooledRequest,
      random: deps.random,
      stopped: isStopped,
    },
    slots,
    ahead,
    record,
    schedule,
    log,
  });

  return {
    wake: schedule.pump,
    reserve(origin, chars) {
      if (stopped) return undefined;
      const cfg = deps.config();
      const now = clock();
      // Not before older deliveries of the origin: those due in the store (as this process's hints
      // know them) are claimed first, and it is stored due behind them.
      if (queue.dueBy(origin, now)) return undefined;
      // A free slot, unless older deliveries of the origin wait here: they go first.
      if (slots.inFlight() < cfg.concurrency && slots.taken(origin) < slots.limitOf(origin, cfg) && ahead.waitingFor(origin) === 0) {
        slots.acquire(origin);
        return { owner, until: now + leaseMs(cfg), origin, chars, waits: false };
      }
      // Room to wait here for a slot.
      if (ahead.reserveAtIngest(origin, chars, now)) return { owner, until: now + ingestLeaseMs(cfg), origin, chars, waits: true };
      return undefined;
    },
    startReserved(c, r) {
      if (!r.waits) {
        if (stopped) return slots.release(c.origin); // the lease stays: recovered at the next start
        attempts.start(c, false);
        return;
      }
      ahead.endReservation(r.origin, r.chars, stopped ? undefined : { c, until: r.until, since: clock() });
      ahead.drainOrigin(r.origin);
    },
    cancelReserved(r) {
      if (r.waits) ahead.endReservation(r.origin, r.chars);
      else slots.release(r.origin);
    },
    attemptNow: manualAttempts({ queue, database, config, clock, owner, currentUrl: deps.currentUrl, slots, ahead, attempts }),
    inFlight: slots.inFlight,
    spare(origin) {
      if (stopped) return 0;
      const cfg = deps.config();
      if (origin === undefined) return cfg.concurrency - slots.peak(undefined) - ahead.waitingAll();
      return slots.limitOf(origin, cfg) - slots.peak(origin) - ahead.waitingFor(origin);
    },
    stop(graceMs) {
      stopped = true;
      return stopSender({ queue, database, clock, owner, schedule, ahead, attempts, record, log }, graceMs);
    },
  };
}
