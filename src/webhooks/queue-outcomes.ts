/**
 * Recording outcomes: each attempt's row and its delivery's next state, written together (one
 * transaction per group commit), its lease released; and after a crash, the attempts whose outcome
 * was lost, recorded as interrupted and sent again.
 */
import type { Db } from '../store/index.ts';
import { originOf, type AttemptRecord, type NextState } from './queue-rows.ts';
import type { DeliveryStatus } from './views.ts';

export interface OutcomeDeps {
  /** False only when no installation is paused: spares holdIfPaused on every retry. */
  anyPaused: () => boolean;
  holdIfPaused: (seq: number, now: number) => boolean;
  noteDue: (origin: string, at: number) => void;
}

export function createOutcomes(db: Db, { anyPaused, holdIfPaused, noteDue }: OutcomeDeps) {
  const q = {
    insertAttempt: db.prepare(
      `INSERT INTO webhook_attempts (delivery_seq, number, manual, started_at, duration_ms, url, signature, status, outcome, error, error_code,
         response_excerpt, response_truncated, next_attempt_at)
       VALUES (?, (SELECT COUNT(*) FROM webhook_attempts WHERE delivery_seq = ?) + 1, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    ),
    complete: db.prepare(
      `UPDATE webhook_deliveries SET
         status = CASE WHEN status = 'cancelled' THEN status ELSE ? END,
         next_attempt_at = CASE WHEN status = 'cancelled' THEN NULL ELSE CAST(? AS BIGINT) END,
         completed_at = CASE WHEN status = 'cancelled' THEN completed_at ELSE COALESCE(CAST(? AS BIGINT), completed_at) END,
         attempts = ?, lease_until = NULL, lease_owner = NULL, updated_at = ?,
         last_status = ?, last_error = ?
       WHERE seq = ? AND (CAST(? AS TEXT) IS NULL OR lease_owner = ?)`,
    ),
    leased: db.prepare<{ owner: string }, { seq: number; status: DeliveryStatus; url: string }>(
      `SELECT seq, status, url FROM webhook_deliveries WHERE lease_until IS NOT NULL AND substr(lease_owner, 1, length(@owner)) = @owner`,
    ),
    release: db.prepare(
      `UPDATE webhook_deliveries SET lease_until = NULL, lease_owner = NULL, updated_at = @now,
         next_attempt_at = CASE WHEN status IN ('pending', 'retrying') THEN @now ELSE next_attempt_at END
       WHERE seq = @seq`,
    ),
  };

  /** One attempt row; its number follows the delivery's attempts so far. */
  const insertAttempt = (seq: number, a: AttemptRecord) =>
    q.insertAttempt.run(
      seq,
      seq,
      a.manual ? 1 : 0,
      a.startedAt,
      a.durationMs,
      a.url,
      a.signatureHeader,
      a.status,
      a.outcome,
      a.error,
      a.errorCode,
      a.responseExcerpt,
      a.responseTruncated ? 1 : 0,
      a.nextAttemptAt,
    );

  return {
    /**
     * Record attempts and their deliveries' next states, atomically (one transaction for a batch:
     * group commit); releases the leases. Returns each attempt's id (its feed cursor), in order,
     * and the deliveries whose state was left alone: given an `owner`, a delivery whose lease that
     * owner no longer holds (it expired and another worker took it) gets the attempt recorded (it
     * was made) but keeps the state the new holder gives it.
     */
    completeMany: db.transaction(
      (items: Array<{ seq: number; origin?: string; owner?: string; attempt: AttemptRecord; next: NextState; now: number }>): { ids: number[]; stale: number[] } => {
        const ids: number[] = [];
        const stale: number[] = [];
        const paused = anyPaused();
        for (const { seq, origin, owner, attempt, next, now } of items) {
          const inserted = insertAttempt(seq, attempt);
          ids.push(Number(inserted.lastInsertRowid));
          const o = owner ?? null;
          if (q.complete.run(next.status, next.nextAttemptAt, next.completedAt, next.attempts, now, attempt.status, attempt.error, seq, o, o).changes === 0) {
            stale.push(seq);
            continue;
          }
          if (origin !== undefined && next.nextAttemptAt !== null) noteDue(origin, next.nextAttemptAt);
          // Paused while this attempt was in flight: its retry waits for the resume.
          if (paused && next.nextAttemptAt !== null) holdIfPaused(seq, now);
        }
        return { ids, stale };
      },
    ),

    /**
     * After a crash: the leases of processes that are gone. With no `ownerPrefix`, every lease (at
     * start, before any process serves: the data directory lock guarantees it); with one (`<pid>.`),
     * those of one dead serving process. Their attempts' outcomes are unknown, so each is recorded
     * as interrupted and the delivery is due again at once (at-least-once).
     */
    recoverInterrupted: db.transaction((now: number, ownerPrefix = ''): number => {
      const rows = q.leased.all({ owner: ownerPrefix });
      for (const r of rows) {
        insertAttempt(r.seq, {
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
        });
        q.release.run({ seq: r.seq, now });
        holdIfPaused(r.seq, now);
        noteDue(originOf(r.url), now);
      }
      return rows.length;
    }),
  };
}
