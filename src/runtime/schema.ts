import type { ModuleMigrations } from '../store/index.ts';

/**
 * Only a platform event's invocations carry an event id: the others (public endpoints, renders)
 * are left out of its index, one B-tree fewer to write for each of them (~1.2 us a record on
 * SQLite, measured). `event_id = ?` reads still use it on both engines.
 */
const PARTIAL_EVENT_INDEX = `DROP INDEX invocations_by_event;
    CREATE INDEX invocations_by_event ON invocations (event_id) WHERE event_id IS NOT NULL;`;

/** Every invocation of integration code, with what it printed; and per-installation event outcomes. */
export const runtimeMigrations: ModuleMigrations = {
  module: 'runtime',
  steps: [
    `CREATE TABLE invocations (
      id TEXT PRIMARY KEY,
      integration TEXT NOT NULL,
      installation_id TEXT,
      event_type TEXT NOT NULL,
      event_id TEXT,
      status INTEGER NOT NULL,
      duration_ms REAL NOT NULL,
      cpu_ms REAL NOT NULL,
      error_kind TEXT,
      error_message TEXT,
      error_stack TEXT,
      logs TEXT NOT NULL DEFAULT '[]',
      created_at TEXT NOT NULL
    );
    CREATE INDEX invocations_by_time ON invocations (created_at);
    CREATE INDEX invocations_by_integration ON invocations (integration, created_at);
    CREATE INDEX invocations_by_installation ON invocations (installation_id, created_at);
    CREATE INDEX invocations_by_event ON invocations (event_id);`,
    // The breached limit of a 'limit' fault (sandbox.<name>), stored instead of read back from the message.
    `ALTER TABLE invocations ADD COLUMN error_limit TEXT;`,
    PARTIAL_EVENT_INDEX,
  ],
  // PostgreSQL (docs/postgres.md): the same tables in their current shape, as one step.
  postgres: [
    // rowid: SQLite's implicit row number, the invocation log's cursor; a column of its own here.
    `CREATE TABLE invocations (
      rowid BIGSERIAL UNIQUE,
      id TEXT PRIMARY KEY,
      integration TEXT NOT NULL,
      installation_id TEXT,
      event_type TEXT NOT NULL,
      event_id TEXT,
      status INTEGER NOT NULL,
      duration_ms DOUBLE PRECISION NOT NULL,
      cpu_ms DOUBLE PRECISION NOT NULL,
      error_kind TEXT,
      error_message TEXT,
      error_stack TEXT,
      logs TEXT NOT NULL DEFAULT '[]',
      created_at TEXT NOT NULL,
      error_limit TEXT
    );
    CREATE INDEX invocations_by_time ON invocations (created_at);
    CREATE INDEX invocations_by_integration ON invocations (integration, created_at);
    CREATE INDEX invocations_by_installation ON invocations (installation_id, created_at);
    CREATE INDEX invocations_by_event ON invocations (event_id);`,
    PARTIAL_EVENT_INDEX,
  ],
};
