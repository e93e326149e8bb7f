/**
 * Recording outcomes: a turn's attempts and their deliveries' next states, written together (the
 * deliveries' states, a paused installation's retries held with them, then the attempts' rows),
 * their leases released; and after a crash, the attempts whose outcome was lost, recorded as
 * interrupted and sent again. On PostgreSQL a turn's record is one statement (with nothing else to
 * write, its own commit: no BEGIN and COMMIT round trips); on SQLite two, in one transaction.
 *
 * A turn's rows travel as multi-row VALUES with bound parameters on SQLite (in chunks: see
 * store/rows-insert.ts) and as one JSON array parameter on PostgreSQL (jsonb_array_elements: parsed once), so a
 * turn costs the same few statements however many attempts ended in it.
 */
import { appendInOrder, feedOrderLock } from '../store/feed-order.ts';
import { statement, type Database, type LOCK_BUSY, type Queries } from '../store/contract.ts';
import { deliveryLeases } from './queue-leases.ts';
import { jsonRows } from '../store/leased-queue.ts';
import { batchStatement, rowsTable } from '../store/rows-insert.ts';
import { originOf, PAUSED, pausedRow, type AttemptRecord, type NextState } from './queue-rows.ts';

/** One attempt's row as the JSON array carries it (k: its place in the turn). */
interface AttemptItem {
  k: number;
  seq: number;
  manual: number;
  startedAt: number;
  durationMs: number | null;
  url: string;
  signature: string | null;
  status: number | null;
  outcome: string;
  error: string | null;
  errorCode: string | null;
  excerpt: string | null;
  truncated: number;
  next: number | null;
}

// Attempt numbers follow the delivery's attempts so far (two of one delivery in a turn: in turn order).
const ATTEMPT_COLUMNS = `delivery_seq, number, manual, started_at, duration_ms, url, signature, status, outcome, error, error_code,
  response_excerpt, response_truncated, next_attempt_at`;
// On PostgreSQL the count is webhook_attempts_so_far's (schema.ts): a snapshot taken when it runs,
// after the feed's order lock, not the statement's (older than the lock when both are one statement).
const NUMBER = {
  sqlite: `(SELECT COUNT(*) FROM webhook_attempts a WHERE a.delivery_seq = j.seq) + ROW_NUMBER() OVER (PARTITION BY j.seq ORDER BY j.k)`,
  postgres: `webhook_attempts_so_far(j.seq) + ROW_NUMBER() OVER (PARTITION BY j.seq ORDER BY j.k)`,
};
const attemptValues = (engine: keyof typeof NUMBER) => `j.seq, ${NUMBER[engine]}, j.manual, j.started_at, j.duration_ms, j.url, j.signature, j.status,
  j.outcome, j.error, j.error_code, j.excerpt, j.truncated, j.next`;
// The attempts' rows: on SQLite a multi-row VALUES list (store/rows-insert.ts), on PostgreSQL one JSON array.
const ATTEMPT_INPUT = [
  'k',
  'seq',
  'manual',
  'started_at',
  'duration_ms',
  'url',
  'signature',
  'status',
  'outcome',
  'error',
  'error_code',
  'excerpt',
  'truncated',
  'next',
];
const attemptRow = (a: AttemptItem): unknown[] => [
  a.k,
  a.seq,
  a.manual,
  a.startedAt,
  a.durationMs,
  a.url,
  a.signature,
  a.status,
  a.outcome,
  a.error,
  a.errorCode,
  a.excerpt,
  a.truncated,
  a.next,
];
const ATTEMPTS_PG = `(SELECT (v ->> 'k')::int AS k, (v ->> 'seq')::bigint AS seq, (v ->> 'manual')::int AS manual, (v ->> 'startedAt')::bigint AS started_at,
      (v ->> 'durationMs')::double precision AS duration_ms, v ->> 'url' AS url, v ->> 'signature' AS signature, (v ->> 'status')::int AS status,
      v ->> 'outcome' AS outcome, v ->> 'error' AS error, v ->> 'errorCode' AS error_code, v ->> 'excerpt' AS excerpt,
      (v ->> 'truncated')::int AS truncated, (v ->> 'next')::bigint AS next
    FROM jsonb_array_elements(CAST(@attempts AS jsonb)) AS v) AS j`;
