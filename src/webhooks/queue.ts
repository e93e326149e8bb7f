/**
 * The delivery queue in SQLite: every state change of a delivery is one statement or one
 * transaction here, so a crash leaves each delivery either before or after a step, never between.
 * The worker (worker.ts) decides; this file only records.
 */
import { timeOrderedId } from '../ids.ts';
import { hideUrlCredentials } from '../log/index.ts';
import type { Db } from '../store/index.ts';
import { LOCK_BUSY, lockPatience } from '../store/patience.ts';
import type { AttemptOutcome } from './policy.ts';

export { DELIVERY_STATUSES, type DeliveryStatus, type Delivery, type Attempt, type DeliveryDetail } from './views.ts';
import { DELIVERY_STATUSES, type DeliveryStatus, type Delivery, type Attempt, type DeliveryDetail } from './views.ts';

/** What the worker needs to make one attempt. */
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

export interface DeliveryFilter {
  status?: DeliveryStatus;
  type?: string;
  installation?: string;
  event?: string;
  /** Only deliveries to this URL origin (`https://hooks.example.com`). */
  origin?: string;
  since?: number;
  until?: number;
  limit?: number;
  cursor?: string;
}

/** Which deliveries a replay takes: of a finished status, created in the window, optionally narrowed. */
export interface ReplayFilter {
  status: 'failed' | 'delivered';
  since: number;
  until: number;
  installation?: string;
  type?: string;
  origin?: string;
}

