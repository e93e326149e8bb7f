/** The console's table: revoked sessions, shared by every serving process and kept across restarts. */
import type { ModuleMigrations } from '../store/index.ts';

export const consoleMigrations: ModuleMigrations = {
  module: 'console',
  steps: [`CREATE TABLE console_revocations (id TEXT PRIMARY KEY, expires_at INTEGER NOT NULL)`],
};
