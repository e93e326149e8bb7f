import type { ModuleMigrations } from '../store/index.ts';

/**
 * Installations, the server's signing keys (short-lived invocation tokens, OAuth state, install
 * links), and the generation of each integration's install links (a revocation bumps it: links.ts).
 */
export const installationsMigrations: ModuleMigrations = {
  module: 'installations',
  steps: [
    `CREATE TABLE installations (
      id TEXT PRIMARY KEY,
      integration TEXT NOT NULL,
      target TEXT NOT NULL CHECK (target IN ('organization', 'space', 'site')),
      space_id TEXT,
      site_id TEXT,
      status TEXT NOT NULL CHECK (status IN ('pending', 'active', 'paused', 'uninstalled')),
      configuration TEXT NOT NULL DEFAULT '{}',
      external_ids TEXT NOT NULL DEFAULT '[]',
      token_hash TEXT NOT NULL UNIQUE,
      created_at TEXT NOT NULL,
      updated_at TEXT NOT NULL,
      uninstalled_at TEXT
    );
    CREATE INDEX installations_by_integration ON installations (integration, status);
    CREATE TABLE signing_keys (
      name TEXT PRIMARY KEY,
      key BLOB NOT NULL,
      created_at TEXT NOT NULL
    );`,
    `CREATE TABLE install_links (
      integration TEXT PRIMARY KEY,
      generation INTEGER NOT NULL,
      revoked_at TEXT NOT NULL
    );`,
  ],
  // PostgreSQL (docs/postgres.md): the tables as they were first made in one step, then the steps after.
  postgres: [
    `CREATE TABLE installations (
      id TEXT PRIMARY KEY,
      integration TEXT NOT NULL,
      target TEXT NOT NULL CHECK (target IN ('organization', 'space', 'site')),
      space_id TEXT,
      site_id TEXT,
      status TEXT NOT NULL CHECK (status IN ('pending', 'active', 'paused', 'uninstalled')),
      configuration TEXT NOT NULL DEFAULT '{}',
      external_ids TEXT NOT NULL DEFAULT '[]',
      token_hash TEXT NOT NULL UNIQUE,
      created_at TEXT NOT NULL,
      updated_at TEXT NOT NULL,
      uninstalled_at TEXT
    );
    CREATE INDEX installations_by_integration ON installations (integration, status);
    CREATE TABLE signing_keys (
      name TEXT PRIMARY KEY,
      key BYTEA NOT NULL,
      created_at TEXT NOT NULL
    );`,
    `CREATE TABLE install_links (
      integration TEXT PRIMARY KEY,
      generation INTEGER NOT NULL,
      revoked_at TEXT NOT NULL
    );`,
  ],
};