interface Row {
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

interface AttemptRow {
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

/** One attempt as the live tail shows it: the attempt, its delivery, and a cursor to resume after it. */
export interface AttemptFeedItem {
  cursor: string;
  deliveryId: string;
  eventId: string;
  eventType: string;
  installationId: string;
  /** The delivery's status now (it may have moved on since this attempt). */
  deliveryStatus: DeliveryStatus;
  attempt: Attempt;
}

interface FeedRow extends AttemptRow {
  id: number;
  delivery_id: string;
  event_id: string;
  event_type: string;
  installation_id: string;
  delivery_status: DeliveryStatus;
}

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

const origins = new Map<string, string>();

/** The URL's origin (the unit of per-endpoint concurrency); remembered, since few URLs recur often. */
export function originOf(url: string): string {
  let o = origins.get(url);
  if (o === undefined) {
    try {
      o = new URL(url).origin;
    } catch {
      o = url;
    }
    if (origins.size > 10_000) origins.clear();
    origins.set(url, o);
  }
  return o;
}

/** `dlv_` + a time-ordered id (see src/ids.ts). */
export const newDeliveryId = (now = Date.now()): string => timeOrderedId('dlv', now);

const replayParams = (f: ReplayFilter) => ({
  status: f.status,
  since: f.since,
  until: f.until,
  installation: f.installation ?? null,
  type: f.type ?? null,
  origin: f.origin ?? null,
});

// Attempt numbers run 1, 2, 3... per delivery (insertAttempt), so the highest is how many there are.
const COLUMNS = `d.seq, d.id, d.event_id, d.event_type, d.installation_id, d.url, d.origin, d.body, d.status, d.attempts,
  d.next_attempt_at, d.lease_until, d.created_at, d.updated_at, d.completed_at, d.last_status, d.last_error,
  COALESCE((SELECT MAX(a.number) FROM webhook_attempts a WHERE a.delivery_seq = d.seq), 0) AS attempt_total`;
/** The delivery's installation is paused (its webhook endpoint row says so). */
const PAUSED = `EXISTS (SELECT 1 FROM webhook_endpoints e WHERE e.installation_id = webhook_deliveries.installation_id AND e.paused = 1)`;

/** Why one delivery cannot be replayed (replayOne). */
export type ReplayRefusal = 'not_found' | 'queued' | 'cancelled' | 'uninstalled' | 'busy';

export type Queue = ReturnType<typeof createQueue>;

/**
 * A delivery of a paused installation is `held`: out of the due index (next_attempt_at NULL), so
 * the scheduler never looks at it, until resume makes it due. Every write that could make such a
 * delivery due again (an attempt ending with a retry, a lease given back, a replay) holds it when
 * its installation is paused; `anyPaused` (false only when no installation is paused, in the
 * database too) spares the check when none is.
 */
export function createQueue(db: Db, opts: { maxAttempts: () => number; anyPaused?: () => boolean }) {
  const anyPaused = opts.anyPaused ?? (() => true);
  // The statements run for every delivery (insert, insertAttempt, complete) take positional
  // parameters: binding by name costs about 1 us more per statement (measured, 11 columns).
  const q = {
    insert: db.prepare(
      `INSERT INTO webhook_deliveries (id, event_id, event_type, installation_id, url, origin, body, status, next_attempt_at, lease_until, lease_owner, created_at, updated_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (event_id, installation_id) DO NOTHING`,
    ),
    // Ties (a resume makes a whole backlog due at the same ms) come in rowid order, the index's
    // last column: event order.
    dueForOrigin: db.prepare<{ origin: string; now: number; limit: number }, { seq: number; origin: string }>(
      `SELECT d.seq, d.origin FROM webhook_deliveries d INDEXED BY webhook_deliveries_due_by_origin
       WHERE d.origin = @origin AND d.next_attempt_at <= @now AND (d.lease_until IS NULL OR d.lease_until <= @now)
       ORDER BY d.next_attempt_at, d.seq LIMIT @limit`,
    ),
    nextForOrigin: db.prepare<{ origin: string; now: number }, { at: number | null }>(
      `SELECT MIN(d.next_attempt_at) AS at FROM webhook_deliveries d INDEXED BY webhook_deliveries_due_by_origin
       WHERE d.origin = @origin AND d.next_attempt_at IS NOT NULL AND (d.lease_until IS NULL OR d.lease_until <= @now)`,
    ),
    liveOrigins: db.prepare<[], { origin: string; at: number }>(
      `SELECT origin, MIN(next_attempt_at) AS at FROM webhook_deliveries WHERE next_attempt_at IS NOT NULL GROUP BY origin`,
    ),
    pausedInstallation: db.prepare<[string], { n: number }>('SELECT 1 AS n FROM webhook_endpoints WHERE installation_id = ? AND paused = 1'),
    // Only queued deliveries have a next attempt: the due index finds them without reading history.
    hold: db.prepare<{ installationId: string; now: number }>(
      `UPDATE webhook_deliveries INDEXED BY webhook_deliveries_due SET status = 'held', next_attempt_at = NULL, updated_at = @now
       WHERE next_attempt_at IS NOT NULL AND installation_id = @installationId AND status IN ('pending', 'retrying')`,
    ),
    holdIfPaused: db.prepare<{ seq: number; now: number }>(
      `UPDATE webhook_deliveries SET status = 'held', next_attempt_at = NULL, updated_at = @now
       WHERE seq = @seq AND status IN ('pending', 'retrying') AND ${PAUSED}`,
    ),
    releaseHeld: db.prepare<{ installationId: string; now: number }, { origin: string }>(
      `UPDATE webhook_deliveries SET status = CASE WHEN attempts > 0 THEN 'retrying' ELSE 'pending' END, next_attempt_at = @now, updated_at = @now
       WHERE installation_id = @installationId AND status = 'held'
       RETURNING origin`,
    ),
    claim: db.prepare<{ seq: number; owner: string; now: number; until: number }, any>(
      `UPDATE webhook_deliveries SET lease_until = @until, lease_owner = @owner
       WHERE seq = @seq AND next_attempt_at IS NOT NULL AND next_attempt_at <= @now AND (lease_until IS NULL OR lease_until <= @now)
       RETURNING seq, id, url, origin, body, event_id, installation_id, event_type, status, attempts, next_attempt_at, created_at`,
    ),
    claimMany: db.prepare<{ seqs: string; owner: string; now: number; until: number }, any>(
      `UPDATE webhook_deliveries SET lease_until = @until, lease_owner = @owner
       WHERE seq IN (SELECT value FROM json_each(@seqs)) AND next_attempt_at IS NOT NULL AND next_attempt_at <= @now
         AND (lease_until IS NULL OR lease_until <= @now)
       RETURNING seq, id, url, origin, body, event_id, installation_id, event_type, status, attempts, next_attempt_at, created_at`,
    ),
    claimById: db.prepare<{ id: string; owner: string; now: number; until: number }, any>(
      `UPDATE webhook_deliveries SET lease_until = @until, lease_owner = @owner
       WHERE id = @id AND status != 'cancelled' AND (lease_until IS NULL OR lease_until <= @now)
       RETURNING seq, id, url, origin, body, event_id, installation_id, event_type, status, attempts, next_attempt_at, created_at`,
    ),
    setUrl: db.prepare('UPDATE webhook_deliveries SET url = ?, origin = ? WHERE seq = ?'),
    setInstallationUrl: db.prepare(
      `UPDATE webhook_deliveries SET url = ?, origin = ? WHERE installation_id = ? AND status IN ('pending', 'retrying', 'held') AND url != ?`,
    ),
    insertAttempt: db.prepare(
      `INSERT INTO webhook_attempts (delivery_seq, number, manual, started_at, duration_ms, url, signature, status, outcome, error, error_code,
         response_excerpt, response_truncated, next_attempt_at)
       VALUES (?, (SELECT COUNT(*) FROM webhook_attempts WHERE delivery_seq = ?) + 1, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    ),
    complete: db.prepare(
      `UPDATE webhook_deliveries SET
         status = CASE WHEN status = 'cancelled' THEN status ELSE ? END,
         next_attempt_at = CASE WHEN status = 'cancelled' THEN NULL ELSE ? END,
         completed_at = CASE WHEN status = 'cancelled' THEN completed_at ELSE COALESCE(?, completed_at) END,
         attempts = ?, lease_until = NULL, lease_owner = NULL, updated_at = ?,
         last_status = ?, last_error = ?
       WHERE seq = ?`,
    ),
    // The next scheduled attempt, or a lease running out (an attempt whose outcome was never
    // recorded becomes due again then), whichever comes first.
    nextDue: db.prepare<{ now: number }, { at: number | null }>(
      `SELECT MIN(at) AS at FROM (
         SELECT MIN(next_attempt_at) AS at FROM webhook_deliveries WHERE next_attempt_at > @now
         UNION ALL SELECT MIN(lease_until) FROM webhook_deliveries WHERE lease_until > @now)`,
    ),
    leased: db.prepare<{ owner: string }, { seq: number; status: DeliveryStatus; url: string }>(
      `SELECT seq, status, url FROM webhook_deliveries WHERE lease_until IS NOT NULL AND substr(lease_owner, 1, length(@owner)) = @owner`,
    ),
    release: db.prepare(
      `UPDATE webhook_deliveries SET lease_until = NULL, lease_owner = NULL, updated_at = @now,
         next_attempt_at = CASE WHEN status IN ('pending', 'retrying') THEN @now ELSE next_attempt_at END
       WHERE seq = @seq`,
    ),
    cancel: db.prepare(
      `UPDATE webhook_deliveries SET status = 'cancelled', next_attempt_at = NULL, completed_at = @now, updated_at = @now,
         last_error = COALESCE(last_error, 'cancelled: the installation was uninstalled')
       WHERE installation_id = @installationId AND status IN ('pending', 'retrying', 'held')`,
    ),
    byId: db.prepare<[string], Row>(`SELECT ${COLUMNS} FROM webhook_deliveries d WHERE d.id = ?`),
    attemptsOf: db.prepare<[number], AttemptRow>('SELECT * FROM webhook_attempts WHERE delivery_seq = ? ORDER BY number'),
    replayable: db.prepare<
      { status: string; since: number; until: number; installation: string | null; type: string | null; origin: string | null },
      { seq: number; id: string; event_type: string; installation_id: string; url: string }
    >(
      `SELECT seq, id, event_type, installation_id, url FROM webhook_deliveries INDEXED BY webhook_deliveries_by_status
       WHERE status = @status AND created_at >= @since AND created_at <= @until
         AND (@installation IS NULL OR installation_id = @installation)
         AND (@type IS NULL OR event_type = @type) AND (@origin IS NULL OR origin = @origin)
         AND installation_id IN (SELECT installation_id FROM webhook_endpoints)
       ORDER BY seq`,
    ),
    hasEndpoint: db.prepare<[string], { n: number }>('SELECT 1 AS n FROM webhook_endpoints WHERE installation_id = ?'),
    // Back to the queue with a fresh schedule (`attempts` counts the schedule's automatic attempts;
    // the attempts made before stay, numbered on). Not under an attempt in flight: its outcome would
    // overwrite this.
    requeue: db.prepare(
      `UPDATE webhook_deliveries SET status = 'pending', attempts = 0, next_attempt_at = @now, completed_at = NULL, updated_at = @now,
         url = @url, origin = @origin
       WHERE seq = @seq AND status IN ('failed', 'delivered') AND (lease_until IS NULL OR lease_until <= @now)`,
    ),
    counts: db.prepare<[], { status: DeliveryStatus; n: number }>('SELECT status, COUNT(*) AS n FROM webhook_deliveries GROUP BY status'),
    attemptsAfter: db.prepare<{ after: number; limit: number; installation: string | null; type: string | null }, FeedRow>(
      `SELECT a.*, d.id AS delivery_id, d.event_id, d.event_type, d.installation_id, d.status AS delivery_status
       FROM webhook_attempts a JOIN webhook_deliveries d ON d.seq = a.delivery_seq
       WHERE a.id > @after AND (@installation IS NULL OR d.installation_id = @installation) AND (@type IS NULL OR d.event_type = @type)
       ORDER BY a.id LIMIT @limit`,
    ),
    lastAttempt: db.prepare<[], { id: number }>('SELECT MAX(id) AS id FROM webhook_attempts'),
    retriesDue: db.prepare<[number], { n: number }>(
      `SELECT COUNT(*) AS n FROM webhook_deliveries WHERE status = 'retrying' AND next_attempt_at <= ? AND lease_until IS NULL`,
    ),
    purgeFinished: db.prepare<{ before: number; limit: number }>(
      `DELETE FROM webhook_deliveries WHERE seq IN (
         SELECT seq FROM webhook_deliveries
         WHERE status IN ('delivered', 'cancelled') AND completed_at < @before AND lease_until IS NULL
           AND seq IS NOT (SELECT delivery_seq FROM webhook_attempts ORDER BY id DESC LIMIT 1)
         LIMIT @limit)`,
    ),
    purgeFailed: db.prepare<{ before: number; limit: number }>(
      `DELETE FROM webhook_deliveries WHERE seq IN (
         SELECT seq FROM webhook_deliveries
         WHERE status = 'failed' AND completed_at < @before AND lease_until IS NULL
           AND seq IS NOT (SELECT delivery_seq FROM webhook_attempts ORDER BY id DESC LIMIT 1)
         LIMIT @limit)`,
    ),
  };

  const inTransaction = db.transaction((fn: () => unknown) => fn());
  const patience = lockPatience(db);

  /** A finished delivery back to the queue (held if its installation is paused); undefined when it is under an attempt. */
  function requeue(
    r: { seq: number; event_type: string; installation_id: string; url: string },
    now: number,
    urlOf: (d: { eventType: string; installationId: string; url: string }) => string,
  ): boolean | undefined {
    const url = urlOf({ eventType: r.event_type, installationId: r.installation_id, url: r.url });
    if (!q.requeue.run({ seq: r.seq, now, url, origin: originOf(url) }).changes) return undefined;
    if (q.holdIfPaused.run({ seq: r.seq, now }).changes) return true;
    noteDue(originOf(url), now);
    return false;
  }

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

  // Per origin, a lower bound of the earliest time it has a due, unleased, not-held delivery
  // (absent: nothing live). A hint, kept conservative (too early only costs one indexed query):
  // every place that sets next_attempt_at lowers it; a query that finds nothing raises or drops it.
  const originDue = new Map<string, number>();
  for (const r of q.liveOrigins.all()) originDue.set(r.origin, r.at);
  const noteDue = (origin: string, at: number) => {
    const cur = originDue.get(origin);
    if (cur === undefined || at < cur) originDue.set(origin, at);
  };
  let rotation = 0;

  function view(r: Row): Delivery {
    return {
      id: r.id,
      eventId: r.event_id,
      eventType: r.event_type,
      installationId: r.installation_id,
      url: hideUrlCredentials(r.url), // shown without credentials; sending uses the stored URL
      status: r.status,
      attemptCount: r.attempt_total,
      scheduledAttempts: r.attempts,
      maxAttempts: opts.maxAttempts(),
      nextAttemptAt: iso(r.next_attempt_at),
      held: r.status === 'held',
      lastStatus: r.last_status,
      lastError: r.last_error && hideUrlCredentials(r.last_error),
      createdAt: iso(r.created_at)!,
      updatedAt: iso(r.updated_at)!,
      completedAt: iso(r.completed_at),
    };
  }

  function attemptView(a: AttemptRow): Attempt {
    return {
      number: a.number,
      manual: a.manual === 1,
      startedAt: iso(a.started_at)!,
      durationMs: a.duration_ms === null ? null : Math.round(a.duration_ms * 100) / 100,
      url: hideUrlCredentials(a.url),
      signatureHeader: a.signature,
      status: a.status,
      outcome: a.outcome,
      error: a.error && hideUrlCredentials(a.error),
      errorCode: a.error_code,
      responseExcerpt: a.response_excerpt,
      responseTruncated: a.response_truncated === 1,
      nextAttemptAt: iso(a.next_attempt_at),
    };
  }

  const claimedOf = (r: any): Claimed | undefined =>
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

  return {
    /**
     * Enqueue one delivery (inside the caller's transaction). Null when this event already has one
     * for this installation. With `lease`, the delivery is stored already claimed by that owner
     * (its first attempt starts as soon as the transaction commits, without a claim of its own).
     * With `held` (its installation is paused: see isPaused), it is stored `held`, with no next
     * attempt, and waits for releaseHeld.
     */
    enqueue(
      input: { eventId: string; eventType: string; installationId: string; url: string; body: string; now: number; held?: boolean },
      lease?: { owner: string; until: number },
    ): Claimed | null {
      const id = newDeliveryId(input.now);
      const origin = originOf(input.url);
      const now = input.now;
      const held = input.held === true && !lease;
      const r = q.insert.run(
        id, input.eventId, input.eventType, input.installationId, input.url, origin, input.body,
        held ? 'held' : 'pending', held ? null : now, lease?.until ?? null, lease?.owner ?? null, now, now,
      );
      if (!r.changes) return null;
      if (!lease && !held) noteDue(origin, input.now);
      return {
        seq: Number(r.lastInsertRowid),
        id,
        url: input.url,
        origin,
        body: input.body,
        eventId: input.eventId,
        installationId: input.installationId,
        eventType: input.eventType,
        status: held ? 'held' : 'pending',
        attempts: 0,
        nextAttemptAt: held ? null : input.now,
        createdAt: input.now,
      };
    },

    /** Whether the installation is paused, read in the caller's transaction (exact, unlike a copy in memory). */
    isPaused(installationId: string): boolean {
      return q.pausedInstallation.get(installationId) !== undefined;
    },

    /** Pause (in the caller's transaction): the installation's queued deliveries become `held`. Returns how many. */
    holdInstallation(installationId: string, now: number): number {
      return q.hold.run({ installationId, now }).changes;
    },

    /**
     * Resume (in the caller's transaction, after the pause is lifted): every held delivery of the
     * installation is due now, pending again (retrying if it had attempts). Returns how many.
     */
    releaseHeld(installationId: string, now: number): number {
      const origins = q.releaseHeld.all({ installationId, now });
      for (const o of new Set(origins.map((r) => r.origin))) noteDue(o, now);
      return origins.length;
    },

    /**
     * Up to `limit` due, unleased deliveries, at most `roomOf(origin)` per origin, each origin's
     * earliest first (ties in the order they were stored), origins taken in turn. Cost grows with
     * the origins that have due work, never with the size of a backlog (held ones are not due).
     */
    due(now: number, limit: number, roomOf: (origin: string) => number = () => limit): Array<{ seq: number; origin: string }> {
      const origins = [...originDue.keys()];
      const out: Array<{ seq: number; origin: string }> = [];
      // Round-robin over origins (a different first one each time): every endpoint gets its turn.
      rotation = origins.length ? (rotation + 1) % origins.length : 0;
      for (let i = 0; i < origins.length && out.length < limit; i++) {
        const origin = origins[(rotation + i) % origins.length];
        const room = roomOf(origin);
        if (room <= 0 || originDue.get(origin)! > now) continue;
        const rows = q.dueForOrigin.all({ origin, now, limit: Math.min(room, limit - out.length) });
        if (rows.length) {
          out.push(...rows);
          continue;
        }
        const at = q.nextForOrigin.get({ origin, now })?.at ?? null;
        if (at === null) originDue.delete(origin);
        else originDue.set(origin, at > now ? at : now + 1); // leased or just claimed: look again next time
      }
      return out;
    },

    /**
     * Learn the origins other processes sharing the store have made due (their retries, the leases
     * of a process that died): the per-origin hint only sees this process's own writes.
     */
    refreshDue(): void {
      for (const r of q.liveOrigins.all()) noteDue(r.origin, r.at);
    },

    /** A delivery of `origin` becomes due at `at` (a retry scheduled, a manual attempt that kept its schedule). */
    noteDue(origin: string, at: number): void {
      noteDue(origin, at);
    },

    /** Take the lease of a due delivery; undefined when another worker has it or it is no longer due. */
    claim(seq: number, owner: string, now: number, until: number): Claimed | undefined {
      return claimedOf(q.claim.get({ seq, owner, now, until }));
    },

    /** Run `fn` in one transaction (a savepoint when already inside one). */
    atomically<T>(fn: () => T): T {
      return inTransaction(fn) as T;
    },

    /**
     * As atomically, but LOCK_BUSY (nothing done) when another process holds the write lock, until
     * it has refused for a few ms (store/patience.ts): a group commit tries again next turn.
     */
    atomicallyUnlessBusy<T>(fn: () => T): T | typeof LOCK_BUSY {
      return patience.run(() => inTransaction(fn) as T);
    },

    /** Take the leases of several due deliveries in one statement (in the order given); those no longer due or leased are left out. */
    claimMany(seqs: number[], owner: string, now: number, until: number): Claimed[] {
      const rows = q.claimMany.all({ seqs: JSON.stringify(seqs), owner, now, until }).map((r) => claimedOf(r)!);
      const order = new Map(seqs.map((s, i) => [s, i]));
      return rows.sort((a, b) => order.get(a.seq)! - order.get(b.seq)!);
    },

    /** Take the lease of any delivery by id (manual attempt), whatever its schedule. */
    claimById(id: string, owner: string, now: number, until: number): Claimed | undefined {
      return claimedOf(q.claimById.get({ id, owner, now, until }));
    },

    setUrl(seq: number, url: string): void {
      q.setUrl.run(url, originOf(url), seq);
      noteDue(originOf(url), 0);
    },

    /** The installation's URL changed: its queued deliveries go to the new one. Returns how many. */
    setInstallationUrl(installationId: string, url: string): number {
      const n = q.setInstallationUrl.run(url, originOf(url), installationId, url).changes;
      if (n) noteDue(originOf(url), 0);
      return n;
    },

    /**
     * Record attempts and their deliveries' next states, atomically (one transaction for a batch:
     * group commit); releases the leases. Returns each attempt's id (its feed cursor), in order.
     */
    completeMany: db.transaction((items: Array<{ seq: number; origin?: string; attempt: AttemptRecord; next: NextState; now: number }>): number[] => {
      const ids: number[] = [];
      const paused = anyPaused();
      for (const { seq, origin, attempt, next, now } of items) {
        if (origin !== undefined && next.nextAttemptAt !== null) noteDue(origin, next.nextAttemptAt);
        const inserted = insertAttempt(seq, attempt);
        q.complete.run(next.status, next.nextAttemptAt, next.completedAt, next.attempts, now, attempt.status, attempt.error, seq);
        // Paused while this attempt was in flight: its retry waits for the resume.
        if (paused && next.nextAttemptAt !== null) q.holdIfPaused.run({ seq, now });
        ids.push(Number(inserted.lastInsertRowid));
      }
      return ids;
    }),

    /** The earliest scheduled attempt after `now`, if any (the scheduler's next wake-up). */
    nextDueAfter(now: number): number | undefined {
      return q.nextDue.get({ now })?.at ?? undefined;
    },

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
        q.holdIfPaused.run({ seq: r.seq, now });
        noteDue(originOf(r.url), now);
      }
      return rows.length;
    }),

    /** Uninstall: queued deliveries of the installation will never go out. */
    cancelInstallation(installationId: string, now: number): number {
      return q.cancel.run({ installationId, now }).changes;
    },

    get(id: string): DeliveryDetail | undefined {
      const r = q.byId.get(id);
      if (!r) return undefined;
      const attempts = q.attemptsOf.all(r.seq).map(attemptView);
      let payload: unknown;
      try {
        payload = JSON.parse(r.body);
      } catch {
        payload = null;
      }
      const signed = [...attempts].reverse().find((a) => a.signatureHeader);
      return { ...view(r), body: r.body, payload, signatureHeader: signed?.signatureHeader ?? null, attempts };
    },

    list(f: DeliveryFilter): { deliveries: Delivery[]; nextCursor: string | null } {
      const where: string[] = [];
      const params: Record<string, unknown> = {};
      if (f.status) (where.push('d.status = @status'), (params.status = f.status));
      if (f.type) (where.push('d.event_type = @type'), (params.type = f.type));
      if (f.installation) (where.push('d.installation_id = @installation'), (params.installation = f.installation));
      if (f.event) (where.push('d.event_id = @event'), (params.event = f.event));
      if (f.origin) (where.push('d.origin = @origin'), (params.origin = f.origin));
      if (f.since !== undefined) (where.push('d.created_at >= @since'), (params.since = f.since));
      if (f.until !== undefined) (where.push('d.created_at <= @until'), (params.until = f.until));
      if (f.cursor) (where.push('d.seq < @cursor'), (params.cursor = Number(f.cursor)));
      const limit = Math.min(Math.max(f.limit ?? 50, 1), 500);
      const rows = db
        .prepare<Record<string, unknown>, Row>(
          `SELECT ${COLUMNS} FROM webhook_deliveries d ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY d.seq DESC LIMIT ${limit}`,
        )
        .all(params);
      return { deliveries: rows.map(view), nextCursor: rows.length === limit ? String(rows[rows.length - 1].seq) : null };
    },

    /** The ids a replay with this filter would take now (a dry run: nothing changes). */
    replayable(f: ReplayFilter): string[] {
      return q.replayable.all(replayParams(f)).map((r) => r.id);
    },

    /**
     * Deliveries of `status` (failed or delivered) created in the window go back to the queue with
     * a fresh schedule, in one transaction; `urlOf` may refresh the URL. Those of an uninstalled
     * installation are skipped; those of a paused one are held. Returns the ids, in event order.
     */
    replay: db.transaction(
      (f: ReplayFilter, now: number, urlOf: (d: { eventType: string; installationId: string; url: string }) => string): Array<{ id: string; held: boolean }> => {
        const out: Array<{ id: string; held: boolean }> = [];
        for (const r of q.replayable.all(replayParams(f))) {
          const held = requeue(r, now, urlOf);
          if (held !== undefined) out.push({ id: r.id, held });
        }
        return out;
      },
    ),

    /** One finished delivery back to the queue with a fresh schedule, or why not. */
    replayOne: db.transaction(
      (id: string, now: number, urlOf: (d: { eventType: string; installationId: string; url: string }) => string): { held: boolean } | ReplayRefusal => {
        const r = q.byId.get(id);
        if (!r) return 'not_found';
        if (r.status === 'cancelled') return 'cancelled';
        if (r.status !== 'failed' && r.status !== 'delivered') return 'queued';
        if (!q.hasEndpoint.get(r.installation_id)) return 'uninstalled';
        const held = requeue(r, now, urlOf);
        return held === undefined ? 'busy' : { held };
      },
    ),

    counts(): Record<DeliveryStatus, number> {
      const out = Object.fromEntries(DELIVERY_STATUSES.map((s) => [s, 0])) as Record<DeliveryStatus, number>;
      for (const r of q.counts.all()) out[r.status] = r.n;
      return out;
    },

    // --- Inspection (live tail, metrics) and retention; see src/inspection and src/retention. ---

    /** Attempts recorded after `afterId` (ascending; ids only grow), with their delivery: the tail's cursor read. */
    attemptsAfter(afterId: number, limit: number, f: { installation?: string; type?: string } = {}): AttemptFeedItem[] {
      return q.attemptsAfter
        .all({ after: afterId, limit, installation: f.installation ?? null, type: f.type ?? null })
        .map((r) => ({
          cursor: String(r.id),
          deliveryId: r.delivery_id,
          eventId: r.event_id,
          eventType: r.event_type,
          installationId: r.installation_id,
          deliveryStatus: r.delivery_status,
          attempt: attemptView(r),
        }));
    },

    /** The newest attempt's id (0 when none): where a live tail starts. */
    lastAttemptId(): number {
      return q.lastAttempt.get()?.id ?? 0;
    },

    /** Retries whose time has come but that have not started (waiting for a slot; held ones are not due). */
    retriesDue(now: number): number {
      return q.retriesDue.get(now)?.n ?? 0;
    },

    /**
     * Delete up to `limit` delivered or cancelled deliveries completed before `before`, with their
     * attempts (ON DELETE CASCADE). Failed ones stay: they can still be replayed. The delivery that
     * holds the newest attempt is kept so attempt ids are never reused (a tail's cursor stays valid).
     */
    purgeFinished(before: number, limit: number): number {
      return q.purgeFinished.run({ before, limit }).changes;
    },

    /** Delete up to `limit` failed deliveries that failed before `before` (no longer replayable), with their attempts; same cursor rule. */
    purgeFailed(before: number, limit: number): number {
      return q.purgeFailed.run({ before, limit }).changes;
    },
  };
}
