/**
 * The checkpointer thread (see checkpointer.ts): copies the WAL back into the database file from
 * a connection of its own, so that the server's event loop does not stop for it. This file is
 * the entry of that node:worker_threads Worker (hence "worker" in its name).
 *
 * Each turn is PASSIVE: it never waits for, nor blocks, the server's readers and writers; what it
 * cannot copy yet is copied on a later turn. A PASSIVE checkpoint never starts the WAL over, and
 * with several processes reading all the time a writer seldom can either (it needs every reader
 * off the WAL at that moment): the file would grow by the whole of every burst (measured: 13 MB
 * of WAL for 1 MB of rows in a burst of 500 events). So once the WAL holds more than `boundPages`,
 * the turn ends with a TRUNCATE checkpoint, which takes the write lock, copies the little the
 * PASSIVE one left, waits for the readers (at most RESTART_WAIT_MS, else it tries again next turn)
 * and empties the file.
 *
 * A checkpoint that fails (a full disk: the database file cannot grow) does not stop the thread.
 * It tries again, TRUNCATE, as soon as the disk that holds the database has more room than at the
 * failure (looked at every SPACE_POLL_MS), and at the latest after a back-off that doubles up to
 * RETRY_MAX_MS. Once space returns the checkpoint must come first: writers resume at once and
 * every page they write lengthens the WAL, which cannot start over until a checkpoint completes;
 * a WAL that has eaten the space freed leaves none for the database file to grow into, and then
 * neither can move (before this change: 11.5 MB freed, all of it WAL within 5 s, 507 for good).
 */
import { statfsSync } from 'node:fs';
import { dirname } from 'node:path';
import { parentPort, workerData } from 'node:worker_threads';
import Database from 'better-sqlite3';

const { file, intervalMs, idleIntervalMs, boundPages } = workerData as { file: string; intervalMs: number; idleIntervalMs: number; boundPages: number };
const db = new Database(file, { fileMustExist: true, timeout: 5000 });
// A TRUNCATE checkpoint holds the write lock while it waits for readers: other processes' writers
// wait meanwhile, so it gives up soon (a long reader, a backup) and tries again on a later turn.
const RESTART_WAIT_MS = 100;
db.pragma(`busy_timeout = ${RESTART_WAIT_MS}`);
// Loaded and open: from now on the process may end without waiting for this thread (see checkpointer.ts).
parentPort!.postMessage({ ready: true });

// Each checkpoint that copies anything syncs the file twice: while little is written, look less
// often (a few small checkpoints a second would cost a quiet server more than its commits do).
// Busy means a pace at which an idle interval would gather BUSY_PAGES (1,000 pages a second at
// the defaults), or a WAL that holds that many and still grows: the count after the WAL started
// over is short, and a short turn just under the count would start a long one in the middle of a
// burst (measured: 2,000 pages of WAL in 250 ms, 8 MB).
const BUSY_PAGES = 256;
let lastRunAt = Date.now();
const SPACE_POLL_MS = 50;
const RETRY_FIRST_MS = 100;
const RETRY_MAX_MS = 2_000;
let timer = setTimeout(run, intervalMs);

// The pragma counts frames since the WAL last started over, so what one run copied is the
// difference from the previous run, or all of it when the WAL has started over since (counted
// short if it has also grown past its last size: the count only picks the next interval).
let last = { log: 0, checkpointed: 0 };
/** Since a checkpoint failed: when, the free space then, and the back-off before the next try. */
let failing: { at: number; free: number; delayMs: number } | undefined;

type Result = { busy: number; log: number; checkpointed: number };

function checkpoint(mode: 'PASSIVE' | 'TRUNCATE'): Result {
  const [r] = db.pragma(`wal_checkpoint(${mode})`) as Result[];
  return r ?? { busy: 1, log: -1, checkpointed: -1 };
}

/** Bytes free on the disk that holds the database (0 if it cannot be read: then the back-off alone decides). */
function freeBytes(): number {
  try {
    const s = statfsSync(dirname(file));
    return s.bavail * s.bsize;
  } catch {
    return 0;
  }
}

function run(): void {
  let copied = 0;
  let emptied = false;
  try {
    const mode = failing ? 'TRUNCATE' : 'PASSIVE';
    const r = checkpoint(mode);
    if (r.log >= 0) {
      copied = r.log < last.log || r.checkpointed < last.checkpointed ? r.checkpointed : r.checkpointed - last.checkpointed;
      last = r;
    }
    if (mode === 'TRUNCATE') emptied = r.busy === 0;
    else if (r.log > boundPages && checkpoint('TRUNCATE').busy === 0) {
      emptied = true;
      copied += Math.max(0, r.log - r.checkpointed);
      last = { log: 0, checkpointed: 0 };
    }
    if (emptied) parentPort!.postMessage({ emptied: true });
    if (failing) parentPort!.postMessage({ recovered: true });
    failing = undefined;
    if (copied > 0) parentPort!.postMessage({ checkpointed: copied });
  } catch (e) {
    if (!failing) parentPort!.postMessage({ error: (e as Error).message, code: (e as { code?: string }).code });
    failing = { at: Date.now(), free: freeBytes(), delayMs: failing ? Math.min(RETRY_MAX_MS, failing.delayMs * 2) : RETRY_FIRST_MS };
    timer = setTimeout(retry, SPACE_POLL_MS);
    return;
  }
  const now = Date.now();
  // A WAL just emptied had grown past its bound, or writers held back by a failure are all coming
  // at once (measured: 16 MB of WAL within 250 ms of a recovery): look again soon.
  const busy = emptied || copied * idleIntervalMs >= BUSY_PAGES * Math.max(intervalMs, now - lastRunAt) || (copied > 0 && last.log >= BUSY_PAGES);
  lastRunAt = now;
  timer = setTimeout(run, busy ? intervalMs : idleIntervalMs);
}

/** While failing: try again once the disk has more room than at the failure, or the back-off is over. */
function retry(): void {
  if (!failing || freeBytes() > failing.free || Date.now() - failing.at >= failing.delayMs) return run();
  timer = setTimeout(retry, SPACE_POLL_MS);
}

parentPort!.on('message', (m) => {
  if (m !== 'stop') return;
  clearTimeout(timer);
  db.close();
  parentPort!.close();
});
