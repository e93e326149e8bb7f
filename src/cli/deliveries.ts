/**
 * `switchyard deliveries list|show|retry|replay|tail`: see every webhook delivery and attempt,
 * follow them live, and act on failures. Tables for people, `--json` for scripts (the management
 * API's shapes, documented in docs/inspection.md, "JSON shapes").
 */
import { defineCommand } from 'citty';
import { SwitchyardError } from '../errors.ts';
// From the modules themselves, not the webhooks barrel: a CLI process loads only what it runs.
import { sentEventId } from '../webhooks/body.ts';
import { signatureHeaderName } from '../webhooks/schemes.ts';
import type { Attempt, AttemptFeedItem, DeliveryDetail, ReplayAnswer } from '../webhooks/index.ts';
import { apiClient } from './client.ts';
import { configArg, configFrom, jsonArg } from './common.ts';
import { follow, interruptSignal } from './feed.ts';
import {
  attemptResult,
  checkPage,
  checkStatus,
  checkTimes,
  duration,
  offlineArg,
  oneLine,
  pageArgs,
  sourceFrom,
  statusColour,
  timeArgs,
  when,
} from './inspect.ts';
import { createProgress } from './progress.ts';
import { dim, printJson, table } from './table.ts';

const out = (s: string) => process.stdout.write(s);

const list = defineCommand({
  meta: { name: 'list', description: 'Webhook deliveries, newest first' },
  args: {
    ...configArg,
    ...jsonArg,
    ...offlineArg,
    status: { type: 'string', description: 'only this status: pending, retrying, held, delivered, failed, cancelled', valueHint: 'status' },
    type: { type: 'string', description: 'only this event type', valueHint: 'type' },
    installation: { type: 'string', description: 'only this installation', valueHint: 'id' },
    endpoint: { type: 'string', description: 'only deliveries to this endpoint (a URL origin, or a URL taken as its origin)', valueHint: 'url' },
    event: { type: 'string', description: 'only the deliveries of this eventId', valueHint: 'eventId' },
    ...timeArgs,
    ...pageArgs,
  },
  async run({ args }) {
    const query = {
      status: checkStatus(args.status),
      type: args.type,
      installation: args.installation,
      endpoint: args.endpoint,
      event: args.event,
      ...checkTimes(args),
      ...checkPage(args),
    };
    const { source } = await sourceFrom(args);
    try {
      const page = await source.deliveries(query);
      if (args.json) return printJson(page);
      if (!page.deliveries.length) out('no deliveries\n');
      else
        out(
          `${table(
            ['created', 'delivery', 'source event', 'type', 'installation', 'status', 'attempts', 'schedule', 'last', 'next attempt'],
            page.deliveries.map((d) => [
              when(d.createdAt),
              d.id,
              d.eventId,
              d.eventType,
              d.installationId,
              statusColour(d.status),
              d.attemptCount,
              `${d.scheduledAttempts}/${d.maxAttempts}`,
              d.lastStatus ?? oneLine(d.lastError, 32),
              d.held ? 'at resume' : when(d.nextAttemptAt),
            ]),
          )}\n`,
        );
      if (page.nextCursor) out(`${dim(`next page: --cursor ${page.nextCursor}`)}\n`);
    } finally {
      source.close();
    }
  },
});

function attemptRows(attempts: Attempt[]): string {
  return table(
    ['#', 'time', 'trigger', 'result', 'duration', 'outcome', 'next attempt'],
    attempts.map((a) => [
      a.number,
      when(a.startedAt),
      a.manual ? 'manual' : 'auto',
      attemptResult(a),
      duration(a.durationMs),
      statusColour(a.outcome),
      when(a.nextAttemptAt),
    ]),
  );
}

