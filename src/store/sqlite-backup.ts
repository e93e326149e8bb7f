/**
 * `switchyard backup` of a SQLite store: the file written by SQLite itself, from the store's own
 * (read-only) connection, with better-sqlite3's synchronous API. It stays synchronous and SQLite's
 * alone on purpose: a command that does only this, one read transaction, so the copy is one
 * consistent snapshot while a server keeps writing. A PostgreSQL store is backed up with
 * PostgreSQL's own tools (docs/postgres.md, Backups).
 */
import { SwitchyardError } from '../errors.ts';
import type { Store } from './index.ts';

/** `VACUUM INTO file`: one self-contained database file, out of WAL mode, into an empty `file`. */
export function vacuumInto(store: Store, file: string): void {
  if (store.engine !== 'sqlite')
    throw new SwitchyardError('bad_request', 'a backup copies the SQLite file; this store is in PostgreSQL', {
      hint: "use PostgreSQL's own tools: pg_dump -Fc (docs/postgres.md, Backups)",
    });
  // query_only would refuse that write; the connection is opened read-only, so the database itself
  // stays out of reach.
  const db = store.sqlite!;
  db.pragma('query_only = OFF');
  db.prepare('VACUUM INTO ?').run(file);
}
