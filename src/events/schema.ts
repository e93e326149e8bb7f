import type { ModuleMigrations } from '../store/index.ts';

/** Every event accepted at ingest, stored before it is acknowledged. `id` is the eventId (dedup key). */
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
  ],
};
