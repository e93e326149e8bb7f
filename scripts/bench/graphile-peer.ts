/**
 * graphile-worker 0.18 doing Switchyard's job, as scripts/bench/pg-nodes.ts's PostgreSQL peer:
 * one worker process (forked by the benchmark, like a node) whose one task signs the event with
 * Switchyard's scheme (src/webhooks/signature.ts) and POSTs it to the receiver; a non-2xx answer
 * fails the job, so graphile-worker retries it, as a delivery would be.
 *
 * Started with one argument, JSON: `{ connectionString, target, batched, concurrency, localQueue,
 * batchDelay }`. `batched: false` is graphile-worker at its defaults (one job at a time, one
 * fetch and one completion statement per job); `batched: true` runs `concurrency` jobs at once,
 * fetches `localQueue` jobs per statement (`preset.worker.localQueue.size`) and completes and fails
 * jobs in batches after `batchDelay` ms (`preset.worker.completeJobBatchDelay` and
 * `failJobBatchDelay`). Its info-level log (a line per job) is dropped in both: warnings and errors
 * reach stderr. Sends `{ ready: true }` once connected; stops gracefully on `{ stop: true }` (batched
 * completions are flushed) and answers `{ stopped: true }`.
 */
import http from 'node:http';
import { Logger, run, type Runner } from 'graphile-worker';
import { signatureHeader } from '../../src/webhooks/signature.ts';
import { PEER_SECRET } from './common.ts';

interface PeerOptions {
  connectionString: string;
  target: string;
  batched: boolean;
  concurrency: number;
  localQueue: number;
  batchDelay: number;
}
const o = JSON.parse(process.argv[2]) as PeerOptions;
const agent = new http.Agent({ keepAlive: true, maxSockets: o.batched ? o.concurrency : 1 });

function deliver(payload: unknown, jobId: string): Promise<void> {
  const event = payload as Record<string, unknown>;
  // Shaped like Switchyard's delivery: its own id, the event's id as sourceEventId (what the receiver matches).
  const body = Buffer.from(JSON.stringify({ ...event, eventId: `job_${jobId}`, sourceEventId: event.eventId, installationId: 'inst_peer' }));
  return new Promise((resolve, reject) => {
    const req = http.request(o.target, {
      method: 'POST',
      agent,
      headers: {
        'content-type': 'application/json',
        'content-length': body.length,
        'x-platform-signature': signatureHeader([PEER_SECRET], Math.floor(Date.now() / 1000), body),
      },
    });
    req.on('response', (res) => {
      res.resume();
      res.on('end', () => ((res.statusCode ?? 0) < 300 ? resolve() : reject(new Error(`receiver answered ${res.statusCode}`))));
    });
    req.on('error', reject);
    req.end(body);
  });
}

const logger = new Logger(() => (level, message) => {
  if (level === 'error' || level === 'warning') process.stderr.write(`  graphile-worker ${level}: ${message}\n`);
});

const runner: Runner = await run({
  connectionString: o.connectionString,
  logger,
  noHandleSignals: true,
  taskList: { deliver: (payload, helpers) => deliver(payload, helpers.job.id) },
  ...(o.batched
    ? {
        concurrency: o.concurrency,
        // The pool's advice: at least concurrentJobs + 2 connections.
        maxPoolSize: o.concurrency + 2,
        preset: { worker: { localQueue: { size: o.localQueue }, completeJobBatchDelay: o.batchDelay, failJobBatchDelay: o.batchDelay } },
      }
    : {}),
});
process.send!({ ready: true });
process.on('message', async (m: any) => {
  if (m?.stop) {
    await runner.stop();
    agent.destroy();
    process.send!({ stopped: true }, undefined, {}, () => process.exit(0));
  }
});
process.on('disconnect', () => process.exit(0));
