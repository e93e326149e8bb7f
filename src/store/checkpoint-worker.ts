/**
 * The checkpointer thread (see checkpointer.ts): copies the WAL back into the database file from
 * a connection of its own, so that the server's event loop does not stop for it. PASSIVE: it never
 * waits for, nor blocks, the server's readers and writer; what it cannot copy yet is copied on a
 * later turn.
 */
import { parentPort, workerData } from 'node:worker_threads';
import Database from 'better-sqlite3';

const { file, intervalMs, idleIntervalMs } = workerData as { file: string; intervalMs: number; idleIntervalMs: number };
const db = new Database(file, { fileMustExist: true, timeout: 5000 });
// Loaded and open: from now on the process may end without waiting for this thread (see checkpointer.ts).
parentPort!.postMessage({ ready: true });

// Each checkpoint that copies anything syncs the file twice: while little is written, look less
// often (a few small checkpoints a second would cost a quiet server more than its commits do).
const BUSY_PAGES = 256;
let timer = setTimeout(run, intervalMs);

// The pragma counts frames since the WAL last started over, so what one run copied is the
// difference from the previous run, or all of it when the WAL has started over since (counted
// short if it has also grown past its last size: the count only picks the next interval).
let last = { log: 0, checkpointed: 0 };

function run(): void {
  let copied = 0;
  try {
    const [r] = db.pragma('wal_checkpoint(PASSIVE)') as Array<{ busy: number; log: number; checkpointed: number }>;
    if (r && r.log >= 0) {
      copied = r.log < last.log || r.checkpointed < last.checkpointed ? r.checkpointed : r.checkpointed - last.checkpointed;
      last = r;
    }
    if (copied > 0) parentPort!.postMessage({ checkpointed: copied });
  } catch (e) {
    parentPort!.postMessage({ error: (e as Error).message });
  }
  timer = setTimeout(run, copied >= BUSY_PAGES ? intervalMs : idleIntervalMs);
}

parentPort!.on('message', (m) => {
  if (m !== 'stop') return;
  clearTimeout(timer);
  db.close();
  parentPort!.close();
});
