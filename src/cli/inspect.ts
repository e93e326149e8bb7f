/**
 * What the inspection commands (deliveries, events, logs) share: one source of data, either the
 * running server's management API or, with `--offline`, the store itself (the SQLite file, or
 * PostgreSQL when `store:` names it), read-only; argument checks that fail before anything is
 * contacted (exit 2); and the few formats every table uses.
 */
import { SwitchyardError } from '../errors.ts';
import type { LoadedConfig } from '../config/index.ts';
import type { InvocationView } from '../runtime/index.ts';
import type { EventDetail, HandlerRun, StoredEvent } from '../events/index.ts';
import { readTime } from '../schema/time.ts';
import { wholeNumber } from '../http/params.ts';
import type { Attempt, Delivery, DeliveryDetail, DeliveryStatus } from '../webhooks/index.ts';
import { apiClient, type ApiClient } from './client.ts';
import { configFrom } from './common.ts';
import { dim, green, printable, red, yellow } from './table.ts';

export interface Page {
  limit?: string;
  cursor?: string;
}
export interface DeliveryQuery extends Page {
  status?: string;
  type?: string;
  installation?: string;
  /** A URL origin (or a URL, taken as its origin). */
  endpoint?: string;
  event?: string;
  since?: string;
  until?: string;
}
export interface EventQuery extends Page {
  type?: string;
  installation?: string;
  since?: string;
  until?: string;
}
export interface InvocationQuery extends Page {
  integration?: string;
  installation?: string;
  event?: string;
  errors?: boolean;
  since?: string;
  until?: string;
}

export interface HandlerRunQuery extends DeliveryQuery {}

export type { EventDetail };

/** Read-only data, from the server or from the SQLite file. Same shapes either way. */
export interface InspectionSource {
  offline: boolean;
  deliveries(q: DeliveryQuery): Promise<{ deliveries: Delivery[]; nextCursor: string | null }>;
  delivery(id: string): Promise<DeliveryDetail>;
  events(q: EventQuery): Promise<{ events: StoredEvent[]; nextCursor: string | null }>;
  event(id: string): Promise<EventDetail>;
  invocations(q: InvocationQuery): Promise<{ invocations: InvocationView[]; nextCursor: string | null }>;
  invocation(id: string): Promise<InvocationView>;
  handlerRuns(q: HandlerRunQuery): Promise<{ handlerRuns: HandlerRun[]; nextCursor: string | null }>;
  close(): void;
}

export const offlineArg = {
  offline: {
    type: 'boolean',
    description: 'read the SQLite file in data_dir directly instead of asking the server (read-only; works while the server runs or is down)',
    default: false,
  },
} as const;

export const pageArgs = {
  limit: { type: 'string', description: 'at most this many (1-500)', valueHint: 'n' },
  cursor: { type: 'string', description: 'the next cursor printed by the previous page', valueHint: 'cursor' },
} as const;

export const timeArgs = {
  since: { type: 'string', description: 'from this time: a duration ago (15m, 2h, 7d) or a date-time (2025-01-31T12:00:00Z)', valueHint: 'time' },
  until: { type: 'string', description: 'up to this time (same forms as --since)', valueHint: 'time' },
} as const;

/** The API answers "server not running" in one line; read-only commands can add what to do instead. */
function withOfflineHint(e: unknown): never {
  if (e instanceof SwitchyardError && e.code === 'server_unreachable')
    throw new SwitchyardError('server_unreachable', e.message, {
      hint: 'start it with `switchyard serve`, or add --offline to read the database directly',
      cause: e,
    });
  throw e;
}

export function onlineSource(client: ApiClient): InspectionSource {
  const get = <T>(path: string, q?: Record<string, string | boolean | undefined>) => client.get<T>(path, q).catch(withOfflineHint);
  const enc = encodeURIComponent;
  return {
    offline: false,
    deliveries: (q) => get('/api/v1/deliveries', { ...q }),
    delivery: (id) => get(`/api/v1/deliveries/${enc(id)}`),
    events: (q) => get('/api/v1/events', { ...q }),
    event: (id) => get(`/api/v1/events/${enc(id)}`),
    invocations: (q) => get('/api/v1/logs', { ...q, errors: q.errors ? 'true' : undefined }),
    invocation: (id) => get(`/api/v1/logs/${enc(id)}`),
    handlerRuns: (q) => get('/api/v1/handler-runs', { ...q }),
    close() {},
  };
}

