/**
 * Due work between senders: what this process made due that every serving process may take (a
 * resume, a replay, deliveries claimed ahead and given back) is announced to the processes beside
 * it (the supervisor's `due` message) and, on PostgreSQL, to the other nodes (NOTIFY on
 * DUE_CHANNEL); deliveries stored due at ingest, to the processes beside it alone. What they made
 * due (retries they scheduled, a dead process's leases) is not in this process's per-origin hints,
 * so it reads them again when told (at most every 100 ms), and every second.
 */
import { atMostEvery, oncePerTurn } from '../lib/batch.ts';
import type { Database, Tx } from '../store/contract.ts';
import type { Queue } from './queue.ts';

/** Where other nodes are told of due work they may take (PostgreSQL's notifications). */
const DUE_CHANNEL = 'switchyard_due';

/** How often a process reads the origins with due work when other processes or nodes may make some. */
const REFRESH_MS = 1_000;
/**
 * Deliveries stored due at ingest (their endpoint's slots here busy and its line full) are announced
 * to the processes beside this one at most this often, the first of a burst at once: their slots of
 * that endpoint may be idle, and would otherwise hear of them at their next look, up to REFRESH_MS
 * later. (Other nodes are not told: a NOTIFY a turn would wake every process of every node.) A
 * process told looks at most this often too, however many tell it.
 */
const INGEST_ANNOUNCE_MS = 100;

export interface DueSignals {
  /** Due work was made here that every serving process may take: this sender looks now, the others are told. */
  everywhere(): void;
  /** The same, once the caller's transaction (`tx`) has committed (once a turn, however many resumes). */
  everywhereAfter(tx: Tx): void;
  /** Deliveries claimed ahead were given back (their origin's slots here were stuck): the processes and nodes beside this one take them. */
  gaveBack(): void;
  /**
   * Deliveries were stored due at ingest in `tx`: once it commits, the serving processes beside
   * this one are told (this sender is woken by the enqueue itself), at most every INGEST_ANNOUNCE_MS.
   */
  storedDueAfter(tx: Tx): void;
  /** Start hearing what other processes and nodes made due (and looking every second); nothing to hear when alone. */
  listen(): void;
  stop(): void;
}

export interface DueSignalsDeps {
  database: Database;
  queue: Pick<Queue, 'refreshDue'>;
  /** The serving processes beside this one (process/serving.ts), when there are some. */
  link?: { onDue(fn: () => void): void; announceDue(deliveriesOnly?: boolean): void };
  /** This process's sender looks for due work. */
  wake(): void;
  health?: { failed(error: unknown): void };
  /** The window of the two throttles, INGEST_ANNOUNCE_MS unless given (a test widens it, to count on a loaded machine). */
  announceEveryMs?: number;
}

export function createDueSignals(deps: DueSignalsDeps): DueSignals {
  const { database, queue, link } = deps;
  // On PostgreSQL the other nodes are told too.
  const nodes = database.notifications;
  const others = nodes ? { get: () => void nodes.notify(database, DUE_CHANNEL).catch((e: unknown) => deps.health?.failed(e)) } : undefined;
  const toOthers = () => {
    link?.announceDue();
    others?.get();
  };
  const everywhere = () => {
    deps.wake();
    toOthers();
  };
  const everywhereSoon = oncePerTurn(everywhere);
  /** Once stopped, nothing is told or looked at (a telling or a look could otherwise be armed after stop). */
  let stopped = false;
  const windowMs = deps.announceEveryMs ?? INGEST_ANNOUNCE_MS;
  const announcing = atMostEvery(windowMs, () => link?.announceDue(true));
  const announceStoredDue = () => {
    if (!stopped) announcing.call();
  };
  let refresh: NodeJS.Timeout | undefined;
  let looking: { cancel(): void } | undefined;
  return {
    everywhere,
    everywhereAfter: (tx) => tx.afterCommit(everywhereSoon),
    gaveBack: toOthers,
    storedDueAfter(tx) {
      if (link) tx.afterCommit(announceStoredDue);
    },
    listen() {
      if (!link && !nodes) return;
      let refreshing = false;
      /** Told during a look: its read may have begun before the teller's commit, so one more follows. */
      let toldMeanwhile = false;
      const look = atMostEvery(windowMs, () => {
        if (stopped) return;
        if (refreshing) {
          toldMeanwhile = true; // one look at a time: a slow store does not pile them up
          return;
        }
        refreshing = true;
        queue
          .refreshDue(database)
          .then(
            () => deps.wake(),
            (e: unknown) => deps.health?.failed(e),
          )
          .finally(() => {
            refreshing = false;
            if (toldMeanwhile && !stopped) {
              toldMeanwhile = false;
              look.call();
            }
          });
      });
      looking = look;
      const dueSafely = () => {
        if (!stopped) look.call();
      };
      link?.onDue(dueSafely);
      nodes?.listen(DUE_CHANNEL, dueSafely);
      refresh = setInterval(dueSafely, REFRESH_MS);
      refresh.unref();
    },
    stop() {
      stopped = true;
      clearInterval(refresh);
      announcing.cancel();
      looking?.cancel();
    },
  };
}
