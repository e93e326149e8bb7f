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

type Session = Parameters<Parameters<ReturnType<typeof createPostgresDatabase>['withSession']>[0]>[0];

/**
 * The nodes' migration lock. Taken by another node (migrating, or stopped while it migrated: its
 * session holds the lock until PostgreSQL ends it), this one waits however long, and says so: at
 * once, naming the holder's session, every 30 s after, and when the wait ends.
 */
async function takeMigrationLock(s: Session, log: Logger | undefined): Promise<void> {
  const [free] = await s.query<{ ok: boolean }>('SELECT pg_try_advisory_lock($1) AS ok', [MIGRATION_LOCK]);
  if (free?.ok) return;
  // A single-key advisory lock shows in pg_locks as classid 0, objid the key, objsubid 1.
  const holders = await s.query<{ who: string }>(
    `SELECT format('%s (pid %s, from %s, in its session for %s)', a.application_name, a.pid, COALESCE(host(a.client_addr), 'a local socket'),
       date_trunc('second', now() - a.backend_start)) AS who
     FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
     WHERE l.locktype = 'advisory' AND l.granted AND l.classid = 0 AND l.objid::bigint = $1 AND l.objsubid = 1`,
    [MIGRATION_LOCK],
  );
  const started = performance.now();
  log?.warn("waiting for another node's migrations of the store", {
    holder: holders.map((h) => h.who).join('; ') || 'unknown (released meanwhile, or not visible to this role)',
    hint: 'it ends when that node finishes; a node stopped mid-migration holds the lock until PostgreSQL ends its session (pg_terminate_backend)',
  });
  const still = setInterval(
    () => log?.warn("still waiting for another node's migrations of the store", { waited_ms: Math.round(performance.now() - started) }),
    30_000,
  );
  try {
    await s.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK]);
  } finally {
    clearInterval(still);
  }
  log?.info("another node's migrations ended; this one goes on", { waited_ms: Math.round(performance.now() - started) });
}

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
        await takeMigrationLock(s, opts.log);
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
