/**
 * The handler worker: takes due handler runs from the store (SQL leases, so several processes can
 * share one store), runs each through the runtime, and records the outcome on the webhook retry
 * schedule (webhooks.max_retries / base_delay / jitter). A run that crashed the sandbox, found it
 * unavailable, hit a limit or whose handler threw is retried like a 5xx; after max_retries it is
 * `failed` and replayable. No polling: it runs at wake(), when a run ends, and on one timer armed for
 * the earliest retry or lease expiry.
 */
import type { Logger } from '../log/index.ts';
import { nextAttemptDelay, type RetryConfig } from '../webhooks/policy.ts';
import type { ClaimedRun, HandlerRuns, RunNext } from './handler-runs.ts';
import { leaseOwner } from '../store/lease-owner.ts';

/** What running one handler came to. */
export type RunOutcome =
  /** The handler was invoked: `ok` when it ended without a fault and below 500. */
  | { kind: 'ran'; ok: boolean; invocationId: string | null; error?: string }
  /** The integration does not handle this event (any more): nothing is owed. */
  | { kind: 'skip'; reason: string }
  /** The installation is gone (uninstalled): the run is cancelled. */
  | { kind: 'gone'; reason: string };

export interface HandlerWorkerDeps {
  runs: HandlerRuns;
  /** Run one claimed handler; a throw counts as a failed attempt. */
  run: (c: ClaimedRun) => Promise<RunOutcome>;
  config: () => RetryConfig & { concurrency: number; leaseMs: number };
  log: Logger;
  now?: () => number;
  random?: () => number;
  /** Called after each outcome is recorded (tests, observers); must not throw. */
  onRecorded?: (c: ClaimedRun, next: RunNext | 'dropped') => void;
}

export type HandlerWorker = ReturnType<typeof createHandlerWorker>;

const MAX_TIMER = 60 * 60_000;

export function createHandlerWorker(deps: HandlerWorkerDeps) {
  const { runs, log } = deps;
  const clock = deps.now ?? Date.now;
  const owner = leaseOwner();
  const running = new Set<Promise<void>>();
  let inflight = 0;
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;

  function arm(now: number): void {
    if (timer) clearTimeout(timer);
    timer = undefined;
    if (stopped || inflight >= deps.config().concurrency) return; // a run ending will pump
    const next = runs.nextDueAfter(now);
    if (next === undefined) return;
    timer = setTimeout(pump, Math.min(Math.max(next - now, 0), MAX_TIMER));
    timer.unref();
  }

  function pump(): void {
    if (stopped) return;
    const cfg = deps.config();
    const now = clock();
    try {
      for (const c of runs.claimDue(now, cfg.concurrency - inflight, owner, now + cfg.leaseMs)) {
        inflight++;
        start(c);
      }
      arm(now);
    } catch (e) {
      // A database hiccup must not stop the handlers for good: look again shortly.
      log.error('handler scheduler failed; retrying in 1 s', { error: e as Error });
      if (timer) clearTimeout(timer);
      timer = setTimeout(pump, 1000);
      timer.unref();
    }
  }

  function decide(c: ClaimedRun, o: RunOutcome & { kind: 'ran' }, endedAt: number): RunNext {
    const made = c.attempts + 1;
    if (o.ok) return { status: 'delivered', attempts: made, nextAttemptAt: null, completedAt: endedAt, lastError: null, lastInvocation: o.invocationId };
    const delay = nextAttemptDelay(made, 'retry', deps.config(), undefined, deps.random);
    const error = o.error ?? 'the handler failed';
    if (delay === null) return { status: 'failed', attempts: made, nextAttemptAt: null, completedAt: endedAt, lastError: error, lastInvocation: o.invocationId };
    return { status: 'retrying', attempts: made, nextAttemptAt: Math.round(endedAt + delay), completedAt: null, lastError: error, lastInvocation: o.invocationId };
  }

  function start(c: ClaimedRun): void {
    const p = (async () => {
      let outcome: RunOutcome;
      try {
        outcome = await deps.run(c);
      } catch (e) {
        outcome = { kind: 'ran', ok: false, invocationId: null, error: `the handler could not be run: ${(e as Error).message}` };
      }
      const now = clock();
      let next: RunNext | 'dropped';
      try {
        if (outcome.kind === 'skip') {
          runs.drop(c.seq, owner);
          next = 'dropped';
        } else {
          next =
            outcome.kind === 'gone'
              ? { status: 'cancelled', attempts: c.attempts, nextAttemptAt: null, completedAt: now, lastError: `cancelled: ${outcome.reason}`, lastInvocation: null }
              : decide(c, outcome, now);
          runs.complete(c.seq, owner, next, now);
          if (next.status === 'failed') log.warn('event handler failed for good', { run: c.id, event: c.eventId, installation: c.installationId, attempts: next.attempts, reason: next.lastError });
        }
      } catch (e) {
        // Not recorded: the lease stays and runs out, then the run is due again (at-least-once).
        if (!stopped) log.error('recording a handler run failed', { run: c.id, error: e as Error });
        return;
      }
      try {
        deps.onRecorded?.(c, next);
      } catch (e) {
        log.error('handler run observer failed', { error: e as Error });
      }
    })().finally(() => {
      inflight--;
      running.delete(p);
      if (!stopped) pump();
    });
    running.add(p);
  }

  return {
    /** Look for due runs now (after a commit that enqueued some, a replay, start-up). */
    wake: pump,
    /**
     * Take a slot for a run about to be enqueued, so it is stored already leased and starts as soon
     * as its transaction commits. Undefined when no slot is free (it is then enqueued due). Each
     * reservation ends in startReserved() or cancelReserved().
     */
    reserve(): { owner: string; until: number } | undefined {
      const cfg = deps.config();
      if (stopped || inflight >= cfg.concurrency) return undefined;
      inflight++;
      return { owner, until: clock() + cfg.leaseMs };
    },
    /** After the commit: run what was enqueued with a reserved lease. */
    startReserved(c: ClaimedRun): void {
      if (stopped) {
        inflight--; // its lease runs out; any process takes it then
        return;
      }
      start(c);
    },
    /** The enqueue was rolled back (or stored nothing): give the slot back. */
    cancelReserved(): void {
      inflight--;
    },
    inFlight: () => inflight,
    /** Stop taking work; wait up to `graceMs` for runs in flight, then give their leases back (due again at once). */
    async stop(graceMs: number): Promise<void> {
      stopped = true;
      if (timer) clearTimeout(timer);
      if (running.size) {
        let t: NodeJS.Timeout | undefined;
        await Promise.race([Promise.allSettled([...running]), new Promise((r) => (t = setTimeout(r, graceMs)))]);
        clearTimeout(t);
      }
      try {
        const n = runs.releaseAll(owner);
        if (n) log.warn('handler runs still in flight at shutdown are due again', { runs: n });
      } catch {
        // The store is already closed: the leases run out instead.
      }
    },
  };
}
