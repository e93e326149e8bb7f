/**
 * Handler runs, in the store (SQLite or PostgreSQL): one row per platform event and installation whose integration handles
 * it, inserted in the event's own transaction, so an acknowledged event's handlers are owed even
 * if every process dies at once. The work is claimed with SQL leases like webhook deliveries: a
 * process that dies mid-run keeps its lease until it runs out, then any process sharing the store
 * takes the run again. Statuses and the retry schedule are the webhook deliveries' own
 * (webhooks/policy.ts). This file only records; handler-worker.ts decides.
 */
import { timeOrderedId } from '../ids.ts';
import type { Db } from '../store/index.ts';
import { DELIVERY_STATUSES, type DeliveryStatus } from '../webhooks/views.ts';
import type { HandlerRun } from './handler-views.ts';
import type { DeliveryFilter } from '../webhooks/queue.ts';
import { sqlFor } from '../store/postgres/db.ts';

export type { HandlerRun } from './handler-views.ts';

/** What the worker needs to run one claimed handler. */
export interface ClaimedRun {
  seq: number;
  id: string;
  eventId: string;
  eventType: string;
  installationId: string;
  integration: string;
  status: DeliveryStatus;
  attempts: number;
}

/** The run's state after an attempt. */
export interface RunNext {
  status: DeliveryStatus;
  attempts: number;
  nextAttemptAt: number | null;
  completedAt: number | null;
  lastError: string | null;
  lastInvocation: string | null;
}

/** Handler runs are listed with the filters of deliveries (status, type, installation, event, time, page). */
export type HandlerRunFilter = DeliveryFilter;

interface Row {
  seq: number;
  id: string;
  event_id: string;
  event_type: string;
  installation_id: string;
  integration: string;
  status: DeliveryStatus;
  attempts: number;
  next_attempt_at: number | null;
  lease_until: number | null;
  created_at: number;
  updated_at: number;
  completed_at: number | null;
  last_invocation: string | null;
  last_error: string | null;
}

/** `hdl_` + a time-ordered id (see src/ids.ts). */
export const newHandlerRunId = (now = Date.now()): string => timeOrderedId('hdl', now);

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());
const CLAIMED = 'seq, id, event_id, event_type, installation_id, integration, status, attempts';

export type HandlerRuns = ReturnType<typeof createHandlerRuns>;