export function printDelivery(d: DeliveryDetail): void {
  const field = (k: string, v: string | number | null | undefined) => (v === null || v === undefined || v === '' ? '' : `  ${k.padEnd(13)}${v}\n`);
  out(`delivery ${d.id}  ${statusColour(d.status)}${d.held ? '  (the installation is paused: sent when it resumes)' : ''}\n`);
  out(
    field('eventId', sentEventId(d)) +
      field('source event', `${d.eventId} (${d.eventType})`) +
      field('installation', d.installationId) +
      field('url', d.url) +
      field('attempts', `${d.attemptCount} in all; ${d.scheduledAttempts} of ${d.maxAttempts} automatic in this schedule`) +
      field('created', when(d.createdAt)) +
      field('completed', when(d.completedAt)) +
      field('next attempt', d.held ? 'at resume' : when(d.nextAttemptAt)) +
      field('last error', d.lastError) +
      field('signature', d.signatureHeader ? `${signatureHeaderName(d.signatureHeader)}: ${d.signatureHeader}` : ''),
  );
  out(`\npayload\n${JSON.stringify(d.payload ?? d.body, null, 2)}\n`);
  if (!d.attempts.length) {
    out('\nno attempts yet\n');
    return;
  }
  out(`\nattempts\n${attemptRows(d.attempts)}\n`);
  for (const a of d.attempts) {
    if (!a.error && !a.responseExcerpt) continue;
    out(`\n#${a.number}\n`);
    if (a.error) out(`  error     ${a.error}\n`);
    if (a.responseExcerpt) out(`  response  ${oneLine(a.responseExcerpt, 200)}${a.responseTruncated ? dim(' (truncated)') : ''}\n`);
  }
}

const show = defineCommand({
  meta: { name: 'show', description: 'One delivery: payload, signature header sent, every attempt' },
  args: { ...configArg, ...jsonArg, ...offlineArg, id: { type: 'positional', required: true, description: 'delivery id (dlv_…)' } },
  async run({ args }) {
    const { source } = await sourceFrom(args);
    try {
      const d = await source.delivery(String(args.id));
      if (args.json) printJson(d);
      else printDelivery(d);
    } finally {
      source.close();
    }
  },
});

const retry = defineCommand({
  meta: { name: 'retry', description: 'Make one attempt of a delivery now (recorded as manual); exits 1 when it does not succeed' },
  args: { ...configArg, ...jsonArg, id: { type: 'positional', required: true, description: 'delivery id (dlv_…)' } },
  async run({ args }) {
    const client = apiClient(configFrom(args));
    const r = await client.post<{ attempt: Attempt; delivery: DeliveryDetail }>(`/api/v1/deliveries/${encodeURIComponent(String(args.id))}/retry`);
    if (args.json) printJson(r);
    else {
      const a = r.attempt;
      out(
        `attempt #${a.number} (manual): ${attemptResult(a)} in ${duration(a.durationMs)}, ${statusColour(a.outcome)}; delivery ${r.delivery.id} is ${statusColour(r.delivery.status)}\n`,
      );
      if (a.error) out(`  error     ${a.error}\n`);
      if (a.responseExcerpt) out(`  response  ${oneLine(a.responseExcerpt, 200)}\n`);
    }
    if (r.attempt.outcome !== 'success') process.exitCode = 1;
  },
});

/** A delivery reached its end by this automatic attempt: delivered, or failed (no automatic attempt left). */
function settled(item: AttemptFeedItem): 'delivered' | 'failed' | undefined {
  if (item.attempt.manual) return undefined;
  if (item.attempt.outcome === 'success') return 'delivered';
  return item.attempt.outcome === 'failed' ? 'failed' : undefined;
}

const REPLAYABLE = ['failed', 'delivered'] as const;

