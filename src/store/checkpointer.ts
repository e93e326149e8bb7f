/**
 * WAL checkpoints on a thread of their own. Every commit appends pages to the WAL; a checkpoint
 * copies them into the database file and syncs it. Run automatically by the committing
 * connection, that cost lands on the server's event loop inside a commit: about 6 us per webhook
 * delivery (half of an ingest commit, a third of the delivery sender's), measured. Here a second
 * connection does it every `intervalMs` (`idleIntervalMs` while little is written), and the
 * server's own automatic checkpoint stays on with a higher threshold, as a backstop should this
 * thread fall behind or be restarting. Durability is the same:
 * commits are in the WAL either way, and SQLite coordinates the two connections.
 *
 * The thread also bounds the WAL: past WAL_BOUND_PAGES it empties the file (checkpoint-worker.ts),
 * and every writing connection has a journal_size_limit of the same size, so that what a full disk
 * needs to recover (room for the database file to take in the WAL) stays small.
 *
 * Failure policy: never stop for good. A checkpoint that fails (a full disk) is tried again by the
 * thread as soon as the disk has more room, and with a back-off; a thread that cannot start or
 * dies is started again with a back-off, the server's connection checkpointing at the usual
 * threshold meanwhile.
 */
import { Worker } from 'node:worker_threads';
import { isExecutable } from '../native/index.ts';
import type Database from 'better-sqlite3';
import type { Logger } from '../log/index.ts';

type Db = Database.Database;

/** SQLite's default threshold (pages in the WAL), used when checkpoints are not on a thread. */
export const AUTOCHECKPOINT_PAGES = 1000;
/** The server connections' threshold while the thread checkpoints: a backstop only (16 MB of 4 kB pages). */
export const BACKSTOP_PAGES = 4096;
/** Past this many pages (4 MB) the thread empties the WAL (TRUNCATE); also every writer's journal_size_limit. */
export const WAL_BOUND_PAGES = 1024;
/** The first wait before a thread that died is started again; it doubles up to RESTART_MAX_MS. */
const RESTART_FIRST_MS = 250;
const RESTART_MAX_MS = 10_000;

/** Whether checkpoints can run on a thread here (the supervisor's serving processes ask, to pick their threshold). */
export function checkpointsOnThread(): boolean {
  // The single executable carries its modules in one bundle, with no file to start a thread from.
  return !isExecutable();
}

export interface Checkpointer {
  /** Pages the thread has copied into the database file so far. */
  checkpointed(): number;
  /** Times the thread emptied the WAL (it had grown past WAL_BOUND_PAGES, or a failure ended). */
  emptied(): number;
  /** Whether the thread is running (false while it is started again: the server's connection checkpoints meanwhile). */
  running(): boolean;
  /** Whether the last checkpoint failed (the thread tries again, see checkpoint-worker.ts). */
  failing(): boolean;
  stop(): void;
}

export function startCheckpointer(db: Db, file: string, opts: { intervalMs?: number; idleIntervalMs?: number; log?: Logger } = {}): Checkpointer | undefined {
  if (!checkpointsOnThread()) return undefined;
  let pages = 0;
  let emptied = 0;
  let running = false;
  let failing = false;
  let stopped = false;
  let worker: Worker | undefined;
  let deaths = 0;
  let again: NodeJS.Timeout | undefined;

  const fallBack = () => {
    running = false;
    if (!stopped && db.open) db.pragma(`wal_autocheckpoint = ${AUTOCHECKPOINT_PAGES}`);
  };

  function start(): boolean {
    let w: Worker;
    try {
      w = new Worker(new URL('./checkpoint-worker.ts', import.meta.url), {
        workerData: { file, intervalMs: opts.intervalMs ?? 50, idleIntervalMs: opts.idleIntervalMs ?? 250, boundPages: WAL_BOUND_PAGES },
      });
    } catch {
      return false;
    }
    worker = w;
    running = true;
    db.pragma(`wal_autocheckpoint = ${BACKSTOP_PAGES}`);
    w.on('message', (m: { ready?: boolean; checkpointed?: number; emptied?: boolean; error?: string; code?: string; recovered?: boolean }) => {
      // Held until its SQLite addon is loaded: a process that ends while a thread is still loading a
      // native addon aborts (a FATAL ERROR in napi_register_module_v1), which a short-lived store
      // (a test, a quick command) could meet at its exit.
      if (m.ready) w.unref();
      if (m.checkpointed) {
        pages += m.checkpointed;
        deaths = 0;
      }
      if (m.emptied) emptied++;
      if (m.error) {
        failing = true;
        opts.log?.warn('WAL checkpoint failed; trying again as soon as the disk has room', { error: m.error, ...(m.code ? { code: m.code } : {}) });
      }
      if (m.recovered) {
        failing = false;
        opts.log?.info('WAL checkpoint succeeded again');
      }
    });
    const died = () => {
      if (worker !== w) return;
      worker = undefined;
      startAgain();
    };
    w.on('error', died);
    w.on('exit', died);
    return true;
  }

  function startAgain(): void {
    fallBack();
    if (stopped) return;
    const delay = Math.min(RESTART_MAX_MS, RESTART_FIRST_MS * 2 ** deaths++);
    opts.log?.warn('the WAL checkpoint thread stopped; starting it again', { in_ms: delay });
    again = setTimeout(() => {
      if (!stopped && db.open && !start()) startAgain();
    }, delay);
    again.unref();
  }

  if (!start()) return undefined;
  return {
    checkpointed: () => pages,
    emptied: () => emptied,
    running: () => running,
    failing: () => failing,
    stop() {
      stopped = true;
      running = false;
      if (again) clearTimeout(again);
      worker?.postMessage('stop');
    },
  };
}
