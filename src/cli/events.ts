/** `switchyard events send|list|show|handlers|replay`: trigger platform events (with sample payloads, or many from a file or stdin), read their history, replay failed handler runs. */
import { readFileSync } from 'node:fs';
import { defineCommand } from 'citty';
import { SwitchyardError } from '../errors.ts';
// From the modules themselves, not the events barrel: a CLI process loads only what it runs.
import { EVENT_TYPES, MAX_BATCH_EVENTS, samplePayload, setPath } from '../events/types.ts';
import type { BatchItemResult, BatchResult, IngestResult } from '../events/index.ts';
import { apiClient } from './client.ts';
import { configArg, configFrom, jsonArg } from './common.ts';
import { repeated } from './sets.ts';
import { dim, green, printJson, red } from './table.ts';

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

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

function parses(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

function applySets(payload: Record<string, unknown>, sets: string[]): void {
  for (const s of sets) {
    const eq = s.indexOf('=');
    if (eq <= 0) throw new SwitchyardError('bad_request', `--set needs key=value, got "${s}"`, { hint: 'e.g. --set visitor.ip=198.51.100.4' });
    setPath(payload, s.slice(0, eq), overrideValue(s.slice(eq + 1)));
  }
}

/**
 * What `--data` or `--file` holds: one JSON object, a JSON array of them, or NDJSON (one per line;
 * blank lines skipped). `lines` gives each item's line number for NDJSON.
 */
function parseEvents(text: string, source: string): { single: unknown } | { items: unknown[]; lines?: number[] } {
  let whole: unknown;
  try {
    whole = JSON.parse(text);
  } catch (e) {
    const rows = text.split('\n');
    const first = rows.find((r) => r.trim());
    // More than one non-blank line, the first a JSON document of its own: NDJSON.
    if (rows.filter((r) => r.trim()).length > 1 && first !== undefined && parses(first)) {
      const items: unknown[] = [];
      const lines: number[] = [];
      rows.forEach((row, i) => {
        if (!row.trim()) return;
        try {
          items.push(JSON.parse(row));
          lines.push(i + 1);
        } catch (e) {
          throw new SwitchyardError('bad_request', `${source} line ${i + 1} is not valid JSON: ${(e as Error).message}`, {
            where: `${source}:${i + 1}`,
            hint: 'one JSON object per line (NDJSON), a JSON array of objects, or one object',
          });
        }
      });
      return { items, lines };
    }
    throw new SwitchyardError('bad_request', `${source} is not valid JSON: ${(e as Error).message}`, { where: source });
  }
  if (Array.isArray(whole)) return { items: whole };
  if (!isObject(whole)) throw new SwitchyardError('bad_request', `${source} must hold a JSON object, a JSON array of them, or NDJSON`, { where: source });
  return { single: whole };
}

/**
 * The payloads `events send` posts: the sample (or --data / --file), then every --set. `--data` and
 * `--file` (`-` for stdin) may hold many events (a JSON array or NDJSON): then `type` is the default
 * type of the items that have none, and every --set applies to each of them.
 */
export function buildPayloads(
  type: string | undefined,
  opts: { data?: string; file?: string; sets: string[]; stdin?: () => string },
): { single: Record<string, unknown> } | { items: unknown[]; lines?: number[] } {
  if (opts.data !== undefined && opts.file !== undefined) throw new SwitchyardError('bad_request', 'use --data or --file, not both');
  if (opts.data !== undefined || opts.file !== undefined) {
    const source = opts.file === '-' ? 'stdin' : (opts.file ?? '--data');
    let text: string;
    try {
      text = opts.file === '-' ? (opts.stdin ?? (() => readFileSync(0, 'utf8')))() : opts.file !== undefined ? readFileSync(opts.file, 'utf8') : opts.data!;
    } catch (e) {
      throw new SwitchyardError('bad_request', `cannot read ${source}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`, { where: '--file' });
    }
    const parsed = parseEvents(text, source);
    const all = 'single' in parsed ? [parsed.single] : parsed.items;
    for (const item of all) {
      if (!isObject(item)) continue; // the server refuses it, by its index
      if (type !== undefined) item.type ??= type;
      applySets(item, opts.sets);
    }
    return 'single' in parsed ? { single: parsed.single as Record<string, unknown> } : parsed;
  }
  if (type === undefined)
    throw new SwitchyardError('bad_request', 'name an event type, or give the events with --data or --file', { hint: `one of ${EVENT_TYPES.join(', ')}` });
  if (!(EVENT_TYPES as readonly string[]).includes(type))
    throw new SwitchyardError('bad_request', `"${type}" is not a platform event type`, { hint: `one of ${EVENT_TYPES.join(', ')}` });
  const payload = samplePayload(type);
  applySets(payload, opts.sets);
  return { single: payload };
}

/** The payload of one event (`events send` without a batch): the sample or --data / --file, then every --set. */
export function buildPayload(type: string, opts: { data?: string; file?: string; sets: string[] }): Record<string, unknown> {
  const built = buildPayloads(type, opts);
  if (!('single' in built)) throw new SwitchyardError('bad_request', `${opts.file ?? '--data'} must hold a JSON object`, { where: opts.file ?? '--data' });
  return built.single;
}

/** A batch answer's item, its index (and the paths in its error) counted from the start of the input. */
function rebase(r: BatchItemResult, offset: number): BatchItemResult {
  if (!offset) return r;
  const index = r.index + offset;
  if (!('error' in r)) return { ...r, index };
  const from = `[${r.index}]`;
  const to = `[${index}]`;
  const error = {
    ...r.error,
    message: r.error.message.split(from).join(to),
    ...(r.error.where ? { where: r.error.where.replace(from, to) } : {}),
    ...(r.error.problems ? { problems: r.error.problems.map((p) => ({ ...p, where: p.where.replace(from, to) })) } : {}),
  };
  return { ...r, index, error };
}

const send = defineCommand({
  meta: {
    name: 'send',
    description: `Send a platform event to the running server (a sample payload per type: ${EVENT_TYPES.join(', ')}), or many from a JSON array or NDJSON (--file, - for stdin) in batches of ${MAX_BATCH_EVENTS}`,
  },
  args: {
    ...configArg,
    ...jsonArg,
    type: { type: 'positional', required: false, description: 'event type (with --data/--file: the type of events that have none)' },
    data: { type: 'string', description: 'the whole payload as JSON (instead of the sample); a JSON array or NDJSON sends many' },
    file: {
      type: 'string',
      description: `read the payload from a JSON file (- for stdin); a JSON array or NDJSON sends many, in batches of ${MAX_BATCH_EVENTS}`,
    },
    set: { type: 'string', description: 'override one field, key=value, dotted paths allowed (repeatable): --set visitor.ip=198.51.100.4' },
    print: { type: 'boolean', description: 'print the payload instead of sending it (NDJSON for many)', default: false },
  },
  async run({ args, rawArgs }) {
    const built = buildPayloads(args.type === undefined || args.type === '' ? undefined : String(args.type), {
      data: args.data,
      file: args.file,
      sets: repeated(rawArgs, 'set'),
    });
    if ('items' in built) return sendMany(built, args);
    const payload = built.single;
    if (args.print) {
      printJson(payload);
      return 0;
    }
    const client = apiClient(configFrom(args));
    const r = await client.post<IngestResult>('/api/v1/events', payload);
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

/**
 * Many events: POSTed as JSON arrays of up to MAX_BATCH_EVENTS, one batch after the other. Items the
 * server refuses are listed (by index from the start of the input, and line for NDJSON); any
 * refusal makes the exit code 2, like a single invalid event. A batch over server.batch_body_limit
 * is sent again in halves; one refused whole otherwise (storage failing) stops the command: the
 * batches before it are stored, none after it is sent.
 */
async function sendMany(built: { items: unknown[]; lines?: number[] }, args: { json?: boolean; print?: boolean; config?: string }): Promise<number> {
  const { items, lines } = built;
  if (args.print) {
    for (const item of items) process.stdout.write(`${JSON.stringify(item)}\n`);
    return 0;
  }
  if (!items.length) throw new SwitchyardError('bad_request', 'no events to send: the input holds none');
  const client = apiClient(configFrom(args));
  const total: BatchResult = { stored: 0, duplicates: 0, rejected: 0, results: [] };
  let batches = 0;
  let size = MAX_BATCH_EVENTS;
  for (let offset = 0; offset < items.length; ) {
    let r: BatchResult;
    try {
      r = await client.post<BatchResult>('/api/v1/events', items.slice(offset, offset + size));
    } catch (e) {
      // Large events: a batch of `size` is over server.batch_body_limit (nothing of it was stored), so halve it.
      if (e instanceof SwitchyardError && e.status === 413 && e.where === 'server.batch_body_limit' && size > 1) {
        size = Math.ceil(size / 2);
        continue;
      }
      throw e;
    }
    batches++;
    total.stored += r.stored;
    total.duplicates += r.duplicates;
    total.rejected += r.rejected;
    for (const item of r.results) total.results.push(rebase(item, offset));
    offset += r.results.length;
  }
  if (args.json) printJson(total);
  else {
    const n = (k: number, one: string, many = `${one}s`) => `${k} ${k === 1 ? one : many}`;
    process.stdout.write(
      `${green('sent')} ${n(items.length, 'event')} in ${n(batches, 'batch', 'batches')}: ${total.stored} stored, ${n(total.duplicates, 'duplicate')} (already received), ${total.rejected} refused\n`,
    );
    for (const r of total.results) {
      if (!('error' in r)) continue;
      const line = lines ? ` ${dim(`line ${lines[r.index]}`)}` : '';
      process.stdout.write(`  ${red(`[${r.index}]`)}${line} ${r.error.message}\n`);
    }
  }
  if (total.rejected) process.exitCode = 2;
  return total.rejected ? 2 : 0;
}

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
