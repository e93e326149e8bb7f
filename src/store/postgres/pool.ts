/**
 * The store's contract (../contract.ts) on PostgreSQL, asynchronously, on the serving process's own
 * event loop: a pool of connections (driver `pg`), a statement sent as a named prepared statement
 * (parsed and planned once per connection), and a transaction on a connection of its own, so a
 * slow or silent database delays statements, never the process's HTTP, isolates or heartbeat.
 *
 * Every statement is bounded: the server cancels one that runs past `statementTimeoutMs`, the
 * driver gives up on one the server never answers after `queryTimeoutMs` (a frozen server, a
 * vanished peer), and a connection that cannot be had in `connectTimeoutMs` fails the statement.
 * A failure of the database itself (unreachable, timed out, shutting down) is the error
 * `storage_unavailable` (503), never a hang; the pool opens new connections once it is back.
 *
 * The SQL is the modules' own, translated from SQLite's dialect (dialect.ts).
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import pg from 'pg';
import { SwitchyardError } from '../../errors.ts';
import { statement, type Database, type Notifications, type Params, type Queries, type RunResult, type Statement, type Tx } from '../contract.ts';
import { Compiled } from './dialect.ts';
import { createListener } from './listener.ts';

// Integers as numbers, as SQLite hands them:
// BIGINT columns hold ms timestamps and row numbers, COUNT(*) is BIGINT, SUM/AVG are NUMERIC.
pg.types.setTypeParser(20, (v) => Number(v));
pg.types.setTypeParser(1700, (v) => Number(v));

export interface PoolOptions {
  url: string;
  /** How the database is named in messages: `postgres://host:port/db`, never with credentials. */
  name: string;
  readonly?: boolean;
  applicationName?: string;
  /** Connections at most (default 10). */
  max?: number;
  /** Default 3 s: under the serving process's heartbeat (5 s), so nothing waits on the store longer. */
  queryTimeoutMs?: number;
  /** Default half of queryTimeoutMs: a connection waited for, then a statement, stay under the heartbeat. */
  connectTimeoutMs?: number;
}

export interface PostgresDatabase extends Database {
  /** The connection string (it may hold a password: never shown; a session lock opens its own connection with it). */
  readonly url: string;
  /** Ends every connection (waits for those in use to be given back). */
  close(): Promise<void>;
  /** Connections open and idle, and callers waiting for one. */
  stats(): { total: number; idle: number; waiting: number };
  /**
   * One connection held for `fn`, for what needs a session of its own: session-level advisory
   * locks, multi-statement scripts (migrations). The store's own business, not the modules'.
   * `unbounded`: its statements have no time-out (a migration step over a large table, or the wait
   * for another node's migrations, may take minutes; the serving statements' bound is for serving).
   */
  withSession<T>(fn: (session: Session) => Promise<T>, opts?: { unbounded?: boolean }): Promise<T>;
}

/** A connection held by withSession: plain text in, rows out (several statements allowed without values). */
export interface Session {
  query<R = Record<string, unknown>>(text: string, values?: unknown[]): Promise<R[]>;
}

/** SQLSTATE classes and codes that mean the database, not the statement, failed. */
const UNAVAILABLE = /^(08|57P0[1-3]|53300|57014$)/;

