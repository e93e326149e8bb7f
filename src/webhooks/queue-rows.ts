/**
 * The delivery queue's rows and what the sender gets of them (a claimed delivery, the attempt it
 * records, the state it moves the delivery to), with the SQL the queue's stages share.
 */
import type { AttemptOutcome } from './policy.ts';
import { hideUrlCredentials } from '../log/index.ts';
import type { Attempt, DeliveryStatus } from './views.ts';

/** What the sender needs to make one attempt. */
export interface Claimed {
  seq: number;
  id: string;
  url: string;
  origin: string;
  body: string;
  eventId: string;
  installationId: string;
  eventType: string;
  status: DeliveryStatus;
  attempts: number;
  nextAttemptAt: number | null;
  createdAt: number;
}

export interface AttemptRecord {
  manual: boolean;
  startedAt: number;
  durationMs: number | null;
  url: string;
  signatureHeader: string | null;
  status: number | null;
  outcome: AttemptOutcome;
  error: string | null;
  errorCode: string | null;
  responseExcerpt: string | null;
  responseTruncated: boolean;
  nextAttemptAt: number | null;
}

export interface NextState {
  status: DeliveryStatus;
  attempts: number;
  nextAttemptAt: number | null;
  completedAt: number | null;
}

export interface Row {
  seq: number;
  id: string;
  event_id: string;
  event_type: string;
  installation_id: string;
  url: string;
  origin: string;
  body: string;
  status: DeliveryStatus;
  attempts: number;
  next_attempt_at: number | null;
  lease_until: number | null;
  created_at: number;
  updated_at: number;
  completed_at: number | null;
  last_status: number | null;
  last_error: string | null;
  attempt_total: number;
}

export interface AttemptRow {
  number: number;
  manual: number;
  started_at: number;
  duration_ms: number | null;
  url: string;
  signature: string | null;
  status: number | null;
  outcome: AttemptOutcome;
  error: string | null;
  error_code: string | null;
  response_excerpt: string | null;
  response_truncated: number;
  next_attempt_at: number | null;
}

export const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

/** An attempt as the API shows it (credentials in URLs hidden), from its record in memory or its row (attemptOfRow). */
export function attemptView(r: AttemptRecord, number: number): Attempt {
  return {
    number,
    manual: r.manual,
    startedAt: iso(r.startedAt)!,
    durationMs: r.durationMs === null ? null : Math.round(r.durationMs * 100) / 100,
    url: hideUrlCredentials(r.url),
    signatureHeader: r.signatureHeader,
    status: r.status,
    outcome: r.outcome,
    error: r.error && hideUrlCredentials(r.error),
    errorCode: r.errorCode,
    responseExcerpt: r.responseExcerpt,
    responseTruncated: r.responseTruncated,
    nextAttemptAt: iso(r.nextAttemptAt),
  };
}

/** A stored attempt's row as its record. */
export const attemptOfRow = (a: AttemptRow): AttemptRecord => ({
  manual: a.manual === 1,
  startedAt: a.started_at,
  durationMs: a.duration_ms,
  url: a.url,
  signatureHeader: a.signature,
  status: a.status,
  outcome: a.outcome,
  error: a.error,
  errorCode: a.error_code,
  responseExcerpt: a.response_excerpt,
  responseTruncated: a.response_truncated === 1,
  nextAttemptAt: a.next_attempt_at,
});

/**
 * Longest origin stored whole. The origin leads the due index (origin, next_attempt_at, seq), and
 * PostgreSQL refuses an index entry over 2,704 bytes: one installation's URL with a 3.5 kB host
 * made every ingest of the event types it took fail, for every subscriber. No host name DNS can
 * resolve is longer than 253 characters, so every reachable origin (`https://` + 253 + `:65535`,
 * 267) is kept whole; a longer one is cut to its first 300 characters (at most 1,200 bytes, with
 * room to spare in the index). Origins cut alike share a key, hence their per-endpoint concurrency
 * and statistics: they never resolve, so nothing is lost. Webhook URLs are at most 2,048
 * characters (installations/limits.ts); this holds for whatever the store already had, and the
 * webhooks migration cut older rows the same way (SQL's substr counts characters as slice does
 * for the ASCII of a parsed origin).
 */
export const MAX_ORIGIN_LENGTH = 300;

/** An origin as the queue stores and groups it (see MAX_ORIGIN_LENGTH). */
export function originKey(origin: string): string {
  return origin.length <= MAX_ORIGIN_LENGTH ? origin : origin.slice(0, MAX_ORIGIN_LENGTH).toWellFormed();
}

const origins = new Map<string, string>();

/** The URL's origin (the unit of per-endpoint concurrency), as originKey keeps it; remembered, since few URLs recur often. */
export function originOf(url: string): string {
  let o = origins.get(url);
  if (o === undefined) {
    try {
      o = originKey(new URL(url).origin);
    } catch {
      o = originKey(url);
    }
    if (origins.size > 10_000) origins.clear();
    origins.set(url, o);
  }
  return o;
}

// Attempt numbers run 1, 2, 3... per delivery (insertAttempt), so the highest is how many there are.
export const COLUMNS = `d.seq, d.id, d.event_id, d.event_type, d.installation_id, d.url, d.origin, d.body, d.status, d.attempts,
  d.next_attempt_at, d.lease_until, d.created_at, d.updated_at, d.completed_at, d.last_status, d.last_error,
  COALESCE((SELECT MAX(a.number) FROM webhook_attempts a WHERE a.delivery_seq = d.seq), 0) AS attempt_total`;
/** The delivery (the row `d` names) belongs to a paused installation (its webhook endpoint row says so). */
export const pausedRow = (d: string) => `EXISTS (SELECT 1 FROM webhook_endpoints e WHERE e.installation_id = ${d}.installation_id AND e.paused = 1)`;
export const PAUSED = pausedRow('webhook_deliveries');

/** A claim's RETURNING row as the sender takes it. */
export const claimedOf = (r: any): Claimed | undefined =>
  r && {
    seq: r.seq,
    id: r.id,
    url: r.url,
    origin: r.origin,
    body: r.body,
    eventId: r.event_id,
    installationId: r.installation_id,
    eventType: r.event_type,
    status: r.status,
    attempts: r.attempts,
    nextAttemptAt: r.next_attempt_at,
    createdAt: r.created_at,
  };
