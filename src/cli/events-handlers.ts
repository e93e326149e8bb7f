/**
 * `switchyard events handlers` and `events replay`: the events owed to integrations' event
 * handlers (one handler run per event and installation, retried on the webhook schedule), and
 * running failed ones again. The vocabulary of `deliveries list` / `deliveries replay --failed`.
 */
import { defineCommand } from 'citty';
import { SwitchyardError } from '../errors.ts';
import type { HandlerRun } from '../events/index.ts';
import { apiClient } from './client.ts';
import { configArg, configFrom, jsonArg } from './common.ts';
import { checkPage, checkStatus, checkTimes, offlineArg, oneLine, pageArgs, sourceFrom, statusColour, timeArgs, when } from './inspect.ts';
import { dim, printJson, table } from './table.ts';

const out = (s: string) => process.stdout.write(s);

export const handlers = defineCommand({
  meta: { name: 'handlers', description: 'Handler runs (one per event and installation whose integration handles it), newest first' },
  args: {
    ...configArg,
    ...jsonArg,
    ...offlineArg,
    status: { type: 'string', description: 'only this status: pending, retrying, delivered, failed, cancelled', valueHint: 'status' },
    type: { type: 'string', description: 'only this event type', valueHint: 'type' },
    installation: { type: 'string', description: 'only this installation', valueHint: 'id' },
    event: { type: 'string', description: 'only the runs of this eventId', valueHint: 'eventId' },
    ...timeArgs,
    ...pageArgs,
  },
  async run({ args }) {
    const query = {
      status: checkStatus(args.status),
      type: args.type,
      installation: args.installation,
      event: args.event,
      ...checkTimes(args),
      ...checkPage(args),
    };
    const { source } = await sourceFrom(args);
    try {
      const page = await source.handlerRuns(query);
      if (args.json) return printJson(page);
      if (!page.handlerRuns.length) out('no handler runs\n');
      else
        out(
          `${table(
            ['created', 'run', 'event', 'type', 'installation', 'status', 'attempts', 'next attempt', 'last error'],
            page.handlerRuns.map((r) => [
              when(r.createdAt),
              r.id,
              r.eventId,
              r.eventType,
              r.installationId,
              statusColour(r.status),
              `${r.attemptCount}/${r.maxAttempts}`,
              when(r.nextAttemptAt),
              oneLine(r.lastError, 40),
            ]),
          )}\n`,
        );
      if (page.nextCursor) out(`${dim(`next page: --cursor ${page.nextCursor}`)}\n`);
    } finally {
      source.close();
    }
  },
});

export const replay = defineCommand({
  meta: {
    name: 'replay',
    description:
      'Run handlers again: one run by id (failed or delivered), or every failed run with --failed --since; each goes back to pending with a fresh retry schedule',
  },
  args: {
    ...configArg,
    ...jsonArg,
    id: { type: 'positional', required: false, description: 'handler run id (hdl_…)' },
    failed: { type: 'boolean', description: 'replay the failed handler runs created in the window (with --since)', default: false },
    since: { type: 'string', description: 'runs created since: a duration ago (2h, 7d) or a date-time', valueHint: 'time' },
    until: { type: 'string', description: 'runs created up to this time (default now)', valueHint: 'time' },
    installation: { type: 'string', description: 'only this installation', valueHint: 'id' },
  },
  async run({ args }) {
    const client = apiClient(configFrom(args));
    if (args.id) {
      if (args.failed || args.since) throw new SwitchyardError('bad_request', 'give a handler run id, or --failed --since, not both');
      const r = await client.post<HandlerRun>(`/api/v1/handler-runs/${encodeURIComponent(String(args.id))}/replay`);
      if (args.json) printJson(r);
      else out(`handler run ${r.id} (${r.eventType} ${r.eventId} → ${r.installationId}) is ${statusColour(r.status)} again\n`);
      return;
    }
    if (!args.failed)
      throw new SwitchyardError('bad_request', 'replay needs a handler run id, or --failed --since', { hint: 'switchyard events replay --failed --since 2h' });
    if (!args.since) throw new SwitchyardError('bad_request', 'replay --failed needs --since: a duration ago (2h, 7d) or a date-time', { where: '--since' });
    checkTimes(args);
    const r = await client.post<{ replayed: number; handlerRuns: string[] }>('/api/v1/handler-runs/replay', {
      failed: true,
      since: args.since,
      until: args.until,
      installation: args.installation,
    });
    if (args.json) printJson(r);
    else {
      out(r.replayed ? `re-enqueued ${r.replayed} failed handler run${r.replayed === 1 ? '' : 's'}\n` : 'no failed handler runs to replay\n');
      if (r.replayed) out(dim('follow them with `switchyard events handlers` or `switchyard logs --follow`\n'));
    }
  },
});