export function createPostgresDatabase(opts: PoolOptions): PostgresDatabase {
  const queryTimeoutMs = opts.queryTimeoutMs ?? 3_000;
  const pool = new pg.Pool({
    connectionString: opts.url,
    application_name: opts.applicationName ?? `switchyard ${process.pid}`,
    max: opts.max ?? 10,
    // Half the statement's bound: waiting for a connection (queued behind others, or a new one's
    // handshake) and then a statement that gets no answer stay under the heartbeat together.
    connectionTimeoutMillis: opts.connectTimeoutMs ?? Math.floor(queryTimeoutMs / 2),
    query_timeout: queryTimeoutMs,
    // The server cancels a statement a little before the driver gives up waiting, so the usual
    // answer is the server's own (57014), and the connection stays usable.
    statement_timeout: Math.max(500, queryTimeoutMs - 500),
    keepAlive: true,
    keepAliveInitialDelayMillis: 10_000,
    // Idle connections do not keep the process alive: a command that forgot to close still ends.
    allowExitOnIdle: true,
    ...(opts.readonly ? { options: '-c default_transaction_read_only=on' } : {}),
  });
  // An idle connection that breaks (a restart, a network cut) is dropped by the pool: not fatal.
  pool.on('error', () => {});
  const compiled = new WeakMap<Statement, Compiled>();
  const inside = new AsyncLocalStorage<Tx>();
  /**
   * Transactions that have ended. Work scheduled inside one (a timer, setImmediate, a hook's
   * oncePerTurn) carries it in its async context: once it has ended, that work is not inside it.
   */
  const finished = new WeakSet<Tx>();
  const insideOpen = (): boolean => {
    const tx = inside.getStore();
    return tx !== undefined && !finished.has(tx);
  };

  const compile = (s: Statement): Compiled => {
    let c = compiled.get(s);
    if (!c) compiled.set(s, (c = new Compiled(typeof s.sql === 'string' ? s.sql : s.sql.postgres)));
    return c;
  };
  const args = (params: Params | undefined): unknown[] => (params === undefined ? [] : Array.isArray(params) ? params : [params]);

  /** Why a statement failed, in the store's words when the database itself is the cause. */
  function failure(e: unknown): unknown {
    const err = e as { code?: string; message?: string };
    const timedOut = !err.code && /timeout|timed out/i.test(err.message ?? '');
    // (EACCES and ENOENT: a Unix socket's, `postgres:///db?host=/run/postgresql`: not allowed, not there.)
    const refused = ['ECONNREFUSED', 'ECONNRESET', 'ENOTFOUND', 'EHOSTUNREACH', 'ETIMEDOUT', 'EPIPE', 'EACCES', 'ENOENT'].includes(err.code ?? '');
    const ended = /Connection terminated|not queryable|Client was closed/i.test(err.message ?? '');
    if (timedOut || refused || ended || (err.code && UNAVAILABLE.test(err.code)))
      return new SwitchyardError(
        'storage_unavailable',
        `the PostgreSQL database ${opts.name} cannot be reached or did not answer in time: nothing was done (${err.message ?? String(e)})`,
        {
          hint: 'check that the PostgreSQL server is up and reachable; what was stored before is kept, and the server retries by itself; send the request again',
          headers: { 'retry-after': '5' },
          cause: e,
        },
      );
    return e;
  }

  type Runner = Pick<pg.Pool, 'query'> | pg.PoolClient;
  async function send(on: Runner, s: Statement, params: Params | undefined) {
    const c = compile(s);
    const q = c.query(args(params));
    try {
      const r = await on.query({ text: q.text, values: q.values, name: q.name });
      return { c, rows: r.rows as Array<Record<string, unknown>>, rowCount: r.rowCount ?? 0 };
    } catch (e) {
      // The statement's text only, never its values (they may hold tokens and secrets).
      if (process.env.SWITCHYARD_PG_DEBUG) process.stderr.write(`PG ERROR ${(e as Error).message}\n  in: ${q.text}\n`);
      throw failure(e);
    }
  }

  const queriesOn = (on: Runner, check: () => void): Queries => ({
    engine: 'postgres',
    async all<R>(s: Statement<R>, p?: Params) {
      check();
      const r = await send(on, s, p);
      return r.rows.map((row) => r.c.shape(row)) as R[];
    },
    async get<R>(s: Statement<R>, p?: Params) {
      check();
      const r = await send(on, s, p);
      return (r.rows[0] === undefined ? undefined : r.c.shape(r.rows[0])) as R | undefined;
    },
    async value<V>(s: Statement, p?: Params) {
      check();
      const r = await send(on, s, p);
      return (r.rows[0] === undefined ? undefined : Object.values(r.c.shape(r.rows[0]))[0]) as V | undefined;
    },
    async run(s: Statement, p?: Params): Promise<RunResult> {
      check();
      const r = await send(on, s, p);
      return { changes: r.rowCount, lastId: r.c.lastId(r.rows) };
    },
  });

  const outsideOnly = () => {
    if (insideOpen()) throw new Error('a statement on the database inside one of its transactions: use the transaction (tx) given to the callback');
  };

  /** `fn` at `depth` (0: the transaction, then savepoints) on `client`, with its own hooks. */
  async function within<T>(client: pg.PoolClient, depth: number, fn: (tx: Tx) => Promise<T>, parent?: Hooks): Promise<T> {
    const hooks: Hooks = { commit: new Set(), rollback: new Set() };
    const exec = async (sql: string) => {
      try {
        await client.query(sql);
      } catch (e) {
        throw failure(e);
      }
    };
    if (depth > 0) await exec(`SAVEPOINT s${depth}`);
    else
      await exec('BEGIN').catch((e) => {
        throw new BeginFailed(e);
      });
    const tx: Tx = {
      ...queriesOn(client, () => {}),
      afterCommit: (f) => void hooks.commit.add(f),
      onRollback: (f) => void hooks.rollback.add(f),
      transaction: (inner) => within(client, depth + 1, inner, hooks),
    };
    let value: T;
    try {
      value = await inside.run(tx, () => fn(tx)).finally(() => finished.add(tx));
      await exec(depth === 0 ? 'COMMIT' : `RELEASE SAVEPOINT s${depth}`);
    } catch (e) {
      // A connection that failed (broken, or a server that stopped answering) is dropped, and the
      // server rolls back what it had begun; only one that works is told to (a ROLLBACK sent to a
      // silent server would wait out a second time-out).
      if (!(e instanceof SwitchyardError && e.code === 'storage_unavailable'))
        await client.query(depth === 0 ? 'ROLLBACK' : `ROLLBACK TO SAVEPOINT s${depth}`).catch(() => {});
      runAll(hooks.rollback);
      throw e;
    }
    if (parent) {
      for (const f of hooks.commit) parent.commit.add(f);
      for (const f of hooks.rollback) parent.rollback.add(f);
    } else runAll(hooks.commit);
    return value;
  }

  /** A connection of the pool's, ours until released; one that breaks meanwhile says so to `quiet` (the statement in flight fails by itself). */
  async function connect(): Promise<{ client: pg.PoolClient; quiet: () => void }> {
    let client: pg.PoolClient;
    try {
      client = await pool.connect();
    } catch (e) {
      throw failure(e);
    }
    const quiet = () => {};
    client.on('error', quiet);
    return { client, quiet };
  }

  async function transaction<T>(fn: (tx: Tx) => Promise<T>): Promise<T> {
    if (insideOpen()) throw new Error('a transaction on the database inside one of its transactions: use tx.transaction for a savepoint');
    // A connection the pool kept idle may have died since (a restart): a BEGIN that fails on one is
    // tried once more on a new connection, as nothing was done yet.
    for (let attempt = 0; ; attempt++) {
      const { client, quiet } = await connect();
      let broken: Error | undefined;
      try {
        return await within(client, 0, fn);
      } catch (e) {
        // A connection whose state is unknown (timed out, cut) is not given back to the pool.
        if (e instanceof SwitchyardError && e.code === 'storage_unavailable') broken = e;
        if (e instanceof BeginFailed) {
          broken = e;
          // Only a connection found dead is worth another try; one that timed out would time out again.
          if (attempt === 0 && !e.timedOut) continue;
          throw e.cause;
        }
        throw e;
      } finally {
        client.off('error', quiet);
        client.release(broken);
      }
    }
  }

  let listener: ReturnType<typeof createListener> | undefined;
  const listenerOf = () =>
    (listener ??= createListener({
      url: opts.url,
      applicationName: opts.applicationName ?? `switchyard ${process.pid}`,
      connectTimeoutMs: opts.connectTimeoutMs ?? queryTimeoutMs,
    }));
  const notifications: Notifications = {
    listen: (channel, fn) => listenerOf().listen(channel, fn),
    ready: (channel) => listenerOf().ready(channel),
    notify: async (on, channel, payload = '') => void (await on.get(NOTIFY, [channel, payload])),
  };

  return {
    ...queriesOn(pool, outsideOnly),
    transaction,
    transactionUnlessBusy: transaction,
    notifications,
    url: opts.url,
    async close() {
      await listener?.close();
      await pool.end();
    },
    stats: () => ({ total: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount }),
    async withSession(fn, sessionOpts = {}) {
      const { client, quiet } = await connect();
      let broken: unknown;
      // (pg reads a per-query time-out of 0 as "the client's": the longest a timer takes instead.)
      const bound = sessionOpts.unbounded ? { query_timeout: 2 ** 31 - 1 } : {};
      try {
        if (sessionOpts.unbounded) await client.query({ text: 'SET statement_timeout = 0', ...bound });
        return await fn({
          async query<R>(text: string, values?: unknown[]) {
            try {
              return (await client.query({ text, values, ...bound })).rows as R[];
            } catch (e) {
              const f = failure(e);
              if (f !== e) broken = f;
              throw f;
            }
          },
        });
      } finally {
        client.off('error', quiet);
        // A session may leave state behind (locks, a failed transaction): not given back for reuse.
        client.release(broken instanceof Error ? broken : true);
      }
    },
  };
}

/** PostgreSQL's NOTIFY as a statement: sent when the transaction it runs in commits. */
export const NOTIFY = statement('SELECT pg_notify(?, ?)');

/** BEGIN failed: nothing of the transaction ran (transaction() may try another connection). */
class BeginFailed extends Error {
  /** The server did not answer in time (as against a connection that had died while idle). */
  readonly timedOut: boolean;
  constructor(cause: unknown) {
    super('BEGIN failed', { cause });
    const inner = (cause as { cause?: { message?: string; code?: string } })?.cause;
    this.timedOut = !inner?.code && /timeout|timed out/i.test(inner?.message ?? '');
  }
}

/** A transaction's hooks: the same function registered twice runs once (store/transactions.ts, as on SQLite). */
interface Hooks {
  commit: Set<() => void>;
  rollback: Set<() => void>;
}

/** Hooks run in order; one that throws is reported and the others still run (the commit stands). */
function runAll(fns: Iterable<() => void>): void {
  for (const f of fns) {
    try {
      f();
    } catch (e) {
      process.stderr.write(`store: a transaction hook failed: ${(e as Error)?.stack ?? String(e)}\n`);
    }
  }
}
