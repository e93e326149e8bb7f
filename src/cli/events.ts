/** `switchyard events send|list|show|handlers|replay`: trigger platform events (with sample payloads), read their history, replay failed handler runs. */
import { readFileSync } from 'node:fs';
import { defineCommand } from 'citty';
import { SwitchyardError } from '../errors.ts';
import { EVENT_TYPES, samplePayload, setPath } from '../events/index.ts';
import { apiClient } from './client.ts';
import { configArg, configFrom, jsonArg } from './common.ts';
import { repeated } from './sets.ts';
import { dim, green, printJson } from './table.ts';

/** `--set` values are strings (every field of spec 2.8 is); JSON objects, lists and quoted strings are parsed. */
function overrideValue(raw: string): unknown {
  if (/^\s*[[{"]/.test(raw)) {
    try {
      return JSON.parse(raw);
    } catch (e) {
      throw new SwitchyardError('bad_request', `--set value ${raw} looks like JSON but is not: ${(e as Error).message}`);
    }
  }
  return raw;
}

/** The payload `events send` posts: the sample (or --data / --file), then every --set. */
export function buildPayload(type: string, opts: { data?: string; file?: string; sets: string[] }): Record<string, unknown> {
  if (opts.data !== undefined && opts.file !== undefined) throw new SwitchyardError('bad_request', 'use --data or --file, not both');
  let payload: Record<string, unknown>;
  if (opts.data !== undefined || opts.file !== undefined) {
    let text: string;
    try {
      text = opts.file !== undefined ? readFileSync(opts.file, 'utf8') : opts.data!;
    } catch (e) {
      throw new SwitchyardError('bad_request', `cannot read ${opts.file}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`, { where: '--file' });
    }
    try {
      payload = JSON.parse(text);
    } catch (e) {
      throw new SwitchyardError('bad_request', `${opts.file ?? '--data'} is not valid JSON: ${(e as Error).message}`, { where: opts.file ?? '--data' });
    }
    if (!payload || typeof payload !== 'object' || Array.isArray(payload))
      throw new SwitchyardError('bad_request', `${opts.file ?? '--data'} must hold a JSON object`, { where: opts.file ?? '--data' });
    payload.type ??= type;
  } else {
    if (!(EVENT_TYPES as readonly string[]).includes(type))
      throw new SwitchyardError('bad_request', `"${type}" is not a platform event type`, { hint: `one of ${EVENT_TYPES.join(', ')}` });
    payload = samplePayload(type);
  }
  for (const s of opts.sets) {
    const eq = s.indexOf('=');
    if (eq <= 0) throw new SwitchyardError('bad_request', `--set needs key=value, got "${s}"`, { hint: 'e.g. --set visitor.ip=198.51.100.4' });
    setPath(payload, s.slice(0, eq), overrideValue(s.slice(eq + 1)));
  }
  return payload;
}

const send = defineCommand({
  meta: { name: 'send', description: `Send a platform event to the running server (a sample payload per type: ${EVENT_TYPES.join(', ')})` },
  args: {
    ...configArg,
    ...jsonArg,
    type: { type: 'positional', required: true, description: 'event type' },
    data: { type: 'string', description: 'the whole payload as JSON (instead of the sample)' },
    file: { type: 'string', description: 'read the payload from a JSON file' },
    set: { type: 'string', description: 'override one field, key=value, dotted paths allowed (repeatable): --set visitor.ip=198.51.100.4' },
    print: { type: 'boolean', description: 'print the payload instead of sending it', default: false },
  },
  async run({ args, rawArgs }) {
    const payload = buildPayload(String(args.type), { data: args.data, file: args.file, sets: repeated(rawArgs, 'set') });
    if (args.print) {
      printJson(payload);
      return 0;
    }
    const client = apiClient(configFrom(args));
    const r = await client.post<{
      eventId: string;
      type: string;
      duplicate: boolean;
      deliveries: Array<{ id: string; installationId: string }>;
      handlers?: Array<{ id: string; installationId: string }>;
    }>(
      '/api/v1/events',
      payload,
    );
    if (args.json) printJson(r);
    else if (r.duplicate) process.stdout.write(`${r.eventId} was already received: nothing sent again\n`);
    else {
      const runs = r.handlers ?? [];
      process.stdout.write(
        `${green('sent')} ${r.type} ${r.eventId}: ${r.deliveries.length} webhook deliver${r.deliveries.length === 1 ? 'y' : 'ies'}, ${runs.length} handler run${runs.length === 1 ? '' : 's'}\n`,
      );
      for (const d of [...r.deliveries, ...runs]) process.stdout.write(`  ${d.id}  ${dim(`installation ${d.installationId}`)}\n`);
    }
    return 0;
  },
});

export default defineCommand({
  meta: { name: 'events', description: 'Send platform events, read their history, see and replay their handler runs' },
  // list and show live in events-inspect.ts (with the handlers that ran, and --offline).
  subCommands: {
    send,
    list: () => import('./events-inspect.ts').then((m) => m.list),
    show: () => import('./events-inspect.ts').then((m) => m.show),
    handlers: () => import('./events-handlers.ts').then((m) => m.handlers),
    replay: () => import('./events-handlers.ts').then((m) => m.replay),
  },
});
