/**
 * `services.handlerRuns`: platform events owed to integrations' event handlers, at least once.
 * Ingest calls enqueue inside the event's transaction (one INSERT per handling installation);
 * the runs start when that commits (an after-commit hook); the runner runs them through `services.eventHandlers` (the runtime).
 */
import { SwitchyardError } from '../errors.ts';
import type { Logger } from '../log/index.ts';
import type { Database, Tx } from '../store/contract.ts';
import type { RetryConfig } from '../webhooks/policy.ts';
import { createHandlerRuns, type ClaimedRun, type HandlerRunFilter, type RunNext } from './handler-runs.ts';
import { createHandlerRunner, type RunOutcome } from './handler-runner.ts';
import type { HandlerRun } from './handler-views.ts';

/** What the runtime offers the handler queue (`services.eventHandlers`). */
export interface EventHandlers {
  /** The installations whose integration handles this event now (synchronous: called inside the ingest transaction). */
  targets(event: { type: string; installationId?: unknown }): Array<{ installationId: string; integration: string }>;
  /** Run one installation's handler for the stored event. */
  run(installationId: string, event: Record<string, unknown> & { eventId: string; type: string }): Promise<RunOutcome>;
}

type Fanned = Array<{ id: string; installationId: string }>;
type StoredEvent = Record<string, unknown> & { eventId: string; type: string };

export interface HandlerQueue {
  /**
   * Inside the event's transaction: one run per installation that handles it. The runs start once
   * that transaction commits, and their reserved slots are given back if it rolls back (store
   * hooks: `tx.afterCommit`, `tx.onRollback`); the caller tells nothing afterwards.
   */
  enqueue(tx: Tx, event: { eventId: string; type: string; installationId?: unknown }, now: number, opts?: { startAtCommit?: boolean }): Promise<Fanned>;
  /** Give back the leases the last stop left (when told to), then look for due runs: once, at start. */
  start(): Promise<void>;
  /** The runner looks for due work now (a clock moved, another process made work due). */
  wake(): void;
  list(f: HandlerRunFilter): Promise<{ handlerRuns: HandlerRun[]; nextCursor: string | null }>;
  get(id: string): Promise<HandlerRun | undefined>;
  ofEvent(eventId: string): Promise<HandlerRun[]>;
  /** Failed runs created in the window go back to pending with a fresh schedule; ids replayed. */
  replay(f: { since: number; until: number; installation?: string }): Promise<string[]>;
  /** One finished run (failed or delivered) runs again with a fresh schedule. */
  replayOne(id: string): Promise<HandlerRun>;
  counts(): Promise<Record<string, number>>;
  inFlight(): number;
  purgeFinished(before: number, limit: number): Promise<number>;
  purgeFailed(before: number, limit: number): Promise<number>;
  stop(graceMs: number): Promise<void>;
}

export function createHandlerQueue(deps: {
  database: Database;
  log: Logger;
  handlers: () => EventHandlers | undefined;
  /** The stored event (its payload), by eventId. */
  event: (eventId: string) => StoredEvent | undefined | Promise<StoredEvent | undefined>;
  config: () => RetryConfig & { concurrency: number; leaseMs: number };
  now?: () => number;
  random?: () => number;
  onRecorded?: (c: ClaimedRun, next: RunNext | 'dropped') => void;
  /** Leases left by the last stop to take back at start (a server alone; under the supervisor it does this). */
  leftovers?: string;
}): HandlerQueue {
  const now = deps.now ?? Date.now;
  const runs = createHandlerRuns(deps.database, { maxAttempts: () => deps.config().max_retries + 1 });
  const runner = createHandlerRunner({
    runs,
    config: deps.config,
    log: deps.log,
    now: deps.now,
    random: deps.random,
    onRecorded: deps.onRecorded,
    async run(c) {
      const handlers = deps.handlers();
      if (!handlers) throw new Error('the runtime is not running');
      const event = await deps.event(c.eventId);
      if (!event) return { kind: 'skip', reason: 'the event is no longer stored' };
      return handlers.run(c.installationId, event);
    },
  });
  /** After an enqueue's commit: the runner looks for what was not started at commit (one hook per transaction). */
  const wakeRunner = () => runner.wake();

  /** The installations owed a run, each with a reserved slot when its run starts at commit. */
  const plan = (event: { type: string; installationId?: unknown }, opts: { startAtCommit?: boolean }) =>
    (deps.handlers()?.targets(event) ?? []).map((t) => ({ ...t, lease: opts.startAtCommit !== false ? runner.reserve() : undefined }));
  type Planned = ReturnType<typeof plan>[number];
  /** Slots reserved for runs not stored (a failure, or nothing stored) go back. */
  const cancel = (planned: Planned[]) => {
    for (const p of planned) if (p.lease) runner.cancelReserved();
  };
  /**
   * What one stored run asks of its transaction's hooks: leased in the caller's transaction, it
   * runs once that commits, and its slot is given back if it (or the savepoint it is in) rolls back.
   */
  const hook = (hooks: { afterCommit(fn: () => void): void; onRollback(fn: () => void): void }, p: Planned, claimed: ClaimedRun | null, out: Fanned): void => {
    if (p.lease) {
      if (claimed) {
        hooks.afterCommit(() => runner.startReserved(claimed));
        hooks.onRollback(() => runner.cancelReserved());
      } else runner.cancelReserved();
    }
    if (claimed) out.push({ id: claimed.id, installationId: p.installationId });
  };
  const input = (event: { eventId: string; type: string }, p: Planned, at: number) => ({
    eventId: event.eventId,
    eventType: event.type,
    installationId: p.installationId,
    integration: p.integration,
    now: at,
  });

  return {
    async enqueue(tx, event, at, opts = {}) {
      const planned = plan(event, opts);
      const out: Fanned = [];
      for (const [i, p] of planned.entries()) {
        let claimed: ClaimedRun | null;
        try {
          claimed = await runs.enqueue(tx, input(event, p, at), p.lease);
        } catch (e) {
          cancel(planned.slice(i));
          throw e;
        }
        hook(tx, p, claimed, out);
      }
      if (out.length) tx.afterCommit(wakeRunner);
      return out;
    },
    async start() {
      if (deps.leftovers !== undefined) await runs.releaseOwnedBy(deps.leftovers);
      runner.wake();
    },
    wake: wakeRunner,
    list: (f) => runs.list(f),
    get: (id) => runs.get(id),
    ofEvent: (eventId) => runs.ofEvent(eventId),
    async replay(f) {
      const ids = await runs.replayFailed(f, now());
      if (ids.length) {
        deps.log.info('failed event handler runs replayed', { runs: ids.length });
        runner.wake();
      }
      return ids;
    },
    async replayOne(id) {
      const found = await runs.get(id);
      if (!found) throw new SwitchyardError('not_found', `no handler run ${id}`, { hint: 'list them with `switchyard events handlers`' });
      if (!(await runs.replayOne(id, now())))
        throw new SwitchyardError('conflict', `handler run ${id} is ${found.status}: only failed or delivered runs are replayed`, {
          hint: found.status === 'cancelled' ? 'its installation was uninstalled' : 'it is still scheduled; wait for its outcome',
        });
      runner.wake();
      return (await runs.get(id))!;
    },
    counts: () => runs.counts(),
    inFlight: () => runner.inFlight(),
    purgeFinished: (before, limit) => runs.purgeFinished(before, limit),
    purgeFailed: (before, limit) => runs.purgeFailed(before, limit),
    stop: (graceMs) => runner.stop(graceMs),
  };
}
