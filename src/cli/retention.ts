/** `switchyard retention run|status`: purge old history now, or see the schedule and the last run. */
import { defineCommand } from 'citty';
import type { RetentionReport } from '../retention/index.ts';
import { apiClient } from './client.ts';
import { configArg, configFrom, jsonArg } from './common.ts';
import { duration, when } from './inspect.ts';
import { printJson } from './table.ts';
import { formatDuration } from '../schema/index.ts';

const out = (s: string) => process.stdout.write(s);

function summary(r: RetentionReport): string {
  return (
    `purged history older than ${when(r.cutoff)}: ${r.deliveries} deliveries (with their attempts), ${r.handlerRuns ?? 0} handler runs, ${r.events} events, ${r.invocations} invocation logs,` +
    ` and ${r.failedDeliveries} failed deliveries and ${r.failedHandlerRuns ?? 0} failed handler runs that failed before ${when(r.failedCutoff)},` +
    ` in ${r.batches} batch${r.batches === 1 ? '' : 'es'}, ${duration(r.durationMs)} (longest batch ${duration(r.longestBatchMs)})${r.interrupted ? '; interrupted by shutdown' : ''}\n`
  );
}

const run = defineCommand({
  meta: {
    name: 'run',
    description:
      'Purge delivered deliveries, their attempts, finished handler runs, orphaned events and invocation logs older than retention.keep, and failed deliveries and handler runs older than retention.keep_failed, now',
  },
  args: { ...configArg, ...jsonArg },
  async run({ args }) {
    const r = await apiClient(configFrom(args)).post<RetentionReport>('/api/v1/retention/run');
    if (args.json) printJson(r);
    else out(summary(r));
  },
});

const status = defineCommand({
  meta: { name: 'status', description: 'The retention schedule, the next run and the last run' },
  args: { ...configArg, ...jsonArg },
  async run({ args }) {
    const r = await apiClient(configFrom(args)).get<{
      schedule: string;
      keepMs: number;
      keepFailedMs: number;
      batchSize: number;
      nextRunAt: string | null;
      running: boolean;
      lastRun: RetentionReport | null;
    }>('/api/v1/retention');
    if (args.json) return printJson(r);
    out(`schedule   ${r.schedule} (next ${r.nextRunAt ? when(r.nextRunAt) : 'never'})${r.running ? ', running now' : ''}\n`);
    out(`keep       ${formatDuration(r.keepMs)} (failed deliveries ${formatDuration(r.keepFailedMs)}), ${r.batchSize} rows per batch\n`);
    out(`last run   ${r.lastRun ? `${when(r.lastRun.startedAt)}: ${summary(r.lastRun)}` : 'none since the server started\n'}`);
  },
});

export default defineCommand({
  meta: { name: 'retention', description: 'Purge old delivery history and invocation logs (runs on retention.schedule)' },
  subCommands: { run, status },
});
