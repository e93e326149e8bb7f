/**
 * The delivery worker: takes due deliveries from the queue, makes their attempts (attempt.ts: sign,
 * POST, decide) and records the outcomes. No polling: it runs when a delivery is enqueued (wake),
 * when an attempt ends, and on one timer armed for the earliest scheduled retry. Leases make an
 * attempt owned by exactly one worker; concurrency is bounded in all and per endpoint origin, so a
 * slow endpoint occupies at most `per_endpoint_concurrency` slots and cannot starve healthy ones.
 */
import type { Config } from '../config/index.ts';
import type { Logger } from '../log/index.ts';
import { httpRequest } from '../net/index.ts';
import { makeAttempt, type AttemptContext } from './attempt.ts';
import { LOCK_BUSY } from '../store/patience.ts';
import { batchPerTurn } from '../lib/batch.ts';
import type { AttemptRecord, Claimed, NextState, Queue } from './queue.ts';
import type { WebhookSecrets } from './secrets.ts';
import { leaseOwner } from '../store/lease-owner.ts';

export type WebhooksConfig = Config['webhooks'];

export interface WorkerDeps {
  queue: Queue;
  secrets: Pick<WebhookSecrets, 'liveSecrets'>;
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
}

/** An attempt just recorded: its id (the feed cursor), the delivery it belongs to, and the delivery's new state. */
export interface RecordedAttempt {
  attemptId: number;
  delivery: Claimed;
  record: AttemptRecord;
  next: NextState;
}

export interface Worker {
  /** Look for due work now (after an enqueue, a resume, a replay). */
  wake(): void;
  /**
   * Take a slot for a delivery about to be enqueued, so it can be stored already leased and sent
   * as soon as its transaction commits (no claim, no scan). Undefined when no slot is free: then
   * it is enqueued as due and taken by the scheduler. Each reservation ends in startReserved() or cancelReserved().
   */
  reserve(origin: string): { owner: string; until: number } | undefined;
  /** Start the first attempt of a delivery enqueued with a reserved lease (after the commit). */
  startReserved(c: Claimed): void;
  /** The enqueue was rolled back: give the slot back. */
  cancelReserved(origin: string): void;
  /** One attempt now, outside the schedule; resolves with the recorded attempt. */
  attemptNow(id: string): Promise<AttemptRecord | 'busy'>;
  /** Attempts in flight. */
  inFlight(): number;
  /** Stop taking work; wait up to `graceMs` for attempts in flight, then abandon them (their leases are recovered at next start). */
  stop(graceMs: number): Promise<void>;
}

const MAX_TIMER = 60 * 60_000;

/** A lease must outlive the attempt's time-out, or a slow attempt could be taken twice. */
export function leaseMs(cfg: WebhooksConfig): number {
  return Math.max(cfg.lease, cfg.timeout + 5_000);
}

