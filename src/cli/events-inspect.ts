/**
 * `switchyard events list|show <eventId>`: the events received, and for one event its payload,
 * its handler runs (per installation: status, attempts, schedule), every attempt (the invocations
 * carrying its eventId) and the webhook deliveries it produced.
 */
import { defineCommand } from 'citty';
import type { InvocationView } from '../runtime/index.ts';
import { configArg, jsonArg } from './common.ts';
import { checkPage, checkTimes, duration, offlineArg, oneLine, pageArgs, sourceFrom, statusColour, timeArgs, when, type EventDetail } from './inspect.ts';
import { dim, printJson, table } from './table.ts';

const out = (s: string) => process.stdout.write(s);

export const list = defineCommand({
  meta: { name: 'list', description: 'Events received, newest first' },
  args: {
    ...configArg,
    ...jsonArg,
    ...offlineArg,
    type: { type: 'string', description: 'only this event type', valueHint: 'type' },
    installation: { type: 'string', description: 'only events naming this installation', valueHint: 'id' },
    ...timeArgs,
    ...pageArgs,
  },
  async run({ args }) {
    const query = { type: args.type, installation: args.installation, ...checkTimes(args), ...checkPage(args) };
    const { source } = await sourceFrom(args);
    try {
      const page = await source.events(query);
      if (args.json) return printJson(page);
      if (!page.events.length) out('no events\n');
      else
        out(
          `${table(
            ['received', 'event', 'type', 'installation', 'deliveries'],
            page.events.map((e) => [when(e.receivedAt), e.eventId, e.type, e.installationId ?? '', e.deliveryCount]),
          )}\n`,
        );
      if (page.nextCursor) out(`${dim(`next page: --cursor ${page.nextCursor}`)}\n`);
    } finally {
      source.close();
    }
  },
});

/** `events show --json`: the event, its deliveries and handler runs, and its handlers' invocations (InvocationView), oldest first. */
export type EventReport = EventDetail & { handlers: InvocationView[] };

export const show = defineCommand({
  meta: { name: 'show', description: 'One event: its payload, its handler runs (status, attempts) with every invocation, and its webhook deliveries' },
  args: { ...configArg, ...jsonArg, ...offlineArg, id: { type: 'positional', required: true, description: 'eventId' } },
  async run({ args }) {
    const id = String(args.id);
    const { source } = await sourceFrom(args);
    let report: EventReport;
    try {
      const event = await source.event(id);
      const handlers = (await source.invocations({ event: id, limit: '500' })).invocations.reverse();
      report = { ...event, handlers };
    } finally {
      source.close();
    }
    if (args.json) return printJson(report);

    out(`event ${report.eventId}  ${report.type}  received ${when(report.receivedAt)}\n\npayload\n${JSON.stringify(report.payload, null, 2)}\n`);
    const runs = report.handlerRuns ?? [];
    if (runs.length)
      out(
        `\nhandler runs\n${table(
          ['run', 'installation', 'integration', 'status', 'attempts', 'next attempt', 'last error'],
          runs.map((r) => [
            r.id,
            r.installationId,
            r.integration,
            statusColour(r.status) + (r.running ? dim(' (running)') : ''),
            `${r.attemptCount}/${r.maxAttempts}`,
            when(r.nextAttemptAt),
            oneLine(r.lastError, 60),
          ]),
        )}\n`,
      );
    if (runs.some((r) => r.status === 'failed')) out(dim(`run failed ones again: switchyard events replay <run>\n`));
    if (report.handlers.length) {
      out(
        `\nhandler attempts\n${table(
          ['installation', 'integration', 'outcome', 'status', 'duration', 'request', 'error'],
          report.handlers.map((h) => [
            h.installationId ?? '',
            h.integration,
            statusColour(h.outcome),
            h.status,
            duration(h.durationMs),
            h.requestId,
            h.error ? oneLine(`${h.error.limit ? `${h.error.limit}: ` : ''}${h.error.message}`, 60) : '',
          ]),
        )}\n`,
      );
      out(dim(`what they printed: switchyard logs --event ${report.eventId}\n`));
    } else if (!runs.length) out('\nno integration handles this event\n');
    if (report.deliveries.length)
      out(
        `\ndeliveries\n${table(
          ['delivery', 'installation', 'status', 'attempts', 'last', 'url'],
          report.deliveries.map((d) => [
            d.id,
            d.installationId,
            statusColour(d.status),
            `${d.attemptCount}/${d.maxAttempts}`,
            d.lastStatus ?? oneLine(d.lastError, 32),
            d.url,
          ]),
        )}\n`,
      );
    else out('\nno webhook deliveries\n');
  },
});
