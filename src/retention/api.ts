/** The answers of the retention API, declared once (src/schema): what /openapi.json describes. */
import { boolean, dateTime, named, nullable, number, object, string } from '../schema/index.ts';

const count = (description?: string) => number({ integer: true, description });

export const retentionReportSchema = named(
  'RetentionReport',
  object({
    startedAt: dateTime(),
    cutoff: dateTime('rows older than this were purged'),
    deliveries: count(),
    failedDeliveries: count('failed deliveries purged (their cutoff is failedCutoff)'),
    failedCutoff: dateTime(),
    handlerRuns: count('delivered and cancelled handler runs purged (cutoff: cutoff)'),
    failedHandlerRuns: count('failed handler runs purged (cutoff: failedCutoff)'),
    events: count(),
    invocations: count(),
    batches: count(),
    durationMs: count(),
    longestBatchMs: count('the longest single batch: how long delivery could have waited behind the job'),
    interrupted: boolean({ description: 'the server began shutting down mid-run (the rest waits for the next run)' }),
  }),
);

export const retentionStatusSchema = object({
  schedule: string({ description: 'retention.schedule (cron, server local time)' }),
  keepMs: count('retention.keep'),
  keepFailedMs: count('retention.keep_failed'),
  batchSize: count('retention.batch_size'),
  nextRunAt: nullable(dateTime()),
  running: boolean(),
  lastRun: nullable(retentionReportSchema),
});
