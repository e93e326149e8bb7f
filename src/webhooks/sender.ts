/**
 * The delivery sender: takes due deliveries from the queue, makes their attempts (attempt.ts: sign,
 * POST, decide) and records the outcomes. It does not poll: it runs when a delivery is enqueued
 * (wake), when an attempt ends, on one timer armed for the earliest scheduled retry, and when the
 * service learns of work other processes or nodes made due (service.ts: their announcements, and a
 * look every second). Leases make an
 * attempt owned by exactly one sender; concurrency is bounded in all and per endpoint origin, so a
 * slow endpoint occupies at most `per_endpoint_concurrency` slots and cannot starve healthy ones.
 *
 * A slot is held for the HTTP exchange and nothing else. Deliveries are claimed ahead (leased,
 * waiting here, at most one slot's worth per slot of their origin), so the attempt that ends hands
 * its slot to the next one in the same turn, and its outcome is recorded afterwards, in the turn's
 * group commit, without holding the slot (measured: with the record and the next claim inside the
 * slot, one endpoint at 4 slots took ~1,300 deliveries/s, each slot held ~3 ms for a sub-ms answer).
 */
import type { Config } from '../config/index.ts';
import type { Logger } from '../log/index.ts';
import { httpRequest } from '../net/index.ts';
import { makeAttempt, type AttemptContext } from './attempt.ts';
import { LOCK_BUSY, type Database, type Queries } from '../store/contract.ts';
import { batchPerTurn } from '../lib/batch.ts';
import type { AttemptRecord, Claimed, NextState, Queue } from './queue.ts';
import type { WebhookSecrets } from './secrets.ts';
import { leaseOwner } from '../store/lease-owner.ts';

export type WebhooksConfig = Config['webhooks'];

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
}

/** An attempt just recorded: its id (the feed cursor), the delivery it belongs to, and the delivery's new state. */
export interface RecordedAttempt {
  attemptId: number;
  delivery: Claimed;
  record: AttemptRecord;
  next: NextState;
  /** How long the attempt held its slot (ms): from its start to the end of its HTTP exchange. */
  slotMs: number;
}

