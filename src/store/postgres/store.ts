/**
 * The store in PostgreSQL (`store: postgres://…` in config.yaml): the same modules and queries as
 * on SQLite, through the store's contract on a pool (pool.ts) on the process's own event loop.
 * Migrations run under an advisory lock, so nodes that start together migrate once. The data
 * directory still holds this node's lock and caches; everything the nodes share is in the database.
 */
import { SwitchyardError } from '../../errors.ts';
import { storeLocksMigrationPostgres, type Lock } from '../lock.ts';
import { createStoreHealth, storageCode, storeHealthMigrationPostgres } from '../health.ts';
import type { Database } from '../contract.ts';
import type { Logger } from '../../log/index.ts';
import { applyStepsOn } from '../migrate.ts';
import { createPostgresDatabase } from './pool.ts';
import { readStoreUrl, STORE_URL_FORM } from './url.ts';

// Shapes of store/index.ts's, restated: that file opens this one (an import back would be a circle).
type Migrations = Array<{ module: string; postgres?: string[] }>;

/** pg_advisory_lock's key for migrations: any constant the nodes share ("swyd" in ASCII). */
const MIGRATION_LOCK = 0x73777964;

/**
 * The store in PostgreSQL on the serving process's own event loop (pool.ts): migrations on one
 * session under the nodes' advisory lock, then the pool for everything else.
 */
export async function connectPostgresStore(
  url: string,
  opts: { readonly?: boolean; migrations?: Migrations; applicationName?: string; log?: Logger },
  lock: Lock | undefined,
) {
  const read = readStoreUrl(url);
  if (!read.ok) {
    lock?.release();
    throw new SwitchyardError('config_invalid', `the store URL ${read.problem} (the value is not repeated here: it may hold a password)`, { hint: read.hint });
  }
  const name = read.url.display;
  const database = createPostgresDatabase({ url, name, readonly: opts.readonly, applicationName: opts.applicationName ?? `switchyard ${process.pid}` });
  try {
    await database.withSession(
      async (s) => {
        if (opts.readonly) {
          const [row] = await s.query<{ present: boolean }>('SELECT to_regclass($1) IS NOT NULL AS present', ['schema_migrations']);
          if (!row?.present)
            throw new SwitchyardError('not_found', `no Switchyard tables at ${name}`, { hint: 'start the server once with `switchyard serve`' });
          return;
        }
        await s.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK]);
        try {
          await s.query(storeHealthMigrationPostgres);
          await s.query(storeLocksMigrationPostgres);
          // The nodes on this store and the integration versions each serves (registry/peers.ts).
          await s.query('CREATE TABLE IF NOT EXISTS store_nodes (node_id TEXT PRIMARY KEY, integrations TEXT NOT NULL, seen_at BIGINT NOT NULL)');
          await applyStepsOn(s, opts.migrations ?? [], (m) => m.postgres ?? [], 'run the newer switchyard version on every node');
        } finally {
          await s.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK]).catch(() => {});
        }
      },
      { unbounded: !opts.readonly },
    );
  } catch (e) {
    await database.close().catch(() => {});
    lock?.release();
    if (e instanceof SwitchyardError && e.code !== 'storage_unavailable') throw e;
    throw new SwitchyardError(
      e instanceof SwitchyardError || storageCode(e) === 'storage_unavailable' ? 'storage_unavailable' : 'storage_failed',
      `cannot reach the store at ${name}: ${(e as Error).message}`,
      {
        hint: `check \`store:\` in config.yaml (${STORE_URL_FORM}) and that the server is up`,
        cause: e,
      },
    );
  }
  const health = createStoreHealth(database, { engine: 'postgres', database: name });
  return {
    database: database as Database,
    postgres: database,
    file: name,
    engine: 'postgres' as const,
    shared: true,
    health,
    /** PostgreSQL's own checkpointer and autovacuum do this job. */
    checkpointPassive: async () => {},
    async close() {
      health.close();
      await database.close().catch(() => {});
      lock?.release();
    },
  };
}
