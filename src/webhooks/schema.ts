import type { ModuleMigrations } from '../store/index.ts';

/**
 * Origins are kept to 300 characters (queue-rows.ts, MAX_ORIGIN_LENGTH: PostgreSQL's index
 * refused a longer one, and with it every ingest of its event types); this cuts those stored
 * before, the same way, on either engine. On PostgreSQL only rows outside the due index (held or
 * final) can have one; SQLite took them anywhere, and a copy to PostgreSQL must fit them too.
 */
const CUT_ORIGINS = `UPDATE webhook_deliveries SET origin = substr(origin, 1, 300) WHERE length(origin) > 300;`;

/**
 * The delivery queue, its attempts, and the signing secrets of webhook installations.
 * Times that drive scheduling are integer milliseconds (indexed, compared on every wake-up).
 * `next_attempt_at` is NULL once a delivery is final (or held by a pause), so the partial index holds only live work
 * and scheduling does not slow down as history grows.
 */
export const webhooksMigrations: ModuleMigrations = {
  module: 'webhooks',
  steps: [
    `CREATE TABLE webhook_endpoints (
      installation_id TEXT PRIMARY KEY,
      paused INTEGER NOT NULL DEFAULT 0,
      created_at INTEGER NOT NULL
    );
    CREATE TABLE webhook_secrets (
      id INTEGER PRIMARY KEY,
      installation_id TEXT NOT NULL,
      secret TEXT NOT NULL,
      created_at INTEGER NOT NULL,
      expires_at INTEGER
    );
    CREATE INDEX webhook_secrets_by_installation ON webhook_secrets (installation_id, id);
    CREATE TABLE webhook_deliveries (
      seq INTEGER PRIMARY KEY,
      id TEXT NOT NULL UNIQUE,
      event_id TEXT NOT NULL,
      event_type TEXT NOT NULL,
      installation_id TEXT NOT NULL,
      url TEXT NOT NULL,
      origin TEXT NOT NULL,
      body TEXT NOT NULL,
      status TEXT NOT NULL CHECK (status IN ('pending', 'retrying', 'delivered', 'failed', 'cancelled')),
      attempts INTEGER NOT NULL DEFAULT 0,
      next_attempt_at INTEGER,
      lease_until INTEGER,
      lease_owner TEXT,
      created_at INTEGER NOT NULL,
      updated_at INTEGER NOT NULL,
      completed_at INTEGER,
      last_status INTEGER,
      last_error TEXT,
      UNIQUE (event_id, installation_id)
    );
    CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE next_attempt_at IS NOT NULL;
    CREATE INDEX webhook_deliveries_leased ON webhook_deliveries (lease_until) WHERE lease_until IS NOT NULL;
    CREATE INDEX webhook_deliveries_by_status ON webhook_deliveries (status, seq);
    CREATE INDEX webhook_deliveries_by_installation ON webhook_deliveries (installation_id, seq);
    CREATE INDEX webhook_deliveries_by_time ON webhook_deliveries (created_at);
    CREATE TABLE webhook_attempts (
      id INTEGER PRIMARY KEY,
      delivery_seq INTEGER NOT NULL REFERENCES webhook_deliveries (seq) ON DELETE CASCADE,
      number INTEGER NOT NULL,
      manual INTEGER NOT NULL DEFAULT 0,
      started_at INTEGER NOT NULL,
      duration_ms REAL,
      url TEXT NOT NULL,
      signature TEXT,
      status INTEGER,
      outcome TEXT NOT NULL CHECK (outcome IN ('success', 'retry', 'fail', 'interrupted')),
      error TEXT,
      error_code TEXT,
      response_excerpt TEXT,
      response_truncated INTEGER NOT NULL DEFAULT 0,
      next_attempt_at INTEGER
    );
    CREATE INDEX webhook_attempts_by_delivery ON webhook_attempts (delivery_seq, number);`,
    // Due work per endpoint origin: the sender asks each origin with free slots for its earliest
    // due deliveries, so a backlog at one endpoint is never scanned to find work for another.
    `CREATE INDEX webhook_deliveries_due_by_origin ON webhook_deliveries (origin, next_attempt_at) WHERE next_attempt_at IS NOT NULL;`,
    // One outcome vocabulary, and held deliveries (docs/webhooks.md, "What a delivery looks like"). SQLite
    // cannot change a CHECK, so both tables are rebuilt (rowids kept: attempt ids are the tail's
    // cursor). Old rows are rewritten: `fail` becomes `failed`, and so does a `retry` attempt that
    // scheduled nothing (the last one of an exhausted delivery, or a manual one); a queued delivery
    // of a paused installation becomes `held`, out of the due index until its installation resumes.
    `CREATE TABLE webhook_deliveries_v3 (
      seq INTEGER PRIMARY KEY,
      id TEXT NOT NULL UNIQUE,
      event_id TEXT NOT NULL,
      event_type TEXT NOT NULL,
      installation_id TEXT NOT NULL,
      url TEXT NOT NULL,
      origin TEXT NOT NULL,
      body TEXT NOT NULL,
      status TEXT NOT NULL CHECK (status IN ('pending', 'retrying', 'held', 'delivered', 'failed', 'cancelled')),
      attempts INTEGER NOT NULL DEFAULT 0,
      next_attempt_at INTEGER,
      lease_until INTEGER,
      lease_owner TEXT,
      created_at INTEGER NOT NULL,
      updated_at INTEGER NOT NULL,
      completed_at INTEGER,
      last_status INTEGER,
      last_error TEXT,
      UNIQUE (event_id, installation_id)
    );
    INSERT INTO webhook_deliveries_v3 (seq, id, event_id, event_type, installation_id, url, origin, body, status, attempts, next_attempt_at,
        lease_until, lease_owner, created_at, updated_at, completed_at, last_status, last_error)
      SELECT d.seq, d.id, d.event_id, d.event_type, d.installation_id, d.url, d.origin, d.body,
        CASE WHEN d.status IN ('pending', 'retrying') AND e.paused = 1 THEN 'held' ELSE d.status END,
        d.attempts,
        CASE WHEN d.status IN ('pending', 'retrying') AND e.paused = 1 THEN NULL ELSE d.next_attempt_at END,
        d.lease_until, d.lease_owner, d.created_at, d.updated_at, d.completed_at, d.last_status, d.last_error
      FROM webhook_deliveries d LEFT JOIN webhook_endpoints e ON e.installation_id = d.installation_id;
    CREATE TABLE webhook_attempts_v3 (
      id INTEGER PRIMARY KEY,
      delivery_seq INTEGER NOT NULL REFERENCES webhook_deliveries_v3 (seq) ON DELETE CASCADE,
      number INTEGER NOT NULL,
      manual INTEGER NOT NULL DEFAULT 0,
      started_at INTEGER NOT NULL,
      duration_ms REAL,
      url TEXT NOT NULL,
      signature TEXT,
      status INTEGER,
      outcome TEXT NOT NULL CHECK (outcome IN ('success', 'retry', 'failed', 'interrupted')),
      error TEXT,
      error_code TEXT,
      response_excerpt TEXT,
      response_truncated INTEGER NOT NULL DEFAULT 0,
      next_attempt_at INTEGER
    );
    INSERT INTO webhook_attempts_v3 (id, delivery_seq, number, manual, started_at, duration_ms, url, signature, status, outcome, error,
        error_code, response_excerpt, response_truncated, next_attempt_at)
      SELECT id, delivery_seq, number, manual, started_at, duration_ms, url, signature, status,
        CASE WHEN outcome = 'fail' OR (outcome = 'retry' AND next_attempt_at IS NULL) THEN 'failed' ELSE outcome END,
        error, error_code, response_excerpt, response_truncated, next_attempt_at
      FROM webhook_attempts;
    DROP TABLE webhook_attempts;
    DROP TABLE webhook_deliveries;
    ALTER TABLE webhook_deliveries_v3 RENAME TO webhook_deliveries;
    ALTER TABLE webhook_attempts_v3 RENAME TO webhook_attempts;
    CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE next_attempt_at IS NOT NULL;
    CREATE INDEX webhook_deliveries_due_by_origin ON webhook_deliveries (origin, next_attempt_at) WHERE next_attempt_at IS NOT NULL;
    CREATE INDEX webhook_deliveries_leased ON webhook_deliveries (lease_until) WHERE lease_until IS NOT NULL;
    CREATE INDEX webhook_deliveries_by_status ON webhook_deliveries (status, seq);
    CREATE INDEX webhook_deliveries_by_installation ON webhook_deliveries (installation_id, seq);
    CREATE INDEX webhook_deliveries_by_time ON webhook_deliveries (created_at);
    -- A resume finds its installation's held deliveries, in event order, without reading its history.
    CREATE INDEX webhook_deliveries_held ON webhook_deliveries (installation_id, seq) WHERE status = 'held';
    CREATE INDEX webhook_attempts_by_delivery ON webhook_attempts (delivery_seq, number);`,
    CUT_ORIGINS,
  ],
  // PostgreSQL (docs/postgres.md): the same tables in their current shape, as one step.
  postgres: [
    `CREATE TABLE webhook_endpoints (
      installation_id TEXT PRIMARY KEY,
      paused INTEGER NOT NULL DEFAULT 0,
      created_at BIGINT NOT NULL
    );
    CREATE TABLE webhook_secrets (
      id BIGSERIAL PRIMARY KEY,
      installation_id TEXT NOT NULL,
      secret TEXT NOT NULL,
      created_at BIGINT NOT NULL,
      expires_at BIGINT
    );
    CREATE INDEX webhook_secrets_by_installation ON webhook_secrets (installation_id, id);
    CREATE TABLE webhook_deliveries (
      seq BIGSERIAL PRIMARY KEY,
      id TEXT NOT NULL UNIQUE,
      event_id TEXT NOT NULL,
      event_type TEXT NOT NULL,
      installation_id TEXT NOT NULL,
      url TEXT NOT NULL,
      origin TEXT NOT NULL,
      body TEXT NOT NULL,
      status TEXT NOT NULL CHECK (status IN ('pending', 'retrying', 'held', 'delivered', 'failed', 'cancelled')),
      attempts INTEGER NOT NULL DEFAULT 0,
      next_attempt_at BIGINT,
      lease_until BIGINT,
      lease_owner TEXT,
      created_at BIGINT NOT NULL,
      updated_at BIGINT NOT NULL,
      completed_at BIGINT,
      last_status INTEGER,
      last_error TEXT,
      UNIQUE (event_id, installation_id)
    );
    CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at, seq) WHERE next_attempt_at IS NOT NULL;
    CREATE INDEX webhook_deliveries_due_by_origin ON webhook_deliveries (origin, next_attempt_at, seq) WHERE next_attempt_at IS NOT NULL;
    CREATE INDEX webhook_deliveries_leased ON webhook_deliveries (lease_until) WHERE lease_until IS NOT NULL;
    CREATE INDEX webhook_deliveries_by_status ON webhook_deliveries (status, seq);
    CREATE INDEX webhook_deliveries_by_installation ON webhook_deliveries (installation_id, seq);
    CREATE INDEX webhook_deliveries_by_time ON webhook_deliveries (created_at);
    CREATE INDEX webhook_deliveries_held ON webhook_deliveries (installation_id, seq) WHERE status = 'held';
    CREATE TABLE webhook_attempts (
      id BIGSERIAL PRIMARY KEY,
      delivery_seq BIGINT NOT NULL REFERENCES webhook_deliveries (seq) ON DELETE CASCADE,
      number INTEGER NOT NULL,
      manual INTEGER NOT NULL DEFAULT 0,
      started_at BIGINT NOT NULL,
      duration_ms DOUBLE PRECISION,
      url TEXT NOT NULL,
      signature TEXT,
      status INTEGER,
      outcome TEXT NOT NULL CHECK (outcome IN ('success', 'retry', 'failed', 'interrupted')),
      error TEXT,
      error_code TEXT,
      response_excerpt TEXT,
      response_truncated INTEGER NOT NULL DEFAULT 0,
      next_attempt_at BIGINT
    );
    CREATE INDEX webhook_attempts_by_delivery ON webhook_attempts (delivery_seq, number);`,
    CUT_ORIGINS,
    // A delivery's attempts so far, counted with a snapshot of its own (a VOLATILE function's query
    // takes a fresh one): called by a turn's record after the feed's order lock, inside the one
    // statement whose own snapshot is older than the lock (queue-outcomes.ts), so the numbers count
    // an attempt the lock's previous holder committed.
    `CREATE OR REPLACE FUNCTION webhook_attempts_so_far(delivery BIGINT) RETURNS BIGINT LANGUAGE sql VOLATILE
      AS $$ SELECT COUNT(*) FROM webhook_attempts WHERE delivery_seq = delivery $$;`,
  ],
};
