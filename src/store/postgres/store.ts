/**
 * The store in PostgreSQL (`store: postgres://…` in config.yaml): the same modules and queries as
 * on SQLite, through a synchronous connection (bridge.ts). Migrations run under an advisory lock,
 * so nodes that start together migrate once. The data directory still holds this node's lock and
 * caches; everything the nodes share is in the database.
 */
import { SwitchyardError } from '../../errors.ts';
import { storeLocksMigrationPostgres, type Lock } from '../lock.ts';
import { createStoreHealth, storageCode, storeHealthMigrationPostgres } from '../health.ts';
import type Database from 'better-sqlite3';
import { openPostgresDb } from './db.ts';
import { createDatabase } from '../database.ts';
import { applySteps } from '../migrate.ts';
import { readStoreUrl, STORE_URL_FORM } from './url.ts';

// Shapes of store/index.ts's, restated: that file opens this one (an import back would be a circle).
type Db = Database.Database;
type Migrations = Array<{ module: string; postgres?: string[] }>;

/** pg_advisory_lock's key for migrations: any constant the nodes share ("swyd" in ASCII). */
const MIGRATION_LOCK = 0x73777964;

export function openPostgresStore(
  url: string,
  opts: { readonly?: boolean; migrations?: Migrations; hooks: (db: Db) => void },
  lock: Lock | undefined,
) {
  // The configuration refused an unclean URL already; a caller that did not read one from it gets the same answer.
  const read = readStoreUrl(url);
  if (!read.ok) {
    lock?.release();
    throw new SwitchyardError('config_invalid', `the store URL ${read.problem} (the value is not repeated here: it may hold a password)`, { hint: read.hint });
  }
  const name = read.url.display;
  let db: Db;
  try {
    db = openPostgresDb({ url, name, readonly: opts.readonly, applicationName: `switchyard ${process.pid}` });
    db.prepare('SELECT 1').get();
  } catch (e) {
    lock?.release();
    throw new SwitchyardError(storageCode(e) === 'storage_unavailable' ? 'storage_unavailable' : 'storage_failed', `cannot reach the store at ${name}: ${(e as Error).message}`, {
      hint: `check \`store:\` in config.yaml (${STORE_URL_FORM}) and that the server is up`,
      cause: e,
    });
  }
  try {
    if (!opts.readonly) {
      opts.hooks(db);
      migratePostgres(db, opts.migrations ?? []);
    } else if (!hasTable(db, 'schema_migrations')) {
      throw new SwitchyardError('not_found', `no Switchyard tables at ${name}`, { hint: 'start the server once with `switchyard serve`' });
    }
  } catch (e) {
    db.close();
    lock?.release();
    throw e;
  }
  const database = createDatabase(db, 'postgres');
  const health = createStoreHealth(database, { engine: 'postgres', database: name });
  return {
    db,
    database,
    file: name,
    engine: 'postgres' as const,
    shared: true,
    health,
    /** PostgreSQL's own checkpointer and autovacuum do this job. */
    checkpointPassive: async () => {},
    close() {
      health.close();
      db.close();
      lock?.release();
    },
  };
}

function hasTable(db: Db, table: string): boolean {
  return db.prepare('SELECT to_regclass(?) IS NOT NULL AS present').pluck().get(table) === true;
}

/** Each module's PostgreSQL steps past its recorded version, one transaction per module, under the nodes' shared lock. */
export function migratePostgres(db: Db, modules: Migrations): void {
  db.prepare('SELECT pg_advisory_lock(?)').get(MIGRATION_LOCK);
  try {
    db.exec(storeHealthMigrationPostgres);
    db.exec(storeLocksMigrationPostgres);
    // No store_generations here: on PostgreSQL a change is announced by NOTIFY (generations.ts).
    // The nodes on this store and the integration versions each serves (registry/peers.ts).
    db.exec('CREATE TABLE IF NOT EXISTS store_nodes (node_id TEXT PRIMARY KEY, integrations TEXT NOT NULL, seen_at BIGINT NOT NULL)');
    applySteps(db, modules, (m) => m.postgres ?? [], 'run the newer switchyard version on every node');
  } finally {
    db.prepare('SELECT pg_advisory_unlock(?)').get(MIGRATION_LOCK);
  }
}
