/**
 * Handler runs, in the store (SQLite or PostgreSQL): one row per platform event and installation
 * whose integration handles it, inserted in the event's own transaction, so an acknowledged event's
 * handlers are owed even if every process dies at once. The work is claimed through the store's one
 * leased queue (store/leased-queue.ts), as webhook deliveries are: the leases of a serving process
 * that dies mid-run are given back by its supervisor (another node's run out), and any process
 * sharing the store takes the run again. Statuses and the retry schedule are the webhook deliveries' own
 * (webhooks/policy.ts). This file only records; handler-runner.ts decides.
 *
 * The statements run through the store's contract (store/contract.ts). A runner's turn is one
 * commit: the outcomes it records (one statement per kind, over a JSON array) and the runs it
 * claims.
 */
import { timeOrderedId } from '../ids.ts';
import { jsonRows, leasedQueue } from '../store/leased-queue.ts';
import { batchStatement, rowsTable } from '../store/rows-insert.ts';
import { statement, type Database, type Queries, type Statement } from '../store/contract.ts';
import { DELIVERY_STATUSES, type DeliveryStatus } from '../webhooks/views.ts';
import type { HandlerRun } from './handler-views.ts';
import type { DeliveryFilter } from '../webhooks/queue.ts';

export type { HandlerRun } from './handler-views.ts';

/** What the runner needs to run one claimed handler. */
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

/** An attempt's outcome to record: the run's next state, or 'dropped' (nothing is owed: the row goes). */
export interface RunOutcomeRecord {
  seq: number;
  next: RunNext | 'dropped';
}

