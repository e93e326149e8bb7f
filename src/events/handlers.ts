/**
 * `services.handlerRuns`: platform events owed to integrations' event handlers, at least once.
 * Ingest calls enqueueEvent inside the event's transaction (one INSERT per handling installation);
 * the runs start when that commits (an after-commit hook); the worker runs them through `services.eventHandlers` (the runtime).
 */
import { SwitchyardError } from '../errors.ts';
import type { Logger } from '../log/index.ts';
import { afterCommit, onRollback, type Db } from '../store/index.ts';
import type { RetryConfig } from '../webhooks/policy.ts';
import { createHandlerRuns, type ClaimedRun, type HandlerRunFilter, type RunNext } from './handler-runs.ts';
import { createHandlerWorker, type RunOutcome } from './handler-worker.ts';
import type { HandlerRun } from './handler-views.ts';

/** What the runtime offers the handler queue (`services.eventHandlers`). */
export interface EventHandlers {
  /** The installations whose integration handles this event now (synchronous: called inside the ingest transaction). */
  targets(event: { type: string; installationId?: unknown }): Array<{ installationId: string; integration: string }>;
  /** Run one installation's handler for the stored event. */
  run(installationId: string, event: Record<string, unknown> & { eventId: string; type: string }): Promise<RunOutcome>;
}

export interface HandlerQueue {
  /**
   * Inside the event's transaction: one run per installation that handles it. The runs start once
   * that transaction commits, and their reserved slots are given back if it rolls back (store
   * hooks: store/transactions.ts); the caller tells nothing afterwards.
   */
  enqueueEvent(event: { eventId: string; type: string; installationId?: unknown }, now: number, opts?: { startAtCommit?: boolean }): Array<{ id: string; installationId: string }>;
  /** The worker looks for due work now (a clock moved, another process made work due). */
  wake(): void;
  list(f: HandlerRunFilter): { handlerRuns: HandlerRun[]; nextCursor: string | null };
  get(id: string): HandlerRun | undefined;
  ofEvent(eventId: string): HandlerRun[];
  /** Failed runs created in the window go back to pending with a fresh schedule; ids replayed. */
  replay(f: { since: number; until: number; installation?: string }): string[];
  /** One finished run (failed or delivered) runs again with a fresh schedule. */
  replayOne(id: string): HandlerRun;
  counts(): Record<string, number>;
  inFlight(): number;
  purgeFinished(before: number, limit: number): number;
  purgeFailed(before: number, limit: number): number;
  stop(graceMs: number): Promise<void>;
}

export function createHandlerQueue(deps: {
  db: Db;
  log: Logger;
  handlers: () => EventHandlers | undefined;
  /** The stored event (its payload), by eventId. */
  event: (eventId: string) => (Record<string, unknown> & { eventId: string; type: string }) | undefined;
  config: () => RetryConfig & { concurrency: number; leaseMs: number };
  now?: () => number;
  random?: () => number;
  onRecorded?: (c: ClaimedRun, next: RunNext | 'dropped') => void;
  /** Leases left by the last stop to take back at once (a server alone; under the supervisor it does this). */
  leftovers?: string;
}): HandlerQueue {
  const now = deps.now ?? Date.now;
  const runs = createHandlerRuns(deps.db, { maxAttempts: () => deps.config().max_retries + 1 });
  if (deps.leftovers !== undefined) runs.releaseOwnedBy(deps.leftovers);
  const worker = createHandlerWorker({
    runs,
    config: deps.config,
    log: deps.log,
    now: deps.now,
    random: deps.random,
    onRecorded: deps.onRecorded,
    async run(c) {
      const handlers = deps.handlers();
      if (!handlers) throw new Error('the runtime is not running');
      const event = deps.event(c.eventId);
      if (!event) return { kind: 'skip', reason: 'the event is no longer stored' };
      return handlers.run(c.installationId, event);
    },
  });
  /** After an enqueue's commit: the worker looks for what was not started at commit (one hook per transaction). */
  const wakeWorker = () => worker.wake();

  return {
    enqueueEvent(event, at, opts = {}) {
      const targets = deps.handlers()?.targets(event) ?? [];
      const out: Array<{ id: string; installationId: string }> = [];
      for (const t of targets) {
        const lease = opts.startAtCommit !== false ? worker.reserve() : undefined;
        let claimed: ClaimedRun | null;
        try {
          claimed = runs.enqueue({ eventId: event.eventId, eventType: event.type, installationId: t.installationId, integration: t.integration, now: at }, lease);
        } catch (e) {
          if (lease) worker.cancelReserved();
          throw e;
        }
        if (lease) {
          if (claimed) {
            // Leased in the caller's transaction: it runs once that commits; the slot is given
            // back if it (or the savepoint it is in) rolls back.
            const started = claimed;
            afterCommit(deps.db, () => worker.startReserved(started));
            onRollback(deps.db, () => worker.cancelReserved());
          } else worker.cancelReserved();
        }
        if (claimed) out.push({ id: claimed.id, installationId: t.installationId });
      }
      if (out.length) afterCommit(deps.db, wakeWorker);
      return out;
    },
    wake: wakeWorker,
    list: (f) => runs.list(f),
    get: (id) => runs.get(id),
    ofEvent: (eventId) => runs.ofEvent(eventId),
    replay(f) {
      const ids = runs.replayFailed(f, now());
      if (ids.length) {
        deps.log.info('failed event handler runs replayed', { runs: ids.length });
        worker.wake();
      }
      return ids;
    },
    replayOne(id) {
      const found = runs.get(id);
      if (!found) throw new SwitchyardError('not_found', `no handler run ${id}`, { hint: 'list them with `switchyard events handlers`' });
      if (!runs.replayOne(id, now()))
        throw new SwitchyardError('conflict', `handler run ${id} is ${found.status}: only failed or delivered runs are replayed`, {
          hint: found.status === 'cancelled' ? 'its installation was uninstalled' : 'it is still scheduled; wait for its outcome',
        });
      worker.wake();
      return runs.get(id)!;
    },
    counts: () => runs.counts(),
    inFlight: () => worker.inFlight(),
    purgeFinished: (before, limit) => runs.purgeFinished(before, limit),
    purgeFailed: (before, limit) => runs.purgeFailed(before, limit),
    stop: (graceMs) => worker.stop(graceMs),
  };
}
