/**
 * A PostgreSQL database with the part of better-sqlite3's interface the store's modules use
 * (prepare → run/get/all/pluck, transaction with savepoints when nested, exec, inTransaction), so
 * a module's queries run on either engine without knowing which. `engineOf(db)` tells the few
 * places that must differ (a statement written per engine, SQLite's pragmas and file checkpoints).
 */
import type Database from 'better-sqlite3';
import { Bridge, type BridgeOptions } from './bridge.ts';
import { Compiled } from './dialect.ts';

type Db = Database.Database;

export type Engine = 'sqlite' | 'postgres';

const PG = Symbol('postgres');

export function engineOf(db: Db): Engine {
  return (db as unknown as { [PG]?: true })[PG] ? 'postgres' : 'sqlite';
}

/** The bridge under a PostgreSQL store's Db (notifications, the connection's state). */
export function bridgeOf(db: Db): Bridge | undefined {
  return (db as unknown as { bridge?: Bridge }).bridge;
}

/** The connection string a PostgreSQL store was opened with (it holds the password: never shown). */
export function connectionStringOf(db: Db): string | undefined {
  return bridgeOf(db)?.url;
}

/** A statement written per engine: SQLite's text, and PostgreSQL's where it differs. */
export function sqlFor(db: Db, sql: { sqlite: string; postgres: string }): string {
  return engineOf(db) === 'postgres' ? sql.postgres : sql.sqlite;
}

class PgStatement {
  private plucked = false;
  private readonly compiled: Compiled;
  private readonly db: PgDb;
  readonly source: string;
  constructor(db: PgDb, source: string) {
    this.db = db;
    this.source = source;
    this.compiled = new Compiled(source);
  }
  pluck(on = true): this {
    this.plucked = on;
    return this;
  }
  private exec(args: unknown[]) {
    const q = this.compiled.query(args);
    return this.db.run(q.text, q.values, q.name);
  }
  run(...args: unknown[]): Database.RunResult {
    const r = this.exec(args);
    return { changes: r.rowCount, lastInsertRowid: this.compiled.lastId(r.rows) };
  }
  get(...args: unknown[]): unknown {
    const row = this.exec(args).rows[0];
    return row === undefined ? undefined : this.shape(row);
  }
  all(...args: unknown[]): unknown[] {
    return this.exec(args).rows.map((r) => this.shape(r));
  }
  private shape(row: Record<string, unknown>): unknown {
    this.compiled.shape(row);
    for (const k in row) {
      const v = row[k];
      // Structured clone made bytea's Buffers into Uint8Arrays on the way from the thread.
      if (v instanceof Uint8Array && !Buffer.isBuffer(v)) row[k] = Buffer.from(v.buffer, v.byteOffset, v.byteLength);
    }
    return this.plucked ? Object.values(row)[0] : row;
  }
}

class PgDb {
  readonly [PG] = true;
  readonly bridge: Bridge;
  readonly readonly: boolean;
  readonly name: string;
  open = true;
  private depth = 0;
  private txSession: number | undefined;
  private statements = new Map<string, PgStatement>();

  constructor(opts: BridgeOptions & { name: string }) {
    this.bridge = new Bridge(opts);
    this.readonly = opts.readonly ?? false;
    this.name = opts.name;
  }

  get inTransaction(): boolean {
    return this.depth > 0;
  }

  run(text: string, params: unknown[], name?: string) {
    return this.bridge.query(text, params, name, this.txSession);
  }

  prepare(sql: string): PgStatement {
    let s = this.statements.get(sql);
    if (!s) this.statements.set(sql, (s = new PgStatement(this, sql)));
    return s;
  }

  exec(sql: string): this {
    if (/^\s*BEGIN\b/i.test(sql)) this.begin();
    else if (/^\s*COMMIT\b/i.test(sql)) this.end('COMMIT');
    else if (/^\s*ROLLBACK\b/i.test(sql)) this.end('ROLLBACK');
    else this.bridge.exec(sql, this.txSession);
    return this;
  }

  private begin(): void {
    if (this.depth === 0) {
      this.bridge.exec('BEGIN');
      this.txSession = this.bridge.session;
    } else this.bridge.exec(`SAVEPOINT s${this.depth}`, this.txSession);
    this.depth++;
  }

  private end(how: 'COMMIT' | 'ROLLBACK'): void {
    if (this.depth === 0) return;
    this.depth--;
    try {
      if (this.depth === 0) this.bridge.exec(how, this.txSession);
      else this.bridge.exec(how === 'COMMIT' ? `RELEASE SAVEPOINT s${this.depth}` : `ROLLBACK TO SAVEPOINT s${this.depth}`, this.txSession);
    } finally {
      if (this.depth === 0) this.txSession = undefined;
    }
  }

  /** As better-sqlite3's: a function that runs `fn` in a transaction, or a savepoint when nested. */
  transaction<F extends (...args: never[]) => unknown>(fn: F) {
    const wrapped = (...args: Parameters<F>): ReturnType<F> => {
      this.begin();
      let value: ReturnType<F>;
      try {
        value = fn(...args) as ReturnType<F>;
      } catch (e) {
        try {
          this.end('ROLLBACK');
        } catch {
          /* the connection is gone: the server rolled back */
        }
        throw e;
      }
      this.end('COMMIT');
      return value;
    };
    return Object.assign(wrapped, { default: wrapped, deferred: wrapped, immediate: wrapped, exclusive: wrapped });
  }

  pragma(source: string): never {
    throw new Error(`PRAGMA ${source}: a SQLite setting, asked of a PostgreSQL store`);
  }

  close(): this {
    if (!this.open) return this;
    this.open = false;
    this.bridge.close();
    return this;
  }
}

/** A PostgreSQL database behind better-sqlite3's type, for the modules. */
export function openPostgresDb(opts: BridgeOptions & { name: string }): Db {
  return new PgDb(opts) as unknown as Db;
}