/** What one enqueue stores: the event and the installation whose handler is owed it. */
export interface RunInput {
  eventId: string;
  eventType: string;
  installationId: string;
  integration: string;
  now: number;
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

const CLAIMED = 'seq, id, event_id, event_type, installation_id, integration, status, attempts';
type ClaimedRow = Pick<Row, 'seq' | 'id' | 'event_id' | 'event_type' | 'installation_id' | 'integration' | 'status' | 'attempts'>;

/** One statement's text per engine, built from one template. */
const perEngine = (build: (e: 'sqlite' | 'postgres') => string) => ({ sqlite: build('sqlite'), postgres: build('postgres') });
/** A list of row numbers as one JSON array parameter, per engine. */
const seqsIn = {
  sqlite: (p: string) => `SELECT value FROM json_each(${p})`,
  postgres: (p: string) => `SELECT value::bigint FROM json_array_elements_text(CAST(${p} AS json))`,
};

/**
 * The queue of handler runs: the store's one leased queue (store/leased-queue.ts) over this table
 * (claim with a lease, release by owner prefix, next wake), beside webhook deliveries'. The read of
 * due runs stays here: a runner turn reads first, so a turn with nothing to do takes no write lock.
 */
const runLeases = leasedQueue<Record<string, unknown>>({
  table: 'event_handler_runs',
  seq: 'seq',
  nextAt: 'next_attempt_at',
  leaseOwner: 'lease_owner',
  leaseUntil: 'lease_until',
  returning: CLAIMED,
});

const queue = {
  due: statement<{ seq: number }>(
    `SELECT seq FROM event_handler_runs INDEXED BY event_handler_runs_due
     WHERE next_attempt_at <= @now AND (lease_until IS NULL OR lease_until <= @now)
     ORDER BY next_attempt_at, seq LIMIT @limit`,
  ),
};

/** A run's outcome as the UPDATE takes it (one owner and one time for all of a turn's). */
interface RunOutcomeRow {
  run: number;
  status: string;
  attempts: number;
  next_at: number | null;
  completed_at: number | null;
  error: string | null;
  invocation: string | null;
  owner: string;
  now: number;
}
const OUTCOME_COLUMNS = ['run', 'status', 'attempts', 'next_at', 'completed_at', 'error', 'invocation', 'owner', 'now'];

const q = {
  // Ingest's enqueue, in the event's transaction.
  insert: statement(
    `INSERT INTO event_handler_runs (id, event_id, event_type, installation_id, integration, status, next_attempt_at, lease_until, lease_owner, created_at, updated_at)
     VALUES (?, ?, ?, ?, ?, 'pending', ?, ?, ?, ?, ?)
     ON CONFLICT (event_id, installation_id) DO NOTHING`,
  ),
  // A turn's outcomes, one statement (on SQLite bound as multi-row VALUES, in chunks: see
  // store/rows-insert.ts): only the lease's owner records one (a run whose lease ran out and was
  // taken by another process is that process's to finish).
  complete: batchStatement<RunOutcomeRow>({
    columns: OUTCOME_COLUMNS,
    sqlite: (values) => `UPDATE event_handler_runs SET status = o.status, attempts = o.attempts, next_attempt_at = o.next_at, completed_at = o.completed_at,
       last_error = o.error, last_invocation = COALESCE(o.invocation, last_invocation), lease_until = NULL, lease_owner = NULL, updated_at = o.now
     FROM ${rowsTable(OUTCOME_COLUMNS, values)} AS o
     WHERE event_handler_runs.seq = o.run AND event_handler_runs.lease_owner = o.owner`,
    values: (o) => [o.run, o.status, o.attempts, o.next_at, o.completed_at, o.error, o.invocation, o.owner, o.now],
    postgres: statement(`UPDATE event_handler_runs SET status = o.status, attempts = o.attempts, next_attempt_at = o.next_at, completed_at = o.completed_at,
       last_error = o.error, last_invocation = COALESCE(o.invocation, event_handler_runs.last_invocation),
       lease_until = NULL, lease_owner = NULL, updated_at = @now
     FROM json_to_recordset(CAST(@outcomes AS json))
       AS o(run bigint, status text, attempts integer, next_at bigint, completed_at bigint, error text, invocation text)
     WHERE event_handler_runs.seq = o.run AND event_handler_runs.lease_owner = @owner`),
    postgresParams: (rows) => ({ outcomes: jsonRows(rows), owner: rows[0].owner, now: rows[0].now }),
  }),
  drop: statement(perEngine((e) => `DELETE FROM event_handler_runs WHERE seq IN (${seqsIn[e]('@seqs')}) AND lease_owner = @owner`)),
  byId: statement<Row>('SELECT * FROM event_handler_runs WHERE id = ?'),
  byEvent: statement<Row>('SELECT * FROM event_handler_runs WHERE event_id = ? ORDER BY seq'),
  replayFailed: statement<{ seq: number; id: string }>(
    `UPDATE event_handler_runs SET status = 'pending', attempts = 0, next_attempt_at = @now, completed_at = NULL, updated_at = @now
     WHERE status = 'failed' AND created_at >= @since AND created_at <= @until AND (CAST(@installation AS TEXT) IS NULL OR installation_id = @installation)
     RETURNING seq, id`,
  ),
  replayOne: statement(
    `UPDATE event_handler_runs SET status = 'pending', attempts = 0, next_attempt_at = @now, completed_at = NULL, updated_at = @now
     WHERE id = @id AND status IN ('failed', 'delivered')`,
  ),
  counts: statement<{ status: DeliveryStatus; n: number }>('SELECT status, COUNT(*) AS n FROM event_handler_runs GROUP BY status'),
  purge: statement(
    `DELETE FROM event_handler_runs WHERE seq IN (
       SELECT seq FROM event_handler_runs
       WHERE ((@failed = 0 AND status IN ('delivered', 'cancelled')) OR (@failed = 1 AND status = 'failed'))
         AND completed_at < @before AND lease_until IS NULL
       LIMIT @limit)`,
  ),
};

/** The list's statements, one per combination of filters (made on first use, then kept). */
const listings = new Map<string, Statement<Row>>();
function listing(where: string[]): Statement<Row> {
  const key = where.join(' AND ');
  let s = listings.get(key);
  if (!s) listings.set(key, (s = statement<Row>(`SELECT * FROM event_handler_runs ${key ? `WHERE ${key}` : ''} ORDER BY seq DESC LIMIT @limit`)));
  return s;
}

const iso = (ms: number | null) => (ms === null ? null : new Date(Number(ms)).toISOString());

const claimed = (r: ClaimedRow): ClaimedRun => ({
  seq: Number(r.seq),
  id: r.id,
  eventId: r.event_id,
  eventType: r.event_type,
  installationId: r.installation_id,
  integration: r.integration,
  status: r.status,
  attempts: Number(r.attempts),
});

/** The insert's parameters, and the run it stored given its row number. */
function insertion(
  input: RunInput,
  lease: { owner: string; until: number } | undefined,
): { params: unknown[]; stored: (changes: number, seq: number) => ClaimedRun | null } {
  const id = newHandlerRunId(input.now);
  return {
    params: [
      id,
      input.eventId,
      input.eventType,
      input.installationId,
      input.integration,
      input.now,
      lease?.until ?? null,
      lease?.owner ?? null,
      input.now,
      input.now,
    ],
    stored: (changes: number, seq: number): ClaimedRun | null =>
      changes
        ? {
            seq,
            id,
            eventId: input.eventId,
            eventType: input.eventType,
            installationId: input.installationId,
            integration: input.integration,
            status: 'pending',
            attempts: 0,
          }
        : null,
  };
}

export type HandlerRuns = ReturnType<typeof createHandlerRuns>;

/** Works on a read-only connection too (the CLI's --offline) for the reads. */
export function createHandlerRuns(database: Database, opts: { maxAttempts: () => number }) {
  const view = (r: Row): HandlerRun => ({
    id: r.id,
    eventId: r.event_id,
    eventType: r.event_type,
    installationId: r.installation_id,
    integration: r.integration,
    status: r.status,
    attemptCount: Number(r.attempts),
    maxAttempts: opts.maxAttempts(),
    nextAttemptAt: iso(r.next_attempt_at),
    running: r.lease_until !== null,
    lastInvocation: r.last_invocation,
    lastError: r.last_error,
    createdAt: iso(r.created_at)!,
    updatedAt: iso(r.updated_at)!,
    completedAt: iso(r.completed_at),
  });

  /** Record a turn's outcomes in `tx`: one statement for the completed, one for the dropped. */
  async function record(tx: Queries, done: readonly RunOutcomeRecord[], owner: string, now: number): Promise<void> {
    const completed = done.flatMap(({ seq, next }): RunOutcomeRow[] =>
      next === 'dropped'
        ? []
        : [
            {
              run: seq,
              status: next.status,
              attempts: next.attempts,
              next_at: next.nextAttemptAt,
              completed_at: next.completedAt,
              error: next.lastError,
              invocation: next.lastInvocation,
              owner,
              now,
            },
          ],
    );
    const dropped = done.filter((d) => d.next === 'dropped').map((d) => d.seq);
    if (completed.length) await q.complete.run(tx, completed);
    if (dropped.length) await tx.run(q.drop, { seqs: JSON.stringify(dropped), owner });
  }

  /** Lease these runs to `owner` if they are still due and unleased (earliest first). */
  async function claim(tx: Queries, seqs: number[], owner: string, now: number, until: number): Promise<ClaimedRun[]> {
    return (await runLeases.claim(tx, seqs, { now, owner, until })).map((r) => claimed(r as unknown as ClaimedRow));
  }

  return {
    /**
     * Inside the event's transaction: one run owed to this installation's handler. With `lease`,
     * it is stored already claimed (its first attempt starts at commit, without a claim of its
     * own). Null when this event already has a run for this installation.
     */
    async enqueue(tx: Queries, input: RunInput, lease?: { owner: string; until: number }): Promise<ClaimedRun | null> {
      const { params, stored } = insertion(input, lease);
      const r = await tx.run(q.insert, params);
      return stored(r.changes, r.lastId);
    },

    /** Up to `limit` due runs (earliest first): a read, so a turn with nothing to write takes no write lock. */
    async due(now: number, limit: number): Promise<number[]> {
      return limit > 0 ? (await database.all(queue.due, { now, limit })).map((r) => Number(r.seq)) : [];
    },

    /**
     * One turn of a runner, one commit: record `done` (only what `owner` still leases), then lease
     * the runs `seqs` (from due()) to `owner` until `until`, those still due and unleased, earliest first.
     */
    async turn(t: { done: readonly RunOutcomeRecord[]; seqs: number[]; owner: string; now: number; until: number }): Promise<ClaimedRun[]> {
      if (!t.done.length && !t.seqs.length) return [];
      return database.transaction(async (tx) => {
        await record(tx, t.done, t.owner, t.now);
        return t.seqs.length ? claim(tx, t.seqs, t.owner, t.now, t.until) : [];
      });
    },

    /** Shutdown: give back every lease of `owner` (runs abandoned in flight are due again at once). */
    async releaseAll(owner: string): Promise<number> {
      return (await runLeases.releaseOwnedBy(database, owner, Date.now())).length;
    },

    /** A serving process died (`<pid>.`), or none serves yet (''): its leases are given back at once rather than left to run out. */
    async releaseOwnedBy(ownerPrefix: string): Promise<number> {
      return (await runLeases.releaseOwnedBy(database, ownerPrefix, Date.now())).length;
    },

    /** The next scheduled attempt or lease running out after `now` (the runner's next wake-up). */
    async nextDueAfter(now: number): Promise<number | undefined> {
      return runLeases.nextWake(database, now);
    },

    async get(id: string): Promise<HandlerRun | undefined> {
      const r = await database.get(q.byId, [id]);
      return r && view(r);
    },

    async ofEvent(eventId: string): Promise<HandlerRun[]> {
      return (await database.all(q.byEvent, [eventId])).map(view);
    },

    async list(f: HandlerRunFilter): Promise<{ handlerRuns: HandlerRun[]; nextCursor: string | null }> {
      const where: string[] = [];
      const params: Record<string, unknown> = {};
      if (f.status) where.push('status = @status'), (params.status = f.status);
      if (f.type) where.push('event_type = @type'), (params.type = f.type);
      if (f.installation) where.push('installation_id = @installation'), (params.installation = f.installation);
      if (f.event) where.push('event_id = @event'), (params.event = f.event);
      if (f.since !== undefined) where.push('created_at >= @since'), (params.since = f.since);
      if (f.until !== undefined) where.push('created_at <= @until'), (params.until = f.until);
      if (f.cursor) where.push('seq < @cursor'), (params.cursor = Number(f.cursor));
      const limit = Math.min(Math.max(f.limit ?? 50, 1), 500);
      const rows = await database.all(listing(where), { ...params, limit });
      return { handlerRuns: rows.map(view), nextCursor: rows.length === limit ? String(rows[rows.length - 1].seq) : null };
    },

    /** Failed runs created in the window back to pending with a fresh schedule (one statement); ids replayed. */
    async replayFailed(f: { since: number; until: number; installation?: string }, now: number): Promise<string[]> {
      const rows = await database.all(q.replayFailed, { since: f.since, until: f.until, installation: f.installation ?? null, now });
      return rows.sort((a, b) => Number(a.seq) - Number(b.seq)).map((r) => r.id);
    },

    /** One finished run (failed, or delivered: run it again) back to pending; false when it is not finished. */
    async replayOne(id: string, now: number): Promise<boolean> {
      return (await database.run(q.replayOne, { id, now })).changes === 1;
    },

    async counts(): Promise<Record<DeliveryStatus, number>> {
      const out = Object.fromEntries(DELIVERY_STATUSES.map((s) => [s, 0])) as Record<DeliveryStatus, number>;
      for (const r of await database.all(q.counts)) out[r.status] = Number(r.n);
      return out;
    },

    /** Retention: delete up to `limit` delivered/cancelled runs completed before `before`. */
    async purgeFinished(before: number, limit: number): Promise<number> {
      return (await database.run(q.purge, { before, limit, failed: 0 })).changes;
    },

    /** Retention: the same for failed runs (kept as long as failed deliveries: replayable until then). */
    async purgeFailed(before: number, limit: number): Promise<number> {
      return (await database.run(q.purge, { before, limit, failed: 1 })).changes;
    },
  };
}