/** A delivery's next state as the UPDATE takes it. */
interface StateItem {
  seq: number;
  status: string;
  next: number | null;
  completed: number | null;
  attempts: number;
  now: number;
  lastStatus: number | null;
  lastError: string | null;
  owner: string | null;
}
const STATE_INPUT = ['seq', 'status', 'next', 'completed', 'attempts', 'now', 'last_status', 'last_error', 'owner'];
const stateValues = (n: StateItem): unknown[] => [n.seq, n.status, n.next, n.completed, n.attempts, n.now, n.lastStatus, n.lastError, n.owner];
const STATES_PG = `(SELECT (v ->> 'seq')::bigint AS seq, v ->> 'status' AS status, (v ->> 'next')::bigint AS next, (v ->> 'completed')::bigint AS completed,
      (v ->> 'attempts')::int AS attempts, (v ->> 'now')::bigint AS now, (v ->> 'lastStatus')::int AS last_status, v ->> 'lastError' AS last_error,
      v ->> 'owner' AS owner
    FROM jsonb_array_elements(CAST(@states AS jsonb)) AS v)`;
// A delivery's next state (`d`: the row). A cancelled delivery stays cancelled (uninstalled while
// the attempt was in flight); a retry of a paused installation waits for its resume (held: out of
// the due index), decided here, in the same statement. Paused: the endpoint's flag, or the row
// already held: on PostgreSQL a pause that committed while this UPDATE waited for the row is seen
// in the row's new version (which the UPDATE re-reads) but not by the flag's subquery (the
// statement's snapshot is older).
const HELD = (d: string) => `n.next IS NOT NULL AND n.status IN ('pending', 'retrying') AND (${d}.status = 'held' OR ${pausedRow(d)})`;
const nextState = (d: string) => `
  status = CASE WHEN ${d}.status = 'cancelled' THEN ${d}.status WHEN ${HELD(d)} THEN 'held' ELSE n.status END,
  next_attempt_at = CASE WHEN ${d}.status = 'cancelled' OR ${HELD(d)} THEN NULL ELSE n.next END,
  completed_at = CASE WHEN ${d}.status = 'cancelled' THEN ${d}.completed_at ELSE COALESCE(n.completed, ${d}.completed_at) END,
  attempts = n.attempts, lease_until = NULL, lease_owner = NULL, updated_at = n.now, last_status = n.last_status, last_error = n.last_error`;
// Given an owner, only while that owner still holds the lease.
const OWNED = (d: string) => `${d}.seq = n.seq AND (n.owner IS NULL OR ${d}.lease_owner = n.owner)`;

