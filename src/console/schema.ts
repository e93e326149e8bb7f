/** The console's table: revoked sessions, shared by every serving process and kept across restarts. */
import type { ModuleMigrations } from '../store/index.ts';

export const consoleMigrations: ModuleMigrations = {
  module: 'console',
  steps: [`CREATE TABLE console_revocations (id TEXT PRIMARY KEY, expires_at INTEGER NOT NULL)`],
  // PostgreSQL (docs/postgres.md): the same tables in their current shape, as one step.
  postgres: [`CREATE TABLE console_revocations (id TEXT PRIMARY KEY, expires_at BIGINT NOT NULL)`],
};
