/**
 * WAL checkpoints on a thread of their own. Every commit appends pages to the WAL; a checkpoint
 * copies them into the database file and syncs it. Run automatically by the committing
 * connection, that cost lands on the server's event loop inside a commit: about 6 us per webhook
 * delivery (half of an ingest commit, a third of the worker's), measured. Here a second
 * connection does it every `intervalMs` (`idleIntervalMs` while little is written), and the
 * server's own automatic checkpoint stays on with a high threshold, as a backstop should this
 * thread fall behind or stop. Durability is the same:
 * commits are in the WAL either way, and SQLite coordinates the two connections.
 *
 * Failure policy: fail soft. If the thread cannot start, dies or fails a checkpoint, the server's
 * connection goes back to checkpointing at the usual threshold.
 */
import { Worker } from 'node:worker_threads';
import { isExecutable } from '../native/index.ts';
import type Database from 'better-sqlite3';

type Db = Database.Database;

/** SQLite's default threshold (pages in the WAL), used when checkpoints are not on a thread. */
export const AUTOCHECKPOINT_PAGES = 1000;
/** The server connection's threshold while the thread checkpoints: a backstop only. */
export const BACKSTOP_PAGES = 10_000;

export interface Checkpointer {
  /** Pages the thread has copied into the database file so far. */
  checkpointed(): number;
  /** Whether the thread is running (false after a failure: the server's connection checkpoints again). */
  running(): boolean;
  stop(): void;
}

export function startCheckpointer(db: Db, file: string, opts: { intervalMs?: number; idleIntervalMs?: number } = {}): Checkpointer | undefined {
  // The single executable carries its modules in one bundle, with no file to start a thread from.
  if (isExecutable()) return undefined;
  let worker: Worker;
  try {
    worker = new Worker(new URL('./checkpoint-worker.ts', import.meta.url), {
      workerData: { file, intervalMs: opts.intervalMs ?? 50, idleIntervalMs: opts.idleIntervalMs ?? 250 },
    });
  } catch {
    return undefined;
  }
  let pages = 0;
  let running = true;
  let stopped = false;
  const fallBack = () => {
    if (!running) return;
    running = false;
    if (!stopped && db.open) db.pragma(`wal_autocheckpoint = ${AUTOCHECKPOINT_PAGES}`);
  };
  db.pragma(`wal_autocheckpoint = ${BACKSTOP_PAGES}`);
  worker.on('message', (m: { ready?: boolean; checkpointed?: number; error?: string }) => {
    // Held until its SQLite addon is loaded: a process that ends while a thread is still loading a
    // native addon aborts (a FATAL ERROR in napi_register_module_v1), which a short-lived store
    // (a test, a quick command) could meet at its exit.
    if (m.ready) worker.unref();
    if (m.checkpointed) pages += m.checkpointed;
    if (m.error) {
      // A checkpoint that fails (I/O) leaves the work to the server's connection, as without a thread.
      fallBack();
      worker.postMessage('stop');
    }
  });
  worker.on('error', fallBack);
  worker.on('exit', fallBack);
  return {
    checkpointed: () => pages,
    running: () => running,
    stop() {
      stopped = true;
      running = false;
      worker.postMessage('stop');
    },
  };
}
