/**
 * Recording outcomes: a turn's attempts and their deliveries' next states, written together (one
 * transaction per group commit, one statement per kind: the attempts' rows, the deliveries' states,
 * the retries held for a paused installation), their leases released; and after a crash, the
 * attempts whose outcome was lost, recorded as interrupted and sent again.
 *
 * A turn's rows travel as one JSON array parameter (json_each on SQLite, json_array_elements on
 * PostgreSQL), so a turn costs the same few statements however many attempts ended in it.
 */
import { appendInOrder } from '../store/feed-order.ts';
import { statement, type Queries } from '../store/contract.ts';
import { deliveryLeases } from './queue-leases.ts';
import { jsonRows } from '../store/leased-queue.ts';
import { originOf, PAUSED, type AttemptRecord, type NextState } from './queue-rows.ts';

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
const NUMBER = `(SELECT COUNT(*) FROM webhook_attempts a WHERE a.delivery_seq = j.seq) + ROW_NUMBER() OVER (PARTITION BY j.seq ORDER BY j.k)`;

const q = {
  insertAttempts: statement<{ id: number; seq: number; number: number }>({
    sqlite: `INSERT INTO webhook_attempts (${ATTEMPT_COLUMNS})
      SELECT j.seq, ${NUMBER}, j.manual, j.started_at, j.duration_ms, j.url, j.signature, j.status, j.outcome, j.error, j.error_code,
        j.excerpt, j.truncated, j.next
      FROM (SELECT value ->> 'k' AS k, value ->> 'seq' AS seq, value ->> 'manual' AS manual, value ->> 'startedAt' AS started_at,
              value ->> 'durationMs' AS duration_ms, value ->> 'url' AS url, value ->> 'signature' AS signature, value ->> 'status' AS status,
              value ->> 'outcome' AS outcome, value ->> 'error' AS error, value ->> 'errorCode' AS error_code, value ->> 'excerpt' AS excerpt,
              value ->> 'truncated' AS truncated, value ->> 'next' AS next
            FROM json_each(@items)) AS j
      ORDER BY j.k
      RETURNING id, delivery_seq AS seq, number`,
    postgres: `INSERT INTO webhook_attempts (${ATTEMPT_COLUMNS})
      SELECT j.seq, ${NUMBER}, j.manual, j.started_at, j.duration_ms, j.url, j.signature, j.status, j.outcome, j.error, j.error_code,
        j.excerpt, j.truncated, j.next
      FROM (SELECT (v ->> 'k')::int AS k, (v ->> 'seq')::bigint AS seq, (v ->> 'manual')::int AS manual, (v ->> 'startedAt')::bigint AS started_at,
              (v ->> 'durationMs')::double precision AS duration_ms, v ->> 'url' AS url, v ->> 'signature' AS signature, (v ->> 'status')::int AS status,
              v ->> 'outcome' AS outcome, v ->> 'error' AS error, v ->> 'errorCode' AS error_code, v ->> 'excerpt' AS excerpt,
              (v ->> 'truncated')::int AS truncated, (v ->> 'next')::bigint AS next
            FROM json_array_elements(CAST(@items AS json)) AS v) AS j
      ORDER BY j.k
      RETURNING id, delivery_seq AS seq, number`,
  }),
  // A cancelled delivery stays cancelled (uninstalled while the attempt was in flight). Given an
  // owner, only while that owner still holds the lease.
  complete: statement<{ seq: number }>({
    sqlite: `UPDATE webhook_deliveries SET
        status = CASE WHEN webhook_deliveries.status = 'cancelled' THEN webhook_deliveries.status ELSE n.status END,
        next_attempt_at = CASE WHEN webhook_deliveries.status = 'cancelled' THEN NULL ELSE n.next END,
        completed_at = CASE WHEN webhook_deliveries.status = 'cancelled' THEN webhook_deliveries.completed_at ELSE COALESCE(n.completed, webhook_deliveries.completed_at) END,
        attempts = n.attempts, lease_until = NULL, lease_owner = NULL, updated_at = n.now, last_status = n.last_status, last_error = n.last_error
      FROM (SELECT value ->> 'seq' AS seq, value ->> 'status' AS status, value ->> 'next' AS next, value ->> 'completed' AS completed,
              value ->> 'attempts' AS attempts, value ->> 'now' AS now, value ->> 'lastStatus' AS last_status, value ->> 'lastError' AS last_error,
              value ->> 'owner' AS owner
            FROM json_each(@items)) AS n
      WHERE webhook_deliveries.seq = n.seq AND (n.owner IS NULL OR webhook_deliveries.lease_owner = n.owner)
      RETURNING webhook_deliveries.seq`,
    postgres: `UPDATE webhook_deliveries d SET
        status = CASE WHEN d.status = 'cancelled' THEN d.status ELSE n.status END,
        next_attempt_at = CASE WHEN d.status = 'cancelled' THEN NULL ELSE n.next END,
        completed_at = CASE WHEN d.status = 'cancelled' THEN d.completed_at ELSE COALESCE(n.completed, d.completed_at) END,
        attempts = n.attempts, lease_until = NULL, lease_owner = NULL, updated_at = n.now, last_status = n.last_status, last_error = n.last_error
      FROM (SELECT (v ->> 'seq')::bigint AS seq, v ->> 'status' AS status, (v ->> 'next')::bigint AS next, (v ->> 'completed')::bigint AS completed,
              (v ->> 'attempts')::int AS attempts, (v ->> 'now')::bigint AS now, (v ->> 'lastStatus')::int AS last_status, v ->> 'lastError' AS last_error,
              v ->> 'owner' AS owner
            FROM json_array_elements(CAST(@items AS json)) AS v) AS n
      WHERE d.seq = n.seq AND (n.owner IS NULL OR d.lease_owner = n.owner)
      RETURNING d.seq`,
  }),
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

/** One turn's attempts, inserted in one statement; each one's id, in the order given. */
async function insertAttempts(tx: Queries, attempts: Array<{ seq: number; attempt: AttemptRecord }>): Promise<number[]> {
  const items: AttemptItem[] = attempts.map(({ seq, attempt: a }, k) => ({
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
  const rows = await tx.all(q.insertAttempts, { items: jsonRows(items) });
  // Matched by delivery and number (attempts of one delivery were numbered in turn order).
  const bySeq = new Map<number, number[]>();
  for (const r of [...rows].sort((a, b) => Number(a.number) - Number(b.number))) {
    const list = bySeq.get(Number(r.seq));
    if (list) list.push(Number(r.id));
    else bySeq.set(Number(r.seq), [Number(r.id)]);
  }
  return attempts.map(({ seq }) => bySeq.get(seq)!.shift()!);
}

export interface OutcomeDeps {
  noteDue: (origin: string, at: number) => void;
}

export type OutcomeItem = { seq: number; origin?: string; owner?: string; attempt: AttemptRecord; next: NextState; now: number };

export function createOutcomes({ noteDue }: OutcomeDeps) {
  return {
    /**
     * Record attempts and their deliveries' next states in the caller's transaction (group commit:
     * three statements at most, whatever the batch); releases the leases. Returns each attempt's id
     * (its feed cursor), in order, and the deliveries whose state was left alone: given an `owner`,
     * a delivery whose lease that owner no longer holds (it expired and another sender took it)
     * gets the attempt recorded (it was made) but keeps the state the new holder gives it.
     */
    async completeMany(tx: Queries, items: OutcomeItem[]): Promise<{ ids: number[]; stale: number[] }> {
      if (!items.length) return { ids: [], stale: [] };
      const states = items.map(({ seq, owner, attempt, next, now }) => ({
        seq,
        status: next.status,
        next: next.nextAttemptAt,
        completed: next.completedAt,
        attempts: next.attempts,
        now,
        lastStatus: attempt.status,
        lastError: attempt.error,
        owner: owner ?? null,
      }));
      const done = new Set((await tx.all(q.complete, { items: jsonRows(states) })).map((r) => Number(r.seq)));
      const stale = items.filter((i) => !done.has(i.seq)).map((i) => i.seq);
      const retries: number[] = [];
      for (const { seq, origin, next } of items) {
        if (!done.has(seq) || next.nextAttemptAt === null) continue;
        if (origin !== undefined) noteDue(origin, next.nextAttemptAt);
        retries.push(seq);
      }
      // Paused while these attempts were in flight: their retries wait for the resume (asked of the
      // store, in this transaction: a pause by another process or node counts at once).
      if (retries.length) await holdIfPaused(tx, retries, Math.max(...items.map((i) => i.now)));
      // Last: the attempts are the live tail's feed, numbered and committed in one order (feed-order.ts).
      await appendInOrder(tx, 'attempts');
      const ids = await insertAttempts(tx, items);
      return { ids, stale };
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
