/**
 * Due work between senders: what this process made due that every serving process may take (a
 * resume, a replay, deliveries claimed ahead and given back) is announced to the processes beside
 * it (the supervisor's `due` message) and, on PostgreSQL, to the other nodes (NOTIFY on
 * DUE_CHANNEL); and what they made due (retries they scheduled, a dead process's leases) is not in
 * this process's per-origin hints, so it reads them again when told, and every second.
 */
import { oncePerTurn } from '../lib/batch.ts';
import type { Database, Tx } from '../store/contract.ts';
import type { Queue } from './queue.ts';

/** Where other nodes are told of due work they may take (PostgreSQL's notifications). */
const DUE_CHANNEL = 'switchyard_due';

/** How often a process reads the origins with due work when other processes or nodes may make some. */
const REFRESH_MS = 1_000;

export interface DueSignals {
  /** Due work was made here that every serving process may take: this sender looks now, the others are told. */
  everywhere(): void;
  /** The same, once the caller's transaction (`tx`) has committed (once a turn, however many resumes). */
  everywhereAfter(tx: Tx): void;
  /** Deliveries claimed ahead were given back (their origin's slots here were stuck): the processes and nodes beside this one take them. */
  gaveBack(): void;
  /** Start hearing what other processes and nodes made due (and looking every second); nothing to hear when alone. */
  listen(): void;
  stop(): void;
}

export interface DueSignalsDeps {
  database: Database;
  queue: Pick<Queue, 'refreshDue'>;
  /** The serving processes beside this one (process/serving.ts), when there are some. */
  link?: { onDue(fn: () => void): void; announceDue(): void };
  /** This process's sender looks for due work. */
  wake(): void;
  health?: { failed(error: unknown): void };
}

export function createDueSignals(deps: DueSignalsDeps): DueSignals {
  const { database, queue, link } = deps;
  // On PostgreSQL the other nodes are told too.
  const nodes = database.notifications;
  const others = nodes ? { get: () => void nodes.notify(database, DUE_CHANNEL).catch((e: unknown) => deps.health?.failed(e)) } : undefined;
  const everywhere = () => {
    deps.wake();
    link?.announceDue();
    others?.get();
  };
  const everywhereSoon = oncePerTurn(everywhere);
  let refresh: NodeJS.Timeout | undefined;
  return {
    everywhere,
    everywhereAfter: (tx) => tx.afterCommit(everywhereSoon),
    gaveBack() {
      link?.announceDue();
      others?.get();
    },
    listen() {
      if (!link && !nodes) return;
      let refreshing = false;
      const dueSafely = () => {
        if (refreshing) return; // one look at a time: a slow store does not pile them up
        refreshing = true;
        queue
          .refreshDue(database)
          .then(
            () => deps.wake(),
            (e: unknown) => deps.health?.failed(e),
          )
          .finally(() => (refreshing = false));
      };
      link?.onDue(dueSafely);
      nodes?.listen(DUE_CHANNEL, dueSafely);
      refresh = setInterval(dueSafely, REFRESH_MS);
      refresh.unref();
    },
    stop() {
      clearInterval(refresh);
    },
  };
}
