import type { ModuleMigrations } from '../store/index.ts';

/** Issued OAuth states: a nonce is accepted once, before it expires; with its PKCE verifier until then. */
export const oauthMigrations: ModuleMigrations = {
  module: 'oauth',
  steps: [
    `CREATE TABLE oauth_states (
      nonce TEXT PRIMARY KEY,
      installation_id TEXT NOT NULL,
      expires_at INTEGER NOT NULL,
      used_at INTEGER
    );
    CREATE INDEX oauth_states_by_expiry ON oauth_states (expires_at);`,
    // PKCE (RFC 7636): the code_verifier of a state, kept server-side until the state is used.
    `ALTER TABLE oauth_states ADD COLUMN verifier TEXT;`,
    // Renewal claims (claims.ts): in the store, so every serving process sees them.
    `CREATE TABLE oauth_refresh_claims (installation_id TEXT PRIMARY KEY, claim TEXT NOT NULL, until INTEGER NOT NULL);`,
  ],
  // PostgreSQL (docs/postgres.md): the same tables in their current shape, as one step.
  postgres: [
    `CREATE TABLE oauth_states (
      nonce TEXT PRIMARY KEY,
      installation_id TEXT NOT NULL,
      expires_at BIGINT NOT NULL,
      used_at BIGINT,
      verifier TEXT
    );
    CREATE INDEX oauth_states_by_expiry ON oauth_states (expires_at);
    CREATE TABLE oauth_refresh_claims (installation_id TEXT PRIMARY KEY, claim TEXT NOT NULL, until BIGINT NOT NULL);`,
  ],
};
