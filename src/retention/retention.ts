/**
 * The retention job: delete history older than `retention.keep` in small batches. Each batch is one
 * DELETE statement (one transaction of at most `batch_size` rows), and the job yields to the event
 * loop between batches, so the delivery sender's own statements run in between: a purge of a
 * million rows is a few hundred short steps, never one long lock. Purged, in order:
 * 1. delivered and cancelled deliveries completed before the cutoff, with their attempts;
 * 2. failed deliveries that failed before `retention.keep_failed` ago (kept longer, since they can
 *    be replayed), with their attempts;
 * 3. events received before the cutoff that no delivery refers to any more;
 * 4. invocation logs recorded before the cutoff.
 */
import type { Logger } from '../log/index.ts';

export interface RetentionSettings {
  /** Milliseconds of history to keep. */
  keep: number;
  /** Milliseconds failed deliveries are kept (they can be replayed until then). */
  keep_failed: number;
  batch_size: number;
}

/** One table group's purge: delete up to `limit` rows older than `before`, return how many went. */
export interface Purger {
  name: 'deliveries' | 'failedDeliveries' | 'handlerRuns' | 'failedHandlerRuns' | 'events' | 'invocations';
  /** Which setting gives its cutoff (default `keep`). */
  keep?: 'keep' | 'keep_failed';
  purge(before: number, limit: number): number | Promise<number>;
}

export interface RetentionReport {
  startedAt: string;
  /** Rows older than this were purged. */
  cutoff: string;
  deliveries: number;
  /** Failed deliveries purged (their cutoff is `failedCutoff`). */
  failedDeliveries: number;
  failedCutoff: string;
  /** Delivered and cancelled handler runs purged (cutoff `cutoff`); failed ones (cutoff `failedCutoff`). */
  handlerRuns: number;
  failedHandlerRuns: number;
  events: number;
  invocations: number;
  batches: number;
  durationMs: number;
  /** The longest single batch: how long delivery could have waited behind the job. */
  longestBatchMs: number;
  /** True when the server began shutting down mid-run (the rest waits for the next run). */
  interrupted: boolean;
}

export interface RetentionDeps {
  purgers: () => Purger[];
  settings: () => RetentionSettings;
  log: Logger;
  now?: () => number;
  /** Between batches; the default yields to the event loop (setImmediate). */
  pause?: () => Promise<void>;
  /**
   * After each batch that deleted rows: the server passes a passive WAL checkpoint, so the pages a
   * batch freed are written back a little at a time; otherwise every ~1000 pages one batch pays
   * for a whole automatic checkpoint (measured: worst batch ~50 ms instead of ~10 ms).
   */
  checkpoint?: () => void | Promise<void>;
  /** Checked between batches: stop early when it turns true. */
  stopping?: () => boolean;
}

export interface Retention {
  /** Run now (or join the run in progress); `now` overrides the clock for this run. */
  run(opts?: { now?: number }): Promise<RetentionReport>;
  readonly running: boolean;
  readonly lastRun: RetentionReport | null;
}

const yieldToLoop = () => new Promise<void>((r) => setImmediate(r));

export function createRetention(deps: RetentionDeps): Retention {
  const clock = deps.now ?? Date.now;
  const pause = deps.pause ?? yieldToLoop;
  let current: Promise<RetentionReport> | undefined;
  let last: RetentionReport | null = null;

  async function runOnce(now: number): Promise<RetentionReport> {
    const settings = deps.settings();
    const { keep, batch_size } = settings;
    const cutoff = now - keep;
    const failedCutoff = now - settings.keep_failed;
    const t0 = performance.now();
    const report: RetentionReport = {
      startedAt: new Date(now).toISOString(),
      cutoff: new Date(cutoff).toISOString(),
      deliveries: 0,
      failedDeliveries: 0,
      failedCutoff: new Date(failedCutoff).toISOString(),
      handlerRuns: 0,
      failedHandlerRuns: 0,
      events: 0,
      invocations: 0,
      batches: 0,
      durationMs: 0,
      longestBatchMs: 0,
      interrupted: false,
    };
    outer: for (const p of deps.purgers()) {
      for (;;) {
        if (deps.stopping?.()) {
          report.interrupted = true;
          break outer;
        }
        const b0 = performance.now();
        const n = await p.purge(p.keep === 'keep_failed' ? failedCutoff : cutoff, batch_size);
        if (n) await deps.checkpoint?.();
        report.longestBatchMs = Math.max(report.longestBatchMs, performance.now() - b0);
        report.batches++;
        report[p.name] += n;
        if (n < batch_size) break;
        await pause();
      }
      await pause();
    }
    report.durationMs = Math.round((performance.now() - t0) * 100) / 100;
    report.longestBatchMs = Math.round(report.longestBatchMs * 100) / 100;
    const purged = report.deliveries + report.failedDeliveries + report.handlerRuns + report.failedHandlerRuns + report.events + report.invocations;
    deps.log[purged ? 'info' : 'debug']('retention purged old history', {
      cutoff: report.cutoff,
      deliveries: report.deliveries,
      failed_deliveries: report.failedDeliveries,
      handler_runs: report.handlerRuns,
      failed_handler_runs: report.failedHandlerRuns,
      events: report.events,
      invocations: report.invocations,
      batches: report.batches,
      duration_ms: report.durationMs,
    });
    return report;
  }

  return {
    run(opts = {}) {
      // One run at a time: a second caller (cron and CLI together) gets the run in progress.
      current ??= runOnce(opts.now ?? clock())
        .then((r) => (last = r))
        .finally(() => (current = undefined));
      return current;
    },
    get running() {
      return current !== undefined;
    },
    get lastRun() {
      return last;
    },
  };
}
