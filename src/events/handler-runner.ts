/**
 * The handler runner: takes due handler runs from the store (SQL leases, so several processes can
 * share one store), runs each through the runtime, and records the outcome on the webhook retry
 * schedule (webhooks.max_retries / base_delay / jitter). A run that crashed the sandbox, found it
 * unavailable, hit a limit or whose handler threw is retried like a 5xx; after max_retries it is
 * `failed` and replayable. It runs at wake(), when a run ends, and on one timer armed for the
 * earliest retry or lease expiry; on PostgreSQL it is also woken every second (index.ts), since
 * other nodes schedule runs and leave leases to run out without telling this one.
 *
 * It works in turns, one at a time: a turn records the outcomes of the runs that ended since the
 * last one and claims due runs for the free slots, in one commit (handler-runs.ts). Runs that end
 * while a turn is in the store are recorded by the next.
 */
import type { Logger } from '../log/index.ts';
import { nextAttemptDelay, type RetryConfig } from '../webhooks/policy.ts';
import type { ClaimedRun, HandlerRuns, RunNext } from './handler-runs.ts';
import { leaseOwner } from '../store/lease-owner.ts';
import { oncePerTurn } from '../lib/batch.ts';

/** What running one handler came to. */
export type RunOutcome =
  /** The handler was invoked: `ok` when it ended without a fault and below 500. */
  | { kind: 'ran'; ok: boolean; invocationId: string | null; error?: string }
  /** The integration does not handle this event (any more): nothing is owed. */
  | { kind: 'skip'; reason: string }
  /** The installation is gone (uninstalled): the run is cancelled. */
  | { kind: 'gone'; reason: string };