/** Works on a read-only connection too (the CLI's --offline) for the reads. */
export function createHandlerRuns(db: Db, opts: { maxAttempts: () => number }) {
  const q = {
    insert: db.prepare(
      `INSERT INTO event_handler_runs (id, event_id, event_type, installation_id, integration, status, next_attempt_at, lease_until, lease_owner, created_at, updated_at)
       VALUES (?, ?, ?, ?, ?, 'pending', ?, ?, ?, ?, ?)
       ON CONFLICT (event_id, installation_id) DO NOTHING`,
    ),
    due: db.prepare<{ now: number; limit: number }, { seq: number }>(
      `SELECT seq FROM event_handler_runs INDEXED BY event_handler_runs_due
       WHERE next_attempt_at <= @now AND (lease_until IS NULL OR lease_until <= @now)
       ORDER BY next_attempt_at LIMIT @limit`,
    ),
    // On PostgreSQL, rows another node is claiming this instant are skipped, not waited for.
    claimMany: db.prepare<{ seqs: string; owner: string; now: number; until: number }, Row>(
      sqlFor(db, {
        sqlite: `UPDATE event_handler_runs SET lease_until = @until, lease_owner = @owner
       WHERE seq IN (SELECT value FROM json_each(@seqs)) AND next_attempt_at IS NOT NULL AND next_attempt_at <= @now
         AND (lease_until IS NULL OR lease_until <= @now)
       RETURNING ${CLAIMED}`,
        postgres: `UPDATE event_handler_runs SET lease_until = @until, lease_owner = @owner
       WHERE seq IN (SELECT seq FROM event_handler_runs
         WHERE seq IN (SELECT value::bigint FROM json_array_elements_text(CAST(@seqs AS json))) AND next_attempt_at IS NOT NULL
           AND next_attempt_at <= @now AND (lease_until IS NULL OR lease_until <= @now)
         FOR UPDATE SKIP LOCKED)
       RETURNING ${CLAIMED}`,
      }),
    ),
    // Only the lease's owner records the outcome: a run whose lease ran out and was taken by
    // another process is that process's to finish.
    complete: db.prepare(
      `UPDATE event_handler_runs SET status = ?, attempts = ?, next_attempt_at = ?, completed_at = ?, last_error = ?,
         last_invocation = COALESCE(?, last_invocation), lease_until = NULL, lease_owner = NULL, updated_at = ?
       WHERE seq = ? AND lease_owner = ?`,
    ),
    drop: db.prepare('DELETE FROM event_handler_runs WHERE seq = ? AND lease_owner = ?'),
    release: db.prepare('UPDATE event_handler_runs SET lease_until = NULL, lease_owner = NULL WHERE lease_owner = ?'),
    releasePrefix: db.prepare(
      'UPDATE event_handler_runs SET lease_until = NULL, lease_owner = NULL WHERE lease_until IS NOT NULL AND substr(lease_owner, 1, length(@owner)) = @owner',
    ),
    nextDue: db.prepare<{ now: number }, { at: number | null }>(
      `SELECT MIN(at) AS at FROM (
         SELECT MIN(next_attempt_at) AS at FROM event_handler_runs WHERE next_attempt_at > @now AND lease_until IS NULL
         UNION ALL SELECT MIN(lease_until) FROM event_handler_runs WHERE lease_until > @now) AS soonest`,
    ),
    byId: db.prepare<[string], Row>('SELECT * FROM event_handler_runs WHERE id = ?'),
    byEvent: db.prepare<[string], Row>('SELECT * FROM event_handler_runs WHERE event_id = ? ORDER BY seq'),
    replayable: db.prepare<{ since: number; until: number; installation: string | null }, { seq: number; id: string }>(
      `SELECT seq, id FROM event_handler_runs INDEXED BY event_handler_runs_by_status
       WHERE status = 'failed' AND created_at >= @since AND created_at <= @until AND (CAST(@installation AS TEXT) IS NULL OR installation_id = @installation)
       ORDER BY seq`,
    ),
    requeue: db.prepare(
      `UPDATE event_handler_runs SET status = 'pending', attempts = 0, next_attempt_at = @now, completed_at = NULL, updated_at = @now
       WHERE seq = @seq AND status IN ('failed', 'delivered')`,
    ),
    counts: db.prepare<[], { status: DeliveryStatus; n: number }>('SELECT status, COUNT(*) AS n FROM event_handler_runs GROUP BY status'),
    purge: db.prepare<{ before: number; limit: number; failed: number }>(
      `DELETE FROM event_handler_runs WHERE seq IN (
         SELECT seq FROM event_handler_runs
         WHERE ((@failed = 0 AND status IN ('delivered', 'cancelled')) OR (@failed = 1 AND status = 'failed'))
           AND completed_at < @before AND lease_until IS NULL
         LIMIT @limit)`,
    ),
  };

  const claimed = (r: Row): ClaimedRun => ({
    seq: r.seq,
    id: r.id,
    eventId: r.event_id,
    eventType: r.event_type,
    installationId: r.installation_id,
    integration: r.integration,
    status: r.status,
    attempts: r.attempts,
  });

  const view = (r: Row): HandlerRun => ({
    id: r.id,
    eventId: r.event_id,
    eventType: r.event_type,
    installationId: r.installation_id,
    integration: r.integration,
    status: r.status,
    attemptCount: r.attempts,
    maxAttempts: opts.maxAttempts(),
    nextAttemptAt: iso(r.next_attempt_at),
    running: r.lease_until !== null,
    lastInvocation: r.last_invocation,
    lastError: r.last_error,
    createdAt: iso(r.created_at)!,
    updatedAt: iso(r.updated_at)!,
    completedAt: iso(r.completed_at),
  });

  return {
    /**
     * Inside the event's transaction: one run owed to this installation's handler. With `lease`,
     * it is stored already claimed (its first attempt starts at commit, without a claim of its
     * own). Null when this event already has a run for this installation.
     */
    enqueue(
      input: { eventId: string; eventType: string; installationId: string; integration: string; now: number },
      lease?: { owner: string; until: number },
    ): ClaimedRun | null {
      const id = newHandlerRunId(input.now);
      const r = q.insert.run(id, input.eventId, input.eventType, input.installationId, input.integration, input.now, lease?.until ?? null, lease?.owner ?? null, input.now, input.now);
      if (!r.changes) return null;
      return { seq: Number(r.lastInsertRowid), id, eventId: input.eventId, eventType: input.eventType, installationId: input.installationId, integration: input.integration, status: 'pending', attempts: 0 };
    },

    /** Lease up to `limit` due runs (earliest first) for `owner` until `until`; one transaction. */
    claimDue: db.transaction((now: number, limit: number, owner: string, until: number): ClaimedRun[] => {
      if (limit <= 0) return [];
      const seqs = q.due.all({ now, limit }).map((r) => r.seq);
      if (!seqs.length) return [];
      return q.claimMany.all({ seqs: JSON.stringify(seqs), owner, now, until }).map(claimed);
    }),

    /** Record an attempt's outcome and release the lease; false when the lease was no longer ours. */
    complete(seq: number, owner: string, next: RunNext, now: number): boolean {
      return (
        q.complete.run(next.status, next.attempts, next.nextAttemptAt, next.completedAt, next.lastError, next.lastInvocation, now, seq, owner).changes === 1
      );
    },

    /** The installation's integration does not handle this event after all: nothing is owed. */
    drop(seq: number, owner: string): void {
      q.drop.run(seq, owner);
    },

    /** Shutdown: give back every lease of `owner` (runs abandoned in flight are due again at once). */
    releaseAll(owner: string): number {
      return q.release.run(owner).changes;
    },

    /** A serving process died (`<pid>.`), or none serves yet (''): its leases are given back at once rather than left to run out. */
    releaseOwnedBy(ownerPrefix: string): number {
      return q.releasePrefix.run({ owner: ownerPrefix }).changes;
    },

    /** The next scheduled attempt or lease running out after `now` (the worker's next wake-up). */
    nextDueAfter(now: number): number | undefined {
      return q.nextDue.get({ now })?.at ?? undefined;
    },

    get(id: string): HandlerRun | undefined {
      const r = q.byId.get(id);
      return r && view(r);
    },

    ofEvent(eventId: string): HandlerRun[] {
      return q.byEvent.all(eventId).map(view);
    },

    list(f: HandlerRunFilter): { handlerRuns: HandlerRun[]; nextCursor: string | null } {
      const where: string[] = [];
      const params: Record<string, unknown> = {};
      if (f.status) (where.push('status = @status'), (params.status = f.status));
      if (f.type) (where.push('event_type = @type'), (params.type = f.type));
      if (f.installation) (where.push('installation_id = @installation'), (params.installation = f.installation));
      if (f.event) (where.push('event_id = @event'), (params.event = f.event));
      if (f.since !== undefined) (where.push('created_at >= @since'), (params.since = f.since));
      if (f.until !== undefined) (where.push('created_at <= @until'), (params.until = f.until));
      if (f.cursor) (where.push('seq < @cursor'), (params.cursor = Number(f.cursor)));
      const limit = Math.min(Math.max(f.limit ?? 50, 1), 500);
      const rows = db
        .prepare<Record<string, unknown>, Row>(`SELECT * FROM event_handler_runs ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY seq DESC LIMIT ${limit}`)
        .all(params);
      return { handlerRuns: rows.map(view), nextCursor: rows.length === limit ? String(rows[rows.length - 1].seq) : null };
    },

    /** Failed runs created in the window back to pending with a fresh schedule; ids replayed. */
    replayFailed: db.transaction((f: { since: number; until: number; installation?: string }, now: number): string[] => {
      const ids: string[] = [];
      for (const r of q.replayable.all({ since: f.since, until: f.until, installation: f.installation ?? null }))
        if (q.requeue.run({ seq: r.seq, now }).changes) ids.push(r.id);
      return ids;
    }),

    /** One finished run (failed, or delivered: run it again) back to pending; false when it is not finished. */
    replayOne(id: string, now: number): boolean {
      const r = q.byId.get(id);
      return Boolean(r && q.requeue.run({ seq: r.seq, now }).changes);
    },

    counts(): Record<DeliveryStatus, number> {
      const out = Object.fromEntries(DELIVERY_STATUSES.map((s) => [s, 0])) as Record<DeliveryStatus, number>;
      for (const r of q.counts.all()) out[r.status] = r.n;
      return out;
    },

    /** Retention: delete up to `limit` delivered/cancelled runs completed before `before`. */
    purgeFinished(before: number, limit: number): number {
      return q.purge.run({ before, limit, failed: 0 }).changes;
    },

    /** Retention: the same for failed runs (kept as long as failed deliveries: replayable until then). */
    purgeFailed(before: number, limit: number): number {
      return q.purge.run({ before, limit, failed: 1 }).changes;
    },
  };
}