export interface Sender {
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

/**
 * How long a delivery claimed ahead may wait for a slot of its origin before it is given back to
 * the queue for another sender (a process beside this one whose slots are free); and how recently
 * a slot of the origin must have freed for more to be claimed ahead. An endpoint that answers in
 * milliseconds frees a slot every few ms; one whose attempts hang gets nothing claimed ahead.
 */
const AHEAD_WAIT_MS = 50;

/** A lease must outlive the attempt's time-out, or a slow attempt could be taken twice. */
export function leaseMs(cfg: WebhooksConfig): number {
  return Math.max(cfg.lease, cfg.timeout + 5_000);
}

/**
 * The lease of a delivery claimed ahead: it may wait for a slot for as long as the attempts ahead
 * of it take (each ends within `timeout`), then needs a whole lease for its own attempt.
 */
export function aheadLeaseMs(cfg: WebhooksConfig): number {
  return leaseMs(cfg) + cfg.timeout;
}

export function createSender(deps: SenderDeps): Sender {
  const { queue, log, database } = deps;
  const clock = deps.now ?? Date.now;
  const owner = leaseOwner();
  /** HTTP exchanges in flight, in all and per origin: the slots. */
  const perOrigin = new Map<string, number>();
  let inflight = 0;
  /** Deliveries leased to this sender and waiting for a slot of their origin, oldest first. */
  type Ahead = { c: Claimed; until: number; since: number };
  const ahead = new Map<string, Ahead[]>();
  let aheadCount = 0;
  /** When a slot of each origin last freed (an origin absent: not within AHEAD_WAIT_MS). */
  const lastFreed = new Map<string, number>();
  let staleTimer: NodeJS.Timeout | undefined;
  const running = new Set<Promise<unknown>>();
  const abort = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  let pumping = false;
  let again = false;
  const attemptContext: AttemptContext = {
    config: () => deps.config(),
    secrets: deps.secrets,
    schemeOf: deps.schemeOf,
    clock,
    send: deps.send ?? httpRequest,
    random: deps.random,
    signal: abort.signal,
    stopped: () => stopped,
  };

  // Attempts that ended, waiting to be recorded: written in one transaction per event-loop turn
  // (group commit). Their slots are free already; their leases hold until the write, so a crash
  // before it leaves the delivery leased, recovered as interrupted and sent again (at-least-once).
  type Ended = { c: Claimed; record: AttemptRecord; next: NextState; ended: number; slotMs: number; done: (r: AttemptRecord | undefined) => void };
  const ended = batchPerTurn<Ended>((batch) => void recordEnded(batch));
  /** While recording fails: the wait before the next try (ms), doubling to 2 s. */
  let recordRetry = 0;
  /** The turn's record being written (one at a time: what ends meanwhile waits for the next turn). */
  let recording: Promise<void> | undefined;

  function arm(now: number): void {
    if (timer) clearTimeout(timer);
    timer = undefined;
    if (stopped || inflight + aheadCount >= 2 * deps.config().concurrency) return; // a completion will pump
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

  const waitingFor = (origin: string): number => ahead.get(origin)?.length ?? 0;
  /** This sender's slots for an origin. */
  const limitOf = (origin: string, cfg: WebhooksConfig): number =>
    deps.slotsFor ? deps.slotsFor(origin, cfg.per_endpoint_concurrency) : cfg.per_endpoint_concurrency;

  /** Room for more: in all (twice the sender's concurrency less what is taken), and per origin. */
  function roomAt(now: number): { room: number; perOriginRoom: (origin: string) => number } {
    const cfg = deps.config();
    const room = 2 * cfg.concurrency - inflight - aheadCount;
    // Per origin its free slots, plus as many again to wait here while the origin answers fast (a
    // slot freed within AHEAD_WAIT_MS).
    const perOriginRoom = (origin: string) => {
      const freed = lastFreed.get(origin);
      const depth = freed !== undefined && now - freed < AHEAD_WAIT_MS ? 2 : 1;
      return depth * limitOf(origin, cfg) - (perOrigin.get(origin) ?? 0) - waitingFor(origin);
    };
    return { room, perOriginRoom };
  }

  /** Whether a claim may find something (the hints say an origin with room has due work). */
  function worthClaiming(now: number): boolean {
    const { room, perOriginRoom } = roomAt(now);
    return room > 0 && queue.mayHaveDue(now, perOriginRoom);
  }

  /**
   * Lease as many due deliveries as there is room for, in the caller's transaction (one statement
   * per origin with due work; those another sender took meanwhile are left out). The caller
   * queues them (queueAhead) once it commits.
   */
  async function claimDue(tx: Queries, now: number): Promise<Ahead[]> {
    const { room, perOriginRoom } = roomAt(now);
    if (room <= 0) return [];
    const until = now + aheadLeaseMs(deps.config());
    return (await queue.claimDue(tx, now, room, perOriginRoom, owner, until)).map((c) => ({ c, until, since: now }));
  }

  function queueAhead(claimed: Ahead[]): void {
    for (const a of claimed) {
      const list = ahead.get(a.c.origin);
      if (list) list.push(a);
      else ahead.set(a.c.origin, [a]);
      aheadCount++;
    }
    if (aheadCount && !staleTimer && !stopped) {
      staleTimer = setTimeout(giveBackStale, AHEAD_WAIT_MS);
      staleTimer.unref();
    }
  }

  /**
   * Deliveries that waited here longer than AHEAD_WAIT_MS (their origin's slots are taken by slow
   * or hanging attempts) go back to the queue, and the senders beside this one are told: one with
   * a free slot sends them. Until a slot of that origin frees, this sender claims no more ahead.
   */
  async function giveBackStale(): Promise<void> {
    staleTimer = undefined;
    const now = clock();
    for (const [origin, at] of lastFreed) if (now - at >= AHEAD_WAIT_MS) lastFreed.delete(origin);
    const stale: Ahead[] = [];
    for (const [origin, list] of ahead) {
      const keep = list.filter((a) => now - a.since < AHEAD_WAIT_MS);
      if (keep.length === list.length) continue;
      stale.push(...list.filter((a) => now - a.since >= AHEAD_WAIT_MS));
      if (keep.length) ahead.set(origin, keep);
      else ahead.delete(origin);
    }
    if (stale.length) {
      aheadCount -= stale.length;
      let given: unknown;
      try {
        given = await database.transactionUnlessBusy((tx) =>
          queue.giveBack(
            tx,
            stale.map((a) => a.c.seq),
            owner,
            now,
          ),
        );
      } catch (e) {
        deps.health?.failed(e);
      }
      if (given === undefined || given === LOCK_BUSY)
        queueAhead(stale.map((a) => ({ ...a, since: now - AHEAD_WAIT_MS }))); // again next time
      else deps.gaveBack?.();
    }
    if (aheadCount && !staleTimer && !stopped) {
      staleTimer = setTimeout(giveBackStale, AHEAD_WAIT_MS);
      staleTimer.unref();
    }
  }

  /** Start what waits for `origin` while it has free slots (and the sender has room in all). */
  function drainOrigin(origin: string): void {
    const list = ahead.get(origin);
    if (!list) return;
    const cfg = deps.config();
    const now = clock();
    const limit = limitOf(origin, cfg);
    while (list.length && !stopped && inflight < cfg.concurrency && (perOrigin.get(origin) ?? 0) < limit) {
      const a = list.shift()!;
      aheadCount--;
      // Held here past the point where its lease could run out mid-attempt (only a stalled event
      // loop does that): leave it; the lease runs out and the delivery is due again then.
      if (a.until - now < leaseMs(cfg)) {
        queue.noteDue(origin, a.until);
        continue;
      }
      acquire(origin);
      start(a.c, false);
    }
    if (!list.length) ahead.delete(origin);
  }

  function drainAll(): void {
    for (const origin of [...ahead.keys()]) drainOrigin(origin);
  }

  function pump(): void {
    if (stopped) return;
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
        const claimed = worthClaiming(now) ? await database.transactionUnlessBusy((tx) => claimDue(tx, now)) : [];
        if (claimed === LOCK_BUSY) {
          // Another process is committing: try again next turn, without waiting for its lock here.
          setImmediate(pump);
          break;
        }
        queueAhead(claimed);
        drainAll();
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
   * Record the attempts that ended and lease the next due deliveries, in one transaction (one
   * commit per event-loop turn, however many attempts ended in it).
   */
  function recordEnded(batch: Ended[]): Promise<void> {
    // One record at a time: what ended meanwhile waits a turn behind the one being written.
    if (recording) {
      ended.putBack(batch);
      return recording;
    }
    const p = (recording = record(batch).finally(() => (recording = undefined)));
    return p;
  }

  async function record(batch: Ended[]): Promise<void> {
    const now = clock();
    let ok = true;
    let ids: number[] = [];
    let next: Ahead[] = [];
    try {
      const items = batch.map((e) => ({ seq: e.c.seq, origin: e.c.origin, owner, attempt: e.record, next: e.next, now: e.ended }));
      const recorded =
        !stopped && worthClaiming(now)
          ? await database.transactionUnlessBusy(async (tx) => {
              // Claims first: the attempts are a live tail's feed, inserted last under the feed's order
              // lock (store/feed-order.ts), which on PostgreSQL is then held for that insert and the
              // commit alone, not through the claims as well (every node's record turn waits for it).
              next = await claimDue(tx, now);
              return queue.completeMany(tx, items);
            })
          : await queue.recordOutcomes(database, items);
      // Another process is committing: these outcomes wait a turn (the claims were rolled back).
      if (recorded === LOCK_BUSY) return ended.putBack(batch);
      ids = recorded.ids;
      // Only when this process was held past its lease (the supervisor kills a silent one first).
      if (recorded.stale.length)
        log.warn('attempts ended after their lease had expired; the delivery was left to the sender that took it', { deliveries: recorded.stale.length });
    } catch (e) {
      ok = false;
      next = []; // rolled back with the transaction
      if (!stopped) {
        // A write failed (a full disk, a read-only or locked file): the outcomes are still here and
        // the leases still hold, so write them again shortly. Once the store takes writes again
        // they are recorded as they happened, with no second send.
        deps.health?.failed(e);
        if (!recordRetry) log.error('recording delivery attempts failed; writing them again shortly', { error: e as Error, attempts: batch.length });
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
          deps.onAttempt?.({ attemptId: ids[i], delivery: e.c, record: e.record, next: e.next, slotMs: e.slotMs });
        } catch (err) {
          log.error('attempt observer failed', { error: err as Error });
        }
      }
      e.done(ok ? e.record : undefined);
    });
    queueAhead(next);
    drainAll();
    if (stopped) return;
    // A retry just recorded that is due already (its attempt ended more than its delay ago) was not
    // there for this turn's claims: look again now.
    if (!ok || batch.some((e) => e.next.nextAttemptAt !== null && e.next.nextAttemptAt <= clock())) pump();
    else arm(now);
  }

  function logOutcome(e: Ended): void {
    if (e.next.status === 'failed' && !e.record.manual)
      log.warn('webhook delivery failed', { delivery: e.c.id, installation: e.c.installationId, attempts: e.next.attempts, reason: e.record.error });
    else if (e.record.outcome !== 'success')
      log.debug('webhook attempt', { delivery: e.c.id, outcome: e.record.outcome, status: e.record.status, error: e.record.error });
  }

  /**
   * Run one attempt of a claimed delivery (its slot already taken). The slot is freed, and handed
   * to the next delivery waiting for the origin, as soon as the HTTP exchange ends; resolves once
   * the outcome is recorded (undefined if it could not be).
   */
  function start(c: Claimed, manual: boolean): Promise<AttemptRecord | undefined> {
    const t0 = performance.now();
    const freeSlot = () => {
      release(c.origin);
      lastFreed.set(c.origin, clock());
      drainOrigin(c.origin);
    };
    const p = makeAttempt(c, manual, attemptContext).then(
      (r) =>
        new Promise<AttemptRecord | undefined>((done) => {
          const slotMs = performance.now() - t0;
          freeSlot();
          if (!r) return done(undefined);
          ended.push({ c, ...r, slotMs, done });
        }),
      (e) => {
        freeSlot();
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
      // Not while older deliveries of the origin wait here: they go first.
      if (stopped || inflight >= cfg.concurrency || (perOrigin.get(origin) ?? 0) >= limitOf(origin, cfg) || waitingFor(origin) > 0) return undefined;
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
      const claimed = await queue.claimById(database, id, owner, now, now + leaseMs(deps.config()));
      if (!claimed) return 'busy';
      const current = deps.currentUrl?.(claimed);
      if (current && current !== claimed.url) {
        await queue.setUrl(database, claimed.seq, current);
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
      if (staleTimer) clearTimeout(staleTimer);
      // What waits here was never sent: its leases go back, so another sender (or the next start)
      // takes it at once, without an interrupted attempt on record.
      const waiting = [...ahead.values()].flat().map((a) => a.c.seq);
      ahead.clear();
      aheadCount = 0;
      if (waiting.length) {
        try {
          await queue.giveBack(database, waiting, owner, clock());
        } catch (e) {
          log.warn('could not give back the deliveries claimed ahead; their leases run out instead', { error: e as Error, deliveries: waiting.length });
        }
      }
      if (running.size) {
        let t: NodeJS.Timeout | undefined;
        await Promise.race([Promise.allSettled([...running]), new Promise((r) => (t = setTimeout(r, graceMs)))]);
        clearTimeout(t);
      }
      abort.abort();
      await Promise.allSettled([...running]);
      // Anything ended but not yet written.
      await recording;
      ended.flush();
      await recording;
    },
  };
}
