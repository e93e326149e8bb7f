/**
 * `switchyard logs`: what integration code printed, and every error or limit breach, one block per
 * invocation with its time and request id; `--follow` keeps printing new ones as they happen.
 */
import { defineCommand } from 'citty';
import { SwitchyardError } from '../errors.ts';
import type { InvocationView } from '../runtime/index.ts';
import { apiClient } from './client.ts';
import { configArg } from './common.ts';
import { follow, interruptSignal } from './feed.ts';
import { checkPage, checkTimes, duration, offlineArg, pageArgs, sourceFrom, statusColour, timeArgs } from './inspect.ts';
import { dim, printable, printJson, red, yellow } from './table.ts';

const out = (s: string) => process.stdout.write(s);

const levelColour = (level: string) => (level === 'error' ? red(level.padEnd(5)) : level === 'warn' ? yellow(level.padEnd(5)) : dim(level.padEnd(5)));
const clock = (iso: string) => iso.slice(11, 23);

export function logLine(line: { time: string; level: string; message: string }): string {
  return `  ${clock(line.time)} ${levelColour(line.level)} ${printable(line.message).replace(/\n/g, '\n                      ')}`;
}

/** One invocation: a header line, then each printed line, then its fault (error or limit breach). */
export function invocationBlock(i: InvocationView): string {
  const head = [
    i.createdAt,
    i.requestId,
    i.integration,
    i.installationId ?? '-',
    i.eventType,
    String(i.status),
    statusColour(i.outcome),
    duration(i.durationMs),
    dim(`cpu ${duration(i.cpuMs)}`),
  ].join('  ');
  const lines = i.logs.map(logLine);
  if (i.error)
    lines.push(`  ${red(i.error.kind === 'limit' ? `limit breached (${i.error.limit ?? 'unknown'})` : i.error.kind)}: ${printable(i.error.message)}`);
  return [head, ...lines].join('\n');
}

export default defineCommand({
  meta: { name: 'logs', description: 'What integration code printed, per invocation, with every error and limit breach (--follow to keep watching)' },
  args: {
    ...configArg,
    json: { type: 'boolean', description: 'JSON for scripts ({invocations, nextCursor}; with --follow one object per line)', default: false },
    ...offlineArg,
    integration: { type: 'string', description: 'only this integration', valueHint: 'name' },
    installation: { type: 'string', description: 'only this installation', valueHint: 'id' },
    event: { type: 'string', description: 'only the handlers of this eventId', valueHint: 'eventId' },
    errors: { type: 'boolean', description: 'only invocations that failed (exception, limit breach, crash, 5xx)', default: false },
    follow: { type: 'boolean', alias: ['f'], description: 'keep printing new invocations until interrupted', default: false },
    ...timeArgs,
    ...pageArgs,
  },
  async run({ args }) {
    const filter = { integration: args.integration, installation: args.installation, event: args.event, errors: args.errors || undefined, ...checkTimes(args) };
    const page = checkPage(args);
    if (args.follow && args.offline)
      throw new SwitchyardError('bad_request', '--follow needs the running server; it cannot be combined with --offline', { where: '--follow' });
    const { source, config } = await sourceFrom(args);
    let recent: { invocations: InvocationView[]; nextCursor: string | null };
    try {
      recent = await source.invocations({ ...filter, limit: page.limit ?? '20', cursor: page.cursor });
    } finally {
      source.close();
    }
    // Oldest first, as a log reads; --json keeps the API's order (newest first).
    if (args.json && !args.follow) return printJson(recent);
    const print = (i: InvocationView) => out(args.json ? `${JSON.stringify(i)}\n` : `${invocationBlock(i)}\n`);
    [...recent.invocations].reverse().forEach(print);
    if (!args.follow) {
      if (!recent.invocations.length) out('no invocations\n');
      else if (recent.nextCursor) out(`${dim(`older: --cursor ${recent.nextCursor}`)}\n`);
      return;
    }
    // Follow from the newest one shown (or from the start of the filtered history when none was):
    // nothing recorded between the listing and the stream is missed.
    const client = apiClient(config);
    let lost = false;
    await follow(
      client,
      '/api/v1/logs/stream',
      { integration: args.integration, installation: args.installation, event: args.event, errors: args.errors ? 'true' : undefined, since: args.since },
      {
        after: recent.invocations[0]?.cursor ?? '0',
        signal: interruptSignal(),
        onReady() {
          process.stderr.write(lost ? 'reconnected\n' : 'following invocations (Ctrl-C to stop)\n');
          lost = false;
        },
        onDisconnect() {
          if (!lost) process.stderr.write(`lost the server at ${client.baseUrl}; reconnecting (nothing is missed)…\n`);
          lost = true;
        },
        onEvent(e) {
          if (e.event === 'invocation') print(e.data);
          else if (e.event === 'log')
            out(args.json ? `${JSON.stringify(e.data)}\n` : `${dim(`${e.data.requestId} (after the response)`)}\n${logLine(e.data.line)}\n`);
        },
      },
    );
  },
});
