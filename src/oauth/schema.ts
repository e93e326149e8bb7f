import type { ModuleMigrations } from '../store/index.ts';

/** Issued OAuth states: a nonce is accepted once, before it expires. */
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
  ],
};