const q = {
  insertAttempts: batchStatement<AttemptItem, { id: number; seq: number; number: number }>({
    columns: ATTEMPT_INPUT,
    sqlite: (
      values,
    ) => `INSERT INTO webhook_attempts (${ATTEMPT_COLUMNS}) SELECT ${attemptValues('sqlite')} FROM ${rowsTable(ATTEMPT_INPUT, values)} AS j ORDER BY j.k
      RETURNING id, delivery_seq AS seq, number`,
    values: attemptRow,
    postgres: statement(`INSERT INTO webhook_attempts (${ATTEMPT_COLUMNS}) SELECT ${attemptValues('postgres')} FROM ${ATTEMPTS_PG} ORDER BY j.k
      RETURNING id, delivery_seq AS seq, number`),
    postgresParams: (rows) => ({ attempts: jsonRows(rows) }),
  }),
  // The states alone: SQLite's record (the attempts follow in a statement of their own). PostgreSQL's
  // record is one statement of both (`record`, below); this form is its UPDATE alone, kept so that
  // the statement runs on either engine.
  complete: batchStatement<StateItem, { seq: number }>({
    columns: STATE_INPUT,
    sqlite: (values) =>
      `UPDATE webhook_deliveries SET ${nextState('webhook_deliveries')} FROM ${rowsTable(STATE_INPUT, values)} AS n WHERE ${OWNED('webhook_deliveries')}
        RETURNING webhook_deliveries.seq`,
    values: stateValues,
    postgres: statement(`UPDATE webhook_deliveries d SET ${nextState('d')} FROM ${STATES_PG} AS n WHERE ${OWNED('d')} RETURNING d.seq`),
    postgresParams: (rows) => ({ states: jsonRows(rows) }),
  }),
  // PostgreSQL: a turn's whole record in one statement, its own commit when run outside a
  // transaction. The states first (their rows locked), then the attempts feed's order lock
  // (store/feed-order.ts; it reads what the UPDATE did, so a record waiting for a delivery's row
  // never holds every node's feed lock meanwhile), then the attempts, whose ids are drawn after
  // the lock and whose numbers count with a snapshot of their own (webhook_attempts_so_far). Rows
  // with a null id: the deliveries updated.
  record: statement<{ id: number | null; seq: number; number: number | null }>(
    `WITH n AS ${STATES_PG},
      done AS (UPDATE webhook_deliveries d SET ${nextState('d')} FROM n WHERE ${OWNED('d')} RETURNING d.seq),
      feed AS MATERIALIZED (${feedOrderLock('attempts')} FROM (SELECT COUNT(*) FROM done) AS rows_locked),
      ins AS (INSERT INTO webhook_attempts (${ATTEMPT_COLUMNS}) SELECT ${attemptValues('postgres')} FROM feed, ${ATTEMPTS_PG} ORDER BY j.k
        RETURNING id, delivery_seq AS seq, number)
    SELECT id, seq, number FROM ins UNION ALL SELECT NULL, seq, NULL FROM done`,
  ),
  // Retries of a paused installation wait for its resume (held: out of the due index).
  holdPaused: statement({
    sqlite: `UPDATE webhook_deliveries SET status = 'held', next_attempt_at = NULL, updated_at = @now
      WHERE seq IN (SELECT value FROM json_each(@seqs)) AND status IN ('pending', 'retrying') AND ${PAUSED}`,
    postgres: `UPDATE webhook_deliveries SET status = 'held', next_attempt_at = NULL, updated_at = @now
      WHERE seq IN (SELECT value::bigint FROM json_array_elements_text(CAST(@seqs AS json))) AND status IN ('pending', 'retrying') AND ${PAUSED}`,
  }),
};

/** Hold these deliveries if their installation is paused (writes that could make them due again); how many were. */
export async function holdIfPaused(tx: Queries, seqs: readonly number[], now: number): Promise<number> {
  if (!seqs.length) return 0;
  return (await tx.run(q.holdPaused, { seqs: JSON.stringify(seqs), now })).changes;
}

/** The attempts' rows. */
function attemptItems(attempts: Array<{ seq: number; attempt: AttemptRecord }>): AttemptItem[] {
  return attempts.map(({ seq, attempt: a }, k) => ({
    k,
    seq,
    manual: a.manual ? 1 : 0,
    startedAt: a.startedAt,
    durationMs: a.durationMs,
    url: a.url,
    signature: a.signatureHeader,
    status: a.status,
    outcome: a.outcome,
    error: a.error,
    errorCode: a.errorCode,
    excerpt: a.responseExcerpt,
    truncated: a.responseTruncated ? 1 : 0,
    next: a.nextAttemptAt,
  }));
}

/** Each attempt's id, in the order given, from the inserted rows (matched by delivery and number: one delivery's were numbered in turn order). */
function idsInOrder(attempts: Array<{ seq: number }>, rows: Array<{ id: number | null; seq: number; number: number | null }>): number[] {
  const bySeq = new Map<number, number[]>();
  for (const r of [...rows].sort((a, b) => Number(a.number) - Number(b.number))) {
    const list = bySeq.get(Number(r.seq));
    if (list) list.push(Number(r.id));
    else bySeq.set(Number(r.seq), [Number(r.id)]);
  }
  return attempts.map(({ seq }) => bySeq.get(seq)!.shift()!);
}

/** One turn's attempts, inserted in one statement; each one's id, in the order given. */
async function insertAttempts(tx: Queries, attempts: Array<{ seq: number; attempt: AttemptRecord }>): Promise<number[]> {
  return idsInOrder(attempts, await q.insertAttempts.all(tx, attemptItems(attempts)));
}

export interface OutcomeDeps {
  noteDue: (origin: string, at: number) => void;
}

export type OutcomeItem = { seq: number; origin?: string; owner?: string; attempt: AttemptRecord; next: NextState; now: number };