const replay = defineCommand({
  meta: {
    name: 'replay',
    description:
      'Send deliveries again, each back in the queue with a fresh retry schedule: one by id, or every failed (--failed) or delivered (--status delivered) one, optionally since a time; then wait for their outcome',
  },
  args: {
    ...configArg,
    ...jsonArg,
    id: { type: 'positional', required: false, description: 'one delivery id (dlv_…), failed or delivered' },
    failed: { type: 'boolean', description: 'replay the failed deliveries (the same as --status failed)', default: false },
    status: { type: 'string', description: 'replay the deliveries of this status: failed or delivered', valueHint: 'status' },
    since: { type: 'string', description: 'deliveries created since: a duration ago (2h, 7d) or a date-time (default: all)', valueHint: 'time' },
    until: { type: 'string', description: 'deliveries created up to this time (default now)', valueHint: 'time' },
    installation: { type: 'string', description: 'only this installation', valueHint: 'id' },
    type: { type: 'string', description: 'only this event type', valueHint: 'type' },
    endpoint: { type: 'string', description: 'only deliveries to this endpoint (a URL origin)', valueHint: 'url' },
    'dry-run': { type: 'boolean', description: 'say how many deliveries a replay would take and which, changing nothing', default: false },
    wait: { type: 'boolean', description: 'wait for every replayed delivery to be delivered or fail (--no-wait: only re-enqueue)', default: true },
  },
  async run({ args }) {
    const id = args.id ? String(args.id) : undefined;
    const selecting =
      args.failed ||
      args.status !== undefined ||
      args.since !== undefined ||
      args.until !== undefined ||
      args.installation !== undefined ||
      args.type !== undefined ||
      args.endpoint !== undefined;
    if (id && selecting)
      throw new SwitchyardError(
        'bad_request',
        'give one delivery id, or a selection (--failed or --status, --since, --until, --installation, --type, --endpoint), not both',
        {
          hint: 'switchyard deliveries replay dlv_… | switchyard deliveries replay --failed --since 2h',
        },
      );
    if (args.status !== undefined && !(REPLAYABLE as readonly string[]).includes(args.status))
      throw new SwitchyardError(
        'bad_request',
        `--status must be failed or delivered, got "${args.status}" (queued deliveries are sent anyway; cancelled ones have no installation)`,
        {
          where: '--status',
        },
      );
    if (args.failed && args.status !== undefined && args.status !== 'failed')
      throw new SwitchyardError('bad_request', `--failed and --status ${args.status} disagree; give one`, { where: '--status' });
    if (!id && !args.failed && args.status === undefined)
      throw new SwitchyardError('bad_request', 'replay needs a delivery id, --failed or --status delivered', {
        hint: 'switchyard deliveries replay --failed --since 2h',
      });
    checkTimes(args);
    const status = (args.status ?? 'failed') as (typeof REPLAYABLE)[number];
    const what = id ? 'delivery' : `${status} deliveries`;
    const client = apiClient(configFrom(args));
    const selection = { status, since: args.since, until: args.until, installation: args.installation, type: args.type, endpoint: args.endpoint };
    if (args['dry-run']) {
      if (id)
        throw new SwitchyardError('bad_request', '--dry-run goes with a selection (--failed or --status ...), not one delivery id', { where: '--dry-run' });
      const d = await client.post<{ matched: number; deliveries: string[] }>('/api/v1/deliveries/replay', { ...selection, dryRun: true });
      if (args.json) return printJson(d);
      out(`a replay would take ${d.matched} ${status} deliver${d.matched === 1 ? 'y' : 'ies'}; nothing was changed\n`);
      for (const x of d.deliveries.slice(0, 20)) out(`  ${x}\n`);
      if (d.deliveries.length > 20) out(dim(`  … and ${d.deliveries.length - 20} more (--json lists them all)\n`));
      return;
    }

    // Listen first, then replay: no attempt of a replayed delivery can happen before we listen.
    const stop = new AbortController();
    const interrupted = interruptSignal();
    interrupted.addEventListener('abort', () => stop.abort(), { once: true });
    const ids = new Set<string>();
    const early: AttemptFeedItem[] = [];
    const tally = { delivered: 0, failed: 0 };
    let progress: ReturnType<typeof createProgress> | undefined;
    const count = (item: AttemptFeedItem) => {
      const end = settled(item);
      if (!end || !ids.delete(item.deliveryId)) return;
      tally[end]++;
      progress?.update(tally.delivered + tally.failed, `delivered ${tally.delivered}  failed ${tally.failed}`);
      if (!ids.size) stop.abort();
    };
    let ready!: () => void;
    const isReady = new Promise<void>((r) => (ready = r));
    const following = args.wait
      ? follow(
          client,
          '/api/v1/deliveries/stream',
          { installation: args.installation },
          {
            signal: stop.signal,
            onReady: () => ready(),
            onEvent: (e) => (e.event === 'attempt' ? (ids.size || progress ? count(e.data) : early.push(e.data)) : undefined),
          },
        )
      : (ready(), Promise.resolve());
    await Promise.race([isReady, following]);

    let r: ReplayAnswer;
    try {
      if (id) {
        const d = await client.post<DeliveryDetail>(`/api/v1/deliveries/${encodeURIComponent(id)}/replay`);
        r = { replayed: 1, deliveries: [d.id], held: d.status === 'held' ? [d.id] : [] };
      } else r = await client.post<ReplayAnswer>('/api/v1/deliveries/replay', selection);
    } catch (e) {
      stop.abort();
      await following;
      throw e;
    }
    const held = new Set(r.held);
    const heldNote = held.size ? `, ${held.size} held (installation paused: sent when it resumes)` : '';
    const sending = r.deliveries.filter((d) => !held.has(d));
    if (!sending.length || !args.wait) {
      stop.abort();
      await following;
      if (args.json) printJson(r);
      else if (!r.replayed) out(`no ${what} to replay\n`);
      else out(`re-enqueued ${id ?? `${r.replayed} ${status} deliver${r.replayed === 1 ? 'y' : 'ies'}`}${heldNote}\n`);
      return;
    }
    for (const d of sending) ids.add(d);
    progress = createProgress(sending.length, 'replaying');
    progress.update(0);
    for (const item of early.splice(0)) count(item);
    await following;
    progress.end();
    const pending = ids.size;
    if (args.json) printJson({ ...r, ...tally, pending });
    else {
      const again = status === 'failed' ? ' again' : '';
      if (id) out(`replayed ${id}: ${tally.delivered ? 'delivered' : tally.failed ? 'failed again' : 'still in progress'}\n`);
      else
        out(
          `replayed ${r.replayed} deliver${r.replayed === 1 ? 'y' : 'ies'}: ${tally.delivered} delivered, ${tally.failed} failed${again}${pending ? `, ${pending} still in progress` : ''}${heldNote}\n`,
        );
      if (pending && interrupted.aborted) out(dim('stopped waiting; the server keeps sending them (see `switchyard deliveries list`)\n'));
    }
    if (tally.failed) process.exitCode = 1;
  },
});

