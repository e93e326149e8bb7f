/**
 * The store's contract: what a module may ask of the database, asynchronously, on either engine.
 *
 * A module declares its statements once, as `statement(...)` values beside its code: the SQL is
 * written in SQLite's dialect and translated for PostgreSQL (postgres/dialect.ts), or written per
 * engine where the two really differ (`{ sqlite, postgres }`), so the one place a query differs is
 * the query itself, never an `if (engine)` in feature code. It then runs them through a `Queries`:
 * the database itself (each statement commits by itself) or a transaction (`Tx`), which is what a
 * function takes when it must join its caller's transaction.
 *
 * Why asynchronous: on PostgreSQL a statement is a round trip, and the serving process must go on
 * serving (HTTP, isolates, heartbeats) while it waits. SQLite keeps its synchronous driver inside:
 * its statements answer at once, and a transaction never waits on anything but the store.
 */
import { LOCK_BUSY } from './patience.ts';

export { LOCK_BUSY };

/** The two engines a store may be on. */
export type Engine = 'sqlite' | 'postgres';

/** Positional (`?`) or named (`@name`) parameters. */
export type Params = readonly unknown[] | Readonly<Record<string, unknown>>;

/** What a statement that writes reports. */
export interface RunResult {
  /** Rows inserted, updated or deleted. */
  changes: number;
  /** The row number an INSERT gave its (last) row: SQLite's rowid; on PostgreSQL the store's row-numbered tables' (postgres/dialect.ts), else 0. */
  lastId: number;
}

/** A statement a module declares once; `R` is the shape of its rows. */
export interface Statement<R = unknown> {
  readonly sql: string | { readonly sqlite: string; readonly postgres: string };
  /** Never set: it only carries the row type. */
  readonly row?: R;
}

/** Declare a statement: one text for both engines, or one per engine. */
export function statement<R = unknown>(sql: string | { sqlite: string; postgres: string }): Statement<R> {
  return Object.freeze({ sql: typeof sql === 'string' ? sql : Object.freeze({ ...sql }) });
}

/** Running statements, on the database (each commits by itself) or inside a transaction. */
export interface Queries {
  readonly engine: Engine;
  all<R>(s: Statement<R>, params?: Params): Promise<R[]>;
  get<R>(s: Statement<R>, params?: Params): Promise<R | undefined>;
  /** The first column of the first row (undefined when there is no row). */
  value<V = unknown>(s: Statement, params?: Params): Promise<V | undefined>;
  run(s: Statement, params?: Params): Promise<RunResult>;
}

/** A transaction: statements, hooks on its outcome, and nested transactions (savepoints). */
export interface Tx extends Queries {
  /** Runs `fn` once the outermost transaction has committed. */
  afterCommit(fn: () => void): void;
  /** Runs `fn` if this transaction (or the savepoint it is in) rolls back. */
  onRollback(fn: () => void): void;
  /** A savepoint: `fn`'s writes are undone alone if it throws. */
  transaction<T>(fn: (tx: Tx) => Promise<T>): Promise<T>;
}

export interface Database extends Queries {
  /**
   * Runs `fn` in one transaction: committed when it resolves, rolled back when it throws. On SQLite
   * the write lock is taken first (BEGIN IMMEDIATE), waiting without blocking the event loop; `fn`
   * must await only the store while it runs (its statements answer at once), so no other work
   * interleaves with it on the one connection. On PostgreSQL the transaction has a connection of its own.
   */
  transaction<T>(fn: (tx: Tx) => Promise<T>): Promise<T>;
  /**
   * As transaction, but answers LOCK_BUSY (nothing done, `fn` never called) when SQLite's write lock is
   * held by another process right now: a group commit waits a turn instead (store/patience.ts).
   * On SQLite the ones asked for in the same turn of the event loop share one transaction, each in
   * a savepoint (one lock, one commit: store/database.ts); `fn` runs in a later turn than the call.
   * PostgreSQL has no such lock: there it is transaction.
   */
  transactionUnlessBusy<T>(fn: (tx: Tx) => Promise<T>): Promise<T | typeof LOCK_BUSY>;
  /**
   * Messages between the nodes that share the database (PostgreSQL's LISTEN/NOTIFY). Absent on
   * SQLite: one machine's processes tell each other directly (src/process/).
   */
  readonly notifications?: Notifications;
}

export interface Notifications {
  /**
   * `fn` runs, between turns, for every notification on `channel` by any node (this one's too),
   * and with `undefined` when some may have been missed (the listening connection was replaced):
   * then look again. Returns the function that stops listening.
   */
  listen(channel: string, fn: (payload: string | undefined) => void): () => void;
  /** Resolves once notifications on `channel` are heard (listened to, and that in effect on the server). */
  ready(channel: string): Promise<void>;
  /** Tell every listener of `channel`, once the transaction it is sent in commits (now outside one). */
  notify(on: Queries, channel: string, payload?: string): Promise<void>;
}