/** The source a read-only command uses: `--offline` reads the file, otherwise the API. */
export async function sourceFrom(args: { config?: string; offline?: boolean }): Promise<{ source: InspectionSource; config: LoadedConfig }> {
  const config = configFrom(args);
  if (args.offline) {
    const { offlineSource } = await import('./offline.ts');
    return { source: await offlineSource(config), config };
  }
  return { source: onlineSource(apiClient(config)), config };
}

// --- Checks that fail fast, before the server is asked (exit 2). The server checks the same; these
// keep the commands from loading the server's modules (start-up time) and serve --offline too. ---

const DELIVERY_STATUSES = ['pending', 'retrying', 'held', 'delivered', 'failed', 'cancelled'] as const satisfies readonly DeliveryStatus[];
// Compile-time check that the list above names every status of the queue.
const everyStatus: Exclude<DeliveryStatus, (typeof DELIVERY_STATUSES)[number]> extends never ? true : never = true;
void everyStatus;

export function checkStatus(status: string | undefined): string | undefined {
  if (status === undefined || status === '') return undefined;
  if (!(DELIVERY_STATUSES as readonly string[]).includes(status))
    throw new SwitchyardError('bad_request', `--status must be one of ${DELIVERY_STATUSES.join(', ')}, got "${status}"`, { where: '--status' });
  return status;
}

export function checkPage(args: { limit?: string; cursor?: string }): Page {
  if (args.limit !== undefined && !((wholeNumber(args.limit, 500) ?? 0) >= 1))
    throw new SwitchyardError('bad_request', `--limit must be a whole number from 1 to 500, got "${args.limit}"`, { where: '--limit' });
  if (args.cursor !== undefined && wholeNumber(args.cursor) === undefined)
    throw new SwitchyardError('bad_request', `--cursor must be the next cursor printed by a previous page, got "${args.cursor}"`, { where: '--cursor' });
  return { limit: args.limit, cursor: args.cursor };
}

export function checkTimes(args: { since?: string; until?: string }): { since?: string; until?: string } {
  for (const name of ['since', 'until'] as const) {
    const v = args[name];
    // The server reads the same forms, with the same bounds (src/schema/time.ts).
    const at = v === undefined || v === '' ? undefined : readTime(v);
    if (typeof at === 'object')
      throw new SwitchyardError('bad_request', `--${name} ${at.error}`, { where: `--${name}`, ...(at.hint ? { hint: at.hint } : {}) });
  }
  return { since: args.since, until: args.until };
}

// --- Formats. Times are UTC ISO-8601, as the API gives them. ---

/** `2025-01-31T12:00:01Z`: an ISO time to the second. */
export const when = (iso: string | null | undefined) => (iso ? iso.replace(/\.\d{3}Z$/, 'Z') : '');

export function duration(ms: number | null | undefined): string {
  if (ms === null || ms === undefined) return '';
  if (ms < 1000) return `${ms < 10 ? ms.toFixed(1) : Math.round(ms)} ms`;
  return `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`;
}

/** Delivery statuses and attempt outcomes (one vocabulary: webhooks/policy.ts), coloured alike. */
export const statusColour = (s: string) =>
  s === 'delivered' || s === 'success' || s === 'ok'
    ? green(s)
    : s === 'failed'
      ? red(s)
      : s === 'pending' || s === 'retrying' || s === 'retry' || s === 'held'
        ? yellow(s)
        : s === 'cancelled' || s === 'interrupted'
          ? dim(s)
          : red(s);

/** What an attempt got back: the HTTP status, else the error code (ECONNREFUSED, ETIMEDOUT…). */
export function attemptResult(a: Pick<Attempt, 'status' | 'errorCode' | 'error'>): string {
  if (a.status !== null) return String(a.status);
  return a.errorCode ?? (a.error ? 'error' : '');
}

/** One line, at most `max` characters, for table cells and excerpts. */
export function oneLine(s: string | null | undefined, max = 80): string {
  if (!s) return '';
  const flat = printable(s.replace(/\s+/g, ' ').trim());
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat;
}