export interface HandlerRunnerDeps {
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

export type HandlerRunner = ReturnType<typeof createHandlerRunner>;

const MAX_TIMER = 60 * 60_000;
/** After a turn the store refused: the next one, that long after. */
const RETRY_MS = 1000;
/** After due runs a turn could not claim: the next look, that long after. */
const SKIPPED_LOOK_MS = 50;

export function createHandlerRunner(deps: HandlerRunnerDeps) {
  const { runs, log } = deps;
  const clock = deps.now ?? Date.now;
  const owner = leaseOwner();
  const running = new Set<Promise<void>>();
  /** Outcomes of runs that ended, not recorded yet (the next turn records them). */
  let ended: Array<{ c: ClaimedRun; next: RunNext | 'dropped' }> = [];
  let inflight = 0;
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  /** The turns in progress (one at a time), and whether another was asked for meanwhile. */
  let turning: Promise<void> | undefined;
  let again = false;

  function later(ms: number): void {
    if (timer) clearTimeout(timer);
    timer = setTimeout(pump, Math.min(Math.max(ms, 0), MAX_TIMER));
    timer.unref();
  }

  /** Look for work now: a turn, or another right after the one in progress. */
  function pump(): void {
    if (stopped) return; // stop() records what ended itself
    if (turning) {
      again = true;
      return;
    }
    turning = (async () => {
      try {
        do {
          again = false;
          if (!(await turn())) break; // the store refused: its retry timer is armed
        } while (again);
      } catch (e) {
        log.error('handler scheduler failed', { error: e as Error });
      }
    })().finally(() => (turning = undefined));
  }
  /** Runs ending in one event-loop turn share one turn of the runner. */
  const pumpSoon = oncePerTurn(pump);

  /** One turn: record what ended, claim due runs for the free slots, arm the timer. False when the store failed. */
  async function turn(): Promise<boolean> {
    if (timer) clearTimeout(timer);
    timer = undefined;
    const cfg = deps.config();
    const now = clock();
    const done = ended;
    ended = [];
    let claimed: ClaimedRun[];
    let taken = 0;
    try {
      const seqs = stopped ? [] : await runs.due(now, cfg.concurrency - inflight);
      // The slots are taken before the commit, so a reserve() (an ingest) meanwhile finds them taken.
      taken = Math.min(seqs.length, Math.max(cfg.concurrency - inflight, 0));
      inflight += taken;
      claimed = await runs.turn({ done: done.map((d) => ({ seq: d.c.seq, next: d.next })), seqs: seqs.slice(0, taken), owner, now, until: now + cfg.leaseMs });
    } catch (e) {
      inflight -= taken;
      ended = [...done, ...ended]; // recorded by a later turn (still ours unless the lease ran out)
      // A database hiccup must not stop the handlers for good: look again shortly.
      if (!stopped) {
        log.error('handler scheduler failed; retrying in 1 s', { error: e as Error });
        later(RETRY_MS);
      }
      return false;
    }
    inflight -= taken - claimed.length;
    const unclaimed = taken - claimed.length;
    for (const c of claimed) start(c);
    for (const { c, next } of done) {
      if (next !== 'dropped' && next.status === 'failed')
        log.warn('event handler failed for good', {
          run: c.id,
          event: c.eventId,
          installation: c.installationId,
          attempts: next.attempts,
          reason: next.lastError,
        });
      try {
        deps.onRecorded?.(c, next);
      } catch (e) {
        log.error('handler run observer failed', { error: e as Error });
      }
    }
    if (stopped || inflight >= cfg.concurrency) return true; // a run ending will pump
    let next: number | undefined;
    try {
      next = await runs.nextDueAfter(now);
    } catch (e) {
      log.error('handler scheduler failed; retrying in 1 s', { error: e as Error });
      later(RETRY_MS);
      return false;
    }
    // A retry this turn recorded may be due already (the run ended more than its delay before the
    // turn began): the due read above came before the record, and the store's next wake looks
    // only past `now`, so the turn's own records count here.
    for (const { next: n } of done) if (n !== 'dropped' && n.nextAttemptAt !== null && (next === undefined || n.nextAttemptAt < next)) next = n.nextAttemptAt;
    // Runs read as due but not claimed: another process took them, or (PostgreSQL) they were locked
    // by another transaction and skipped, which may yet roll back; the store's next wake would not
    // name them (they are due already), so look again shortly.
    if (unclaimed > 0) next = Math.min(next ?? Infinity, now + SKIPPED_LOOK_MS);
    if (next !== undefined && !stopped && !again) later(next - now);
    return true;
  }

  function decide(c: ClaimedRun, o: RunOutcome & { kind: 'ran' }, endedAt: number): RunNext {
    const made = c.attempts + 1;
    if (o.ok) return { status: 'delivered', attempts: made, nextAttemptAt: null, completedAt: endedAt, lastError: null, lastInvocation: o.invocationId };
    const delay = nextAttemptDelay(made, 'retry', deps.config(), undefined, deps.random);
    const error = o.error ?? 'the handler failed';
    if (delay === null)
      return { status: 'failed', attempts: made, nextAttemptAt: null, completedAt: endedAt, lastError: error, lastInvocation: o.invocationId };
    return {
      status: 'retrying',
      attempts: made,
      nextAttemptAt: Math.round(endedAt + delay),
      completedAt: null,
      lastError: error,
      lastInvocation: o.invocationId,
    };
  }

  /** Run a claimed handler (its slot is counted already); its outcome waits for the next turn. */
  function start(c: ClaimedRun): void {
    const p = (async () => {
      let outcome: RunOutcome;
      try {
        outcome = await deps.run(c);
      } catch (e) {
        outcome = { kind: 'ran', ok: false, invocationId: null, error: `the handler could not be run: ${(e as Error).message}` };
      }
      const now = clock();
      const next: RunNext | 'dropped' =
        outcome.kind === 'skip'
          ? 'dropped'
          : outcome.kind === 'gone'
            ? {
                status: 'cancelled',
                attempts: c.attempts,
                nextAttemptAt: null,
                completedAt: now,
                lastError: `cancelled: ${outcome.reason}`,
                lastInvocation: null,
              }
            : decide(c, outcome, now);
      // Not recorded if the process stops first: the lease is given back (or runs out), and the run is due again (at-least-once).
      ended.push({ c, next });
    })().finally(() => {
      inflight--;
      running.delete(p);
      if (!stopped) pumpSoon();
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
    /**
     * Stop taking work; wait up to `graceMs` for runs in flight, record the outcomes of those that
     * ended, then give the other leases back (due again at once).
     */
    async stop(graceMs: number): Promise<void> {
      stopped = true;
      if (timer) clearTimeout(timer);
      if (running.size) {
        let t: NodeJS.Timeout | undefined;
        await Promise.race([Promise.allSettled([...running]), new Promise((r) => (t = setTimeout(r, graceMs)))]);
        clearTimeout(t);
      }
      await turning;
      if (ended.length) await turn(); // claims nothing now: records what ended
      try {
        const n = await runs.releaseAll(owner);
        if (n) log.warn('handler runs still in flight at shutdown are due again', { runs: n });
      } catch {
        // The store is already closed: the leases run out instead.
      }
    },
  };
}