export function createWorker(deps: WorkerDeps): Worker {
  const { queue, log } = deps;
  const clock = deps.now ?? Date.now;
  const owner = leaseOwner();
  const perOrigin = new Map<string, number>();
  const running = new Set<Promise<unknown>>();
  const abort = new AbortController();
  let inflight = 0;
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  let pumping = false;
  let again = false;
  const attemptContext: AttemptContext = {
    config: () => deps.config(),
    secrets: deps.secrets,
    clock,
    send: deps.send ?? httpRequest,
    random: deps.random,
    signal: abort.signal,
    stopped: () => stopped,
  };

  // Attempts that ended, waiting to be recorded: written in one transaction per event-loop turn
  // (group commit), then their slots are freed. A crash before the write leaves the lease set,
  // so the attempt is recovered as interrupted and sent again (at-least-once).
  type Ended = { c: Claimed; record: AttemptRecord; next: NextState; ended: number; done: (r: AttemptRecord | undefined) => void };
  const ended = batchPerTurn<Ended>(recordEnded);
  /** While recording fails: the wait before the next try (ms), doubling to 2 s. */
  let recordRetry = 0;

  function arm(now: number): void {
    if (timer) clearTimeout(timer);
    timer = undefined;
    if (stopped || inflight >= deps.config().concurrency) return; // a completion will pump
    const next = queue.nextDueAfter(now);
    if (next === undefined) return;
    timer = setTimeout(pump, Math.min(Math.max(next - now, 0), MAX_TIMER));
    timer.unref();
  }

  function acquire(origin: string): void {
    inflight++;
    perOrigin.set(origin, (perOrigin.get(origin) ?? 0) + 1);
  }

  function release(origin: string): void {
    inflight--;
    const n = (perOrigin.get(origin) ?? 1) - 1;
    if (n <= 0) perOrigin.delete(origin);
    else perOrigin.set(origin, n);
  }

  /**
   * Lease as many due deliveries as the free slots allow (per origin and in all), taking their
   * slots. Runs inside the caller's transaction when there is one.
   */
  function claimDue(now: number): Claimed[] {
    const cfg = deps.config();
    const out: Claimed[] = [];
    try {
      claimInto(out, now, cfg);
    } catch (e) {
      for (const c of out) release(c.origin); // rolled back with the caller's transaction (or never made)
      throw e;
    }
    return out;
  }

  function claimInto(out: Claimed[], now: number, cfg: WebhooksConfig): void {
    const room = cfg.concurrency - inflight;
    if (room <= 0) return;
    const rows = queue.due(now, room, (origin) => cfg.per_endpoint_concurrency - (perOrigin.get(origin) ?? 0));
    if (!rows.length) return;
    for (const c of queue.claimMany(rows.map((r) => r.seq), owner, now, now + leaseMs(cfg))) {
      acquire(c.origin);
      out.push(c);
    }
  }

  function pump(): void {
    if (stopped) return;
    if (pumping) {
      again = true;
      return;
    }
    pumping = true;
    try {
      do {
        again = false;
        const now = clock();
        let claimed: Claimed[] = [];
        try {
          queue.atomically(() => {
            claimed = claimDue(now);
          });
        } catch (e) {
          // The commit failed after the claims took their slots: the claims are rolled back, so
          // the slots are free again (they leaked before, and an endpoint's slots ran out for good).
          for (const c of claimed) release(c.origin);
          throw e;
        }
        for (const c of claimed) start(c, false);
        arm(now);
      } while (again && !stopped);
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

  /**
   * Record the attempts that ended and lease the next due deliveries into the freed slots, in one
   * transaction (one commit per event-loop turn, however many attempts ended in it).
   */
  function recordEnded(batch: Ended[]): void {
    for (const e of batch) release(e.c.origin);
    const now = clock();
    let ok = true;
    let ids: number[] = [];
    let next: Claimed[] = [];
    try {
      const done = queue.atomicallyUnlessBusy(() => {
        const recorded = queue.completeMany(batch.map((e) => ({ seq: e.c.seq, origin: e.c.origin, owner, attempt: e.record, next: e.next, now: e.ended })));
        ids = recorded.ids;
        // Only when this process was held past its lease (the supervisor kills a silent one first).
        if (recorded.stale.length) log.warn('attempts ended after their lease had expired; the delivery was left to the worker that took it', { deliveries: recorded.stale.length });
        if (!stopped) next = claimDue(now);
      });
      if (done === LOCK_BUSY) {
        // Another process is committing: these outcomes wait a turn, their slots still taken.
        for (const c of next) release(c.origin); // claims rolled back with the transaction
        for (const b of batch) acquire(b.c.origin);
        return ended.putBack(batch);
      }
    } catch (e) {
      ok = false;
      for (const c of next) release(c.origin); // their claims were rolled back
      next = [];
      if (!stopped) {
        // A write failed (a full disk, a read-only or locked file): the outcomes are still here and
        // the leases still hold, so keep the slots and write them again shortly. Once the store
        // takes writes again they are recorded as they happened, with no second send.
        deps.health?.failed(e);
        if (!recordRetry) log.error('recording delivery attempts failed; writing them again shortly', { error: e as Error, attempts: batch.length });
        for (const b of batch) acquire(b.c.origin);
        recordRetry = Math.min((recordRetry || 50) * 2, 2_000);
        return ended.putBack(batch, recordRetry); // attempts ending meanwhile wait with them
      }
      // Stopping, with the store closed under us: the leases stay, so these attempts are
      // recovered as interrupted (and sent again) at the next start.
    }
    if (ok) {
      recordRetry = 0;
      deps.health?.ok();
    }
    batch.forEach((e, i) => {
      if (ok) {
        logOutcome(e);
        try {
          deps.onAttempt?.({ attemptId: ids[i], delivery: e.c, record: e.record, next: e.next });
        } catch (err) {
          log.error('attempt observer failed', { error: err as Error });
        }
      }
      e.done(ok ? e.record : undefined);
    });
    for (const c of next) start(c, false);
    if (stopped) return;
    if (ok) arm(now);
    else pump();
  }

  function logOutcome(e: Ended): void {
    if (e.next.status === 'failed' && !e.record.manual)
      log.warn('webhook delivery failed', { delivery: e.c.id, installation: e.c.installationId, attempts: e.next.attempts, reason: e.record.error });
    else if (e.record.outcome !== 'success') log.debug('webhook attempt', { delivery: e.c.id, outcome: e.record.outcome, status: e.record.status, error: e.record.error });
  }

  /** Run one attempt of a claimed delivery (its slot already taken); resolves once it is recorded (undefined if it could not be). */
  function start(c: Claimed, manual: boolean): Promise<AttemptRecord | undefined> {
    const p = makeAttempt(c, manual, attemptContext).then(
      (r) =>
        new Promise<AttemptRecord | undefined>((done) => {
          if (!r) {
            release(c.origin);
            return done(undefined);
          }
          ended.push({ c, ...r, done });
        }),
      (e) => {
        release(c.origin);
        log.error('delivery attempt failed unexpectedly', { delivery: c.id, error: e as Error });
        if (!stopped) setImmediate(pump);
        return undefined;
      },
    );
    running.add(p);
    void p.finally(() => running.delete(p));
    return p;
  }

  return {
    wake: pump,
    reserve(origin) {
      const cfg = deps.config();
      if (stopped || inflight >= cfg.concurrency || (perOrigin.get(origin) ?? 0) >= cfg.per_endpoint_concurrency) return undefined;
      acquire(origin);
      const now = clock();
      return { owner, until: now + leaseMs(cfg) };
    },
    startReserved(c) {
      if (stopped) return release(c.origin); // the lease stays: recovered at the next start
      start(c, false);
    },
    cancelReserved: release,
    async attemptNow(id) {
      const now = clock();
      const claimed = queue.claimById(id, owner, now, now + leaseMs(deps.config()));
      if (!claimed) return 'busy';
      const current = deps.currentUrl?.(claimed);
      if (current && current !== claimed.url) {
        queue.setUrl(claimed.seq, current);
        claimed.url = current;
      }
      acquire(claimed.origin);
      const record = await start(claimed, true);
      if (!record) throw new Error('the attempt could not be recorded (is the server shutting down?)');
      return record;
    },
    inFlight: () => inflight,
    async stop(graceMs) {
      stopped = true;
      if (timer) clearTimeout(timer);
      if (running.size) {
        let t: NodeJS.Timeout | undefined;
        await Promise.race([Promise.allSettled([...running]), new Promise((r) => (t = setTimeout(r, graceMs)))]);
        clearTimeout(t);
      }
      abort.abort();
      await Promise.allSettled([...running]);
      ended.flush(); // anything ended but not yet written
    },
  };
}
