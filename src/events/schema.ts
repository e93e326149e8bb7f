import type { ModuleMigrations } from '../store/index.ts';

/**
 * Every event accepted at ingest, stored before it is acknowledged. `id` is the eventId (dedup key).
 * `event_handler_runs`: one row per (event, installation whose integration handles it), inserted in
 * the event's transaction; claimed by SQL leases and retried like a webhook delivery (see
 * handler-runs.ts). Its attempts are the invocations carrying its event_id and installation_id.
 */
export const eventsMigrations: ModuleMigrations = {
  module: 'events',
  steps: [
    `CREATE TABLE events (
      seq INTEGER PRIMARY KEY,
      id TEXT NOT NULL UNIQUE,
      type TEXT NOT NULL,
      installation_id TEXT,
      payload TEXT NOT NULL,
      received_at INTEGER NOT NULL,
      delivery_count INTEGER NOT NULL DEFAULT 0
    );
    CREATE INDEX events_by_type ON events (type, seq);
    CREATE INDEX events_by_time ON events (received_at);`,
    `CREATE TABLE event_handler_runs (
      seq INTEGER PRIMARY KEY,
      id TEXT NOT NULL UNIQUE,
      event_id TEXT NOT NULL,
      event_type TEXT NOT NULL,
      installation_id TEXT NOT NULL,
      integration TEXT NOT NULL,
      status TEXT NOT NULL CHECK (status IN ('pending', 'retrying', 'delivered', 'failed', 'cancelled')),
      attempts INTEGER NOT NULL DEFAULT 0,
      next_attempt_at INTEGER,
      lease_until INTEGER,
      lease_owner TEXT,
      created_at INTEGER NOT NULL,
      updated_at INTEGER NOT NULL,
      completed_at INTEGER,
      last_invocation TEXT,
      last_error TEXT,
      UNIQUE (event_id, installation_id)
    );
    CREATE INDEX event_handler_runs_due ON event_handler_runs (next_attempt_at) WHERE next_attempt_at IS NOT NULL;
    CREATE INDEX event_handler_runs_leased ON event_handler_runs (lease_until) WHERE lease_until IS NOT NULL;
    CREATE INDEX event_handler_runs_by_status ON event_handler_runs (status, seq);
    CREATE INDEX event_handler_runs_by_time ON event_handler_runs (created_at);`,
  ],
  // PostgreSQL (docs/postgres.md): the same tables in their current shape, as one step.
  postgres: [
    `CREATE TABLE events (
      seq BIGSERIAL PRIMARY KEY,
      id TEXT NOT NULL UNIQUE,
      type TEXT NOT NULL,
      installation_id TEXT,
      payload TEXT NOT NULL,
      received_at BIGINT NOT NULL,
      delivery_count INTEGER NOT NULL DEFAULT 0
    );
    CREATE INDEX events_by_type ON events (type, seq);
    CREATE INDEX events_by_time ON events (received_at);
    CREATE TABLE event_handler_runs (
      seq BIGSERIAL PRIMARY KEY,
      id TEXT NOT NULL UNIQUE,
      event_id TEXT NOT NULL,
      event_type TEXT NOT NULL,
      installation_id TEXT NOT NULL,
      integration TEXT NOT NULL,
      status TEXT NOT NULL CHECK (status IN ('pending', 'retrying', 'delivered', 'failed', 'cancelled')),
      attempts INTEGER NOT NULL DEFAULT 0,
      next_attempt_at BIGINT,
      lease_until BIGINT,
      lease_owner TEXT,
      created_at BIGINT NOT NULL,
      updated_at BIGINT NOT NULL,
      completed_at BIGINT,
      last_invocation TEXT,
      last_error TEXT,
      UNIQUE (event_id, installation_id)
    );
    CREATE INDEX event_handler_runs_due ON event_handler_runs (next_attempt_at) WHERE next_attempt_at IS NOT NULL;
    CREATE INDEX event_handler_runs_leased ON event_handler_runs (lease_until) WHERE lease_until IS NOT NULL;
    CREATE INDEX event_handler_runs_by_status ON event_handler_runs (status, seq);
    CREATE INDEX event_handler_runs_by_time ON event_handler_runs (created_at);`,
  ],
};