/** One line per attempt, for people. */
export function attemptLine(item: AttemptFeedItem): string {
  const a = item.attempt;
  const next = a.nextAttemptAt ? `next attempt ${when(a.nextAttemptAt)}` : '';
  return [
    a.startedAt,
    item.deliveryId,
    item.eventType,
    item.installationId,
    `#${a.number}${a.manual ? ' manual' : ''}`,
    attemptResult(a) || '-',
    duration(a.durationMs) || '-',
    statusColour(a.outcome),
    a.outcome === 'success' ? '' : oneLine(a.error, 60),
    next,
  ]
    .filter(Boolean)
    .join('  ');
}

const tail = defineCommand({
  meta: { name: 'tail', description: 'Follow delivery attempts live until interrupted (resumes after a lost connection without missing any)' },
  args: {
    ...configArg,
    json: { type: 'boolean', description: 'one JSON object per attempt per line (NDJSON)', default: false },
    installation: { type: 'string', description: 'only this installation', valueHint: 'id' },
    type: { type: 'string', description: 'only this event type', valueHint: 'type' },
    after: { type: 'string', description: 'start after this cursor (the `cursor` of an attempt already seen) instead of now', valueHint: 'cursor' },
  },
  async run({ args }) {
    if (args.after !== undefined && !/^\d+$/.test(args.after))
      throw new SwitchyardError('bad_request', `--after must be an attempt cursor, got "${args.after}"`, { where: '--after' });
    const client = apiClient(configFrom(args));
    const signal = interruptSignal();
    let seen = 0;
    let lost = false;
    // Where a later `tail --after` goes on from: the last attempt printed, else where this one started.
    let last: string | undefined;
    await follow(
      client,
      '/api/v1/deliveries/stream',
      { installation: args.installation, type: args.type },
      {
        after: args.after,
        signal,
        onReady(cursor) {
          last ??= cursor;
          process.stderr.write(
            lost
              ? 'reconnected\n'
              : args.after === undefined
                ? 'following new delivery attempts (Ctrl-C to stop)\n'
                : `following the delivery attempts after --after ${args.after}, then new ones (Ctrl-C to stop)\n`,
          );
          lost = false;
        },
        onDisconnect() {
          if (!lost) process.stderr.write(`lost the server at ${client.baseUrl}; reconnecting (nothing is missed)…\n`);
          lost = true;
        },
        onEvent(e) {
          if (e.event !== 'attempt') return;
          seen++;
          last = (e.data as AttemptFeedItem).cursor ?? last;
          out(args.json ? `${JSON.stringify(e.data)}\n` : `${attemptLine(e.data)}\n`);
        },
      },
    );
    process.stderr.write(
      `stopped after ${seen} attempt${seen === 1 ? '' : 's'}${last !== undefined ? `; to go on from here: switchyard deliveries tail --after ${last}` : ''}\n`,
    );
  },
});

export default defineCommand({
  meta: { name: 'deliveries', description: 'Inspect webhook deliveries and attempts, follow them live, retry and replay failures' },
  subCommands: { list, show, retry, replay, tail },
});