export function createOutcomes({ noteDue }: OutcomeDeps) {
  return {
    /**
     * Record attempts and their deliveries' next states in the caller's transaction; releases the
     * leases. Returns each attempt's id (its feed cursor), in order, and the deliveries whose state
     * was left alone: given an `owner`, a delivery whose lease that owner no longer holds (it
     * expired and another sender took it) gets the attempt recorded (it was made) but keeps the
     * state the new holder gives it. Whatever the batch: on PostgreSQL one statement (given the
     * database, its own commit: see recordOutcomes), on SQLite two (the states, then the attempts).
     */
    async completeMany(tx: Queries, items: OutcomeItem[]): Promise<{ ids: number[]; stale: number[] }> {
      if (!items.length) return { ids: [], stale: [] };
      const states = items.map(
        ({ seq, owner, attempt, next, now }): StateItem => ({
          seq,
          status: next.status,
          next: next.nextAttemptAt,
          completed: next.completedAt,
          attempts: next.attempts,
          now,
          lastStatus: attempt.status,
          lastError: attempt.error,
          owner: owner ?? null,
        }),
      );
      let done: Set<number>;
      let ids: number[];
      if (tx.engine === 'postgres') {
        const rows = await tx.all(q.record, { states: jsonRows(states), attempts: jsonRows(attemptItems(items)) });
        done = new Set(rows.filter((r) => r.id === null).map((r) => Number(r.seq)));
        ids = idsInOrder(
          items,
          rows.filter((r) => r.id !== null),
        );
      } else {
        done = new Set((await q.complete.all(tx, states)).map((r) => Number(r.seq)));
        // The attempts are the live tail's feed: inserted last (see store/feed-order.ts).
        ids = await insertAttempts(tx, items);
      }
      const stale = items.filter((i) => !done.has(i.seq)).map((i) => i.seq);
      // A retry's origin has work due then (held ones too: the hint may only be early).
      for (const { seq, origin, next } of items) if (origin !== undefined && done.has(seq) && next.nextAttemptAt !== null) noteDue(origin, next.nextAttemptAt);
      return { ids, stale };
    },

    /**
     * A turn's outcomes with nothing else to write: on PostgreSQL one statement and its commit, no
     * BEGIN or COMMIT of their own; on SQLite one transaction (LOCK_BUSY while another process writes).
     */
    recordOutcomes(database: Database, items: OutcomeItem[]): Promise<{ ids: number[]; stale: number[] } | typeof LOCK_BUSY> {
      if (database.engine === 'postgres') return this.completeMany(database, items);
      return database.transactionUnlessBusy((tx) => this.completeMany(tx, items));
    },

    /**
     * After a crash: the leases of processes that are gone, in the caller's transaction. With an
     * empty `ownerPrefix`, every lease (at start, before any process serves: the data directory
     * lock guarantees it); with one (`<pid>.`), those of one dead serving process. Their attempts'
     * outcomes are unknown, so each is recorded as interrupted and the delivery is due again at
     * once (at-least-once).
     */
    async recoverInterrupted(tx: Queries, now: number, ownerPrefix = ''): Promise<number> {
      const rows = (await deliveryLeases.releaseOwnedBy(tx, ownerPrefix, now, { dueNow: true })) as Array<{ seq: number; url: string; status: string }>;
      if (!rows.length) return 0;
      await appendInOrder(tx, 'attempts');
      await insertAttempts(
        tx,
        rows.map((r) => ({
          seq: Number(r.seq),
          attempt: {
            manual: false,
            startedAt: now,
            durationMs: null,
            url: r.url,
            signatureHeader: null,
            status: null,
            outcome: 'interrupted',
            error: 'the server stopped while this attempt was in flight (or about to start); its outcome is unknown, so it is sent again',
            errorCode: 'EINTERRUPTED',
            responseExcerpt: null,
            responseTruncated: false,
            nextAttemptAt: r.status === 'pending' || r.status === 'retrying' ? now : null,
          },
        })),
      );
      await holdIfPaused(
        tx,
        rows.map((r) => Number(r.seq)),
        now,
      );
      for (const r of rows) noteDue(originOf(r.url), now);
      return rows.length;
    },
  };
}
