/**
 * A SQLite store copied into an empty PostgreSQL one (`switchyard store copy`): every module table,
 * its rows as they are (ids, seq and rowid values kept: cursors and references depend on them),
 * in one PostgreSQL transaction read from one SQLite read transaction, so the copy is one snapshot
 * of the source and a failure leaves the target as empty as it was.
 *
 * - Tables: those of the SQLite file, less the store's bookkeeping (schema_migrations,
 *   store_probe, store_locks, store_generations), parents before the tables that refer to them (foreign keys).
 * - Columns: SQLite's (PRAGMA table_info), each of which PostgreSQL must have; SQLite's implicit
 *   rowid goes into a PostgreSQL column named `rowid` where the table has one (invocations).
 * - Rows: one INSERT per batch of rows (`batchRows`, or fewer once their text passes `batchBytes`),
 *   the batch handed over as one JSON parameter that json_populate_recordset turns into the table's
 *   rows, each value read by its PostgreSQL column's type. Measured against multi-row VALUES with
 *   a parameter per value (docs/benchmarks.md, "store copy"): as fast or faster through pg, and no
 *   limit of 65,535 parameters to mind. Integers are read as BigInt
 *   (safeIntegers), so no 64-bit value is rounded on the way; bytes go as bytea's hex text. Text
 *   with a NUL (which older versions stored on SQLite, and PostgreSQL's text cannot hold) is copied
 *   with U+FFFD in its place, as the server now stores it on both engines (text.ts), and counted.
 * - Afterwards each serial column's sequence is set past the copied maximum, and each table's count
 *   is compared with the source's: inside the transaction (a difference rolls back) and after it.
 */
import type Database from 'better-sqlite3';
import { SwitchyardError } from '../errors.ts';
import type { ModuleMigrations, Store } from './index.ts';
import type { PostgresDatabase, Session } from './postgres/pool.ts';
import { storableText } from './text.ts';

type Db = Database.Database;

/** The store's own tables: made by whoever opens a store, never copied. */
export const BOOKKEEPING_TABLES = ['schema_migrations', 'store_probe', 'store_locks', 'store_generations'];

export interface CopiedTable {
  name: string;
  /** Rows in the SQLite snapshot. */
  source: number;
  /** Rows in PostgreSQL after the commit. */
  copied: number;
  /** Text values copied with U+FFFD for each NUL they held. */
  mapped: number;
}

export interface CopyReport {
  tables: CopiedTable[];
  ms: number;
}

export interface CopyOptions {
  /** Every module's migrations: the source must be at the schema this program writes. */
  migrations: ModuleMigrations[];
  /** The target as messages name it (no password). */
  targetName: string;
  /** Rows per INSERT (200). */
  batchRows?: number;
  /** Characters of text per INSERT, roughly: a batch is sent early once its strings pass this (4 MB). */
  batchBytes?: number;
  /** Called before a table's first row (done 0) and after each INSERT. */
  progress?: (table: string, done: number, total: number) => void;
}

interface Plan {
  table: string;
  /** SQLite's SELECT for the rows, columns in `columns` order. */
  select: string;
  /** PostgreSQL's column names and types, in the SELECT's order. */
  columns: string[];
  types: string[];
}

const quote = (name: string) => `"${name.replaceAll('"', '""')}"`;

/** The CLI's entry: a SQLite store into a PostgreSQL one (their connections stay the store's business). */
export function copyStore(source: Store, target: Store, opts: CopyOptions): Promise<CopyReport> {
  if (!source.sqlite || !target.postgres) throw new Error('copyStore copies a SQLite store into a PostgreSQL one');
  return copySqliteToPostgres(source.sqlite, target.postgres, opts);
}

/** Copy `source` (SQLite, opened read-only) into `target` (PostgreSQL, migrated, empty). */
export async function copySqliteToPostgres(source: Db, target: PostgresDatabase, opts: CopyOptions): Promise<CopyReport> {
  const started = performance.now();
  const batchRows = opts.batchRows ?? 200;
  const batchBytes = opts.batchBytes ?? 4 * 1024 * 1024;
  const name = opts.targetName;

  const counts = new Map<string, number>();
  const mapped = new Map<string, number>();
  // One read transaction on the source for the whole copy (one snapshot), one transaction on the
  // target's session: the copy commits whole or not at all.
  source.exec('BEGIN');
  let plans: Plan[];
  try {
    plans = await target.withSession(async (session) => {
      checkSourceSchema(source, opts.migrations);
      const plans = plan(source, await targetColumns(session));
      // Counted in the same snapshot the rows are read from.
      for (const p of plans)
        counts.set(
          p.table,
          Number(
            source
              .prepare(`SELECT count(*) FROM ${quote(p.table)}`)
              .pluck()
              .get(),
          ),
        );
      const count = async (table: string) => Number((await session.query<{ n: number }>(`SELECT count(*) AS n FROM ${quote(table)}`))[0]!.n);

      await session.query('BEGIN');
      try {
        const tables = plans.map((p) => quote(p.table)).join(', ');
        // Nobody writes to these tables until the copy commits: the emptiness seen here holds.
        if (plans.length) await session.query(`LOCK TABLE ${tables} IN EXCLUSIVE MODE`);
        await refuseUnlessEmpty(
          session,
          plans.map((p) => p.table),
          name,
        );

        for (const p of plans) {
          const total = counts.get(p.table)!;
          opts.progress?.(p.table, 0, total);
          const columns = p.columns.map(quote).join(', ');
          const insert = `INSERT INTO ${quote(p.table)} (${columns}) SELECT ${columns} FROM json_populate_recordset(NULL::${quote(p.table)}, $1::text::json)`;
          let batch: Record<string, unknown>[] = [];
          let bytes = 0;
          let done = 0;
          const flush = async () => {
            if (!batch.length) return;
            try {
              await session.query(insert, [JSON.stringify(batch)]);
            } catch (e) {
              throw new SwitchyardError(
                'storage_failed',
                `copying ${p.table} into ${name} failed after ${done} rows: ${(e as Error).message}; nothing was copied (the transaction rolled back)`,
                {
                  where: p.table,
                  cause: e,
                },
              );
            }
            done += batch.length;
            opts.progress?.(p.table, done, total);
            batch = [];
            bytes = 0;
          };
          let changed = 0;
          for (const row of source.prepare(p.select).raw(true).safeIntegers(true).iterate() as Iterable<unknown[]>) {
            const record: Record<string, unknown> = {};
            for (let c = 0; c < row.length; c++) {
              const v = convert(row[c], p, c, row);
              if (typeof row[c] === 'string' && v !== row[c]) changed++;
              if (typeof v === 'string') bytes += v.length;
              record[p.columns[c]] = v;
            }
            batch.push(record);
            if (batch.length === batchRows || bytes >= batchBytes) await flush();
          }
          await flush();
          mapped.set(p.table, changed);
          const inTarget = await count(p.table);
          if (done !== total || inTarget !== total)
            throw new SwitchyardError(
              'storage_failed',
              `${p.table}: ${total} rows in the SQLite database, ${done} read and ${inTarget} in ${name}; nothing was copied (the transaction rolled back)`,
              {
                where: p.table,
                hint: 'run the copy again; if the counts differ again, report it as a bug',
              },
            );
        }
        await setSequences(
          session,
          plans.map((p) => p.table),
        );
        await session.query('COMMIT');
      } catch (e) {
        await session.query('ROLLBACK').catch(() => {});
        throw e;
      }
      return plans;
    });
  } finally {
    if (source.inTransaction) source.exec('COMMIT');
  }

  // The commit's result, counted anew.
  const tables: CopiedTable[] = [];
  for (const p of plans)
    tables.push({
      name: p.table,
      source: counts.get(p.table)!,
      copied: Number((await target.withSession((s) => s.query<{ n: number }>(`SELECT count(*) AS n FROM ${quote(p.table)}`)))[0]!.n),
      mapped: mapped.get(p.table) ?? 0,
    });
  const differ = tables.filter((t) => t.source !== t.copied);
  if (differ.length)
    throw new SwitchyardError(
      'storage_failed',
      `after the copy, ${name} holds other counts than the SQLite database: ${differ.map((t) => `${t.name} ${t.copied} of ${t.source}`).join(', ')}`,
      {
        hint: 'something else wrote to the database during the copy: empty it (or use a new database) and copy again',
      },
    );
  return { tables, ms: Math.round(performance.now() - started) };
}

/** The SQLite file must be a Switchyard database at the schema this program writes (so its columns are PostgreSQL's). */
function checkSourceSchema(source: Db, migrations: ModuleMigrations[]): void {
  const known = source.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'").get();
  if (!known) throw new SwitchyardError('bad_request', `${source.name} is not a Switchyard database (no schema_migrations table)`, { where: source.name });
  const versions = new Map(
    (source.prepare('SELECT module, version FROM schema_migrations').all() as Array<{ module: string; version: number }>).map((r) => [
      r.module,
      Number(r.version),
    ]),
  );
  for (const m of migrations) {
    const v = versions.get(m.module) ?? 0;
    if (v > m.steps.length)
      throw new SwitchyardError('schema_too_new', `the SQLite database's ${m.module} schema (v${v}) is newer than this program knows (v${m.steps.length})`, {
        hint: 'copy it with the switchyard version that wrote it',
      });
    if (v < m.steps.length)
      throw new SwitchyardError('bad_request', `the SQLite database's ${m.module} schema is v${v}, this program's is v${m.steps.length}`, {
        hint: 'start the server on it once with this version (that brings its schema up to date), stop it, then copy',
      });
  }
}

/** PostgreSQL's tables, each with its columns and their types. */
async function targetColumns(session: Session): Promise<Map<string, Map<string, string>>> {
  const pgColumns = new Map<string, Map<string, string>>();
  for (const r of await session.query<{ table_name: string; column_name: string; data_type: string }>(
    'SELECT table_name, column_name, data_type FROM information_schema.columns WHERE table_schema = current_schema() ORDER BY table_name, ordinal_position',
  )) {
    let m = pgColumns.get(r.table_name);
    if (!m) pgColumns.set(r.table_name, (m = new Map()));
    m.set(r.column_name, r.data_type);
  }
  return pgColumns;
}

/** The tables to copy, parents first, each with its SELECT and its PostgreSQL columns. */
function plan(source: Db, pgColumns: Map<string, Map<string, string>>): Plan[] {
  const names = (
    source.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY rowid").pluck().all() as string[]
  ).filter((n) => !BOOKKEEPING_TABLES.includes(n));
  const drift = (what: string) =>
    new SwitchyardError('internal', `${what}: the SQLite and PostgreSQL schemas differ, which is a bug in Switchyard's schemas`, {
      hint: 'report it; nothing was copied',
    });
  return parentsFirst(source, names).map((table) => {
    const pg = pgColumns.get(table);
    if (!pg) throw drift(`the SQLite table ${table} has no PostgreSQL counterpart`);
    const sqliteColumns = (source.prepare(`PRAGMA table_info(${quote(table)})`).all() as Array<{ name: string }>).map((c) => c.name);
    const columns: string[] = [];
    const select: string[] = [];
    // SQLite's implicit row number, where PostgreSQL keeps it as a column (invocations).
    if (pg.has('rowid') && !sqliteColumns.includes('rowid')) {
      columns.push('rowid');
      select.push('rowid');
    }
    for (const c of sqliteColumns) {
      if (!pg.has(c)) throw drift(`the column ${table}.${c} has no PostgreSQL counterpart`);
      columns.push(c);
      select.push(quote(c));
    }
    return {
      table,
      select: `SELECT ${select.join(', ')} FROM ${quote(table)} ORDER BY rowid`,
      columns,
      types: columns.map((c) => pg.get(c)!),
    };
  });
}

/** `names` with every table after the tables its foreign keys refer to (otherwise in the given order). */
function parentsFirst(source: Db, names: string[]): string[] {
  const parents = new Map(
    names.map((n) => [
      n,
      new Set(
        (source.prepare(`PRAGMA foreign_key_list(${quote(n)})`).all() as Array<{ table: string }>)
          .map((f) => f.table)
          .filter((t) => t !== n && names.includes(t)),
      ),
    ]),
  );
  const out: string[] = [];
  while (out.length < names.length) {
    const next = names.find((n) => !out.includes(n) && [...parents.get(n)!].every((p) => out.includes(p)));
    // A cycle (none today) is copied in the given order; its foreign keys would say so.
    out.push(next ?? names.find((n) => !out.includes(n))!);
  }
  return out;
}

async function refuseUnlessEmpty(session: Session, tables: string[], name: string): Promise<void> {
  const filled: string[] = [];
  for (const t of tables) {
    if (!(await session.query<{ filled: boolean }>(`SELECT EXISTS (SELECT 1 FROM ${quote(t)}) AS filled`))[0]!.filled) continue;
    const n = Number((await session.query<{ n: number }>(`SELECT count(*) AS n FROM ${quote(t)}`))[0]!.n);
    filled.push(`${t} (${n} row${n === 1 ? '' : 's'})`);
  }
  if (filled.length)
    throw new SwitchyardError('conflict', `${name} already holds Switchyard data: ${filled.join(', ')}`, {
      hint: 'copy into an empty database (CREATE DATABASE switchyard_new), never over one a server uses',
    });
}

const INTEGER_TYPES = new Set(['bigint', 'integer', 'smallint']);

/**
 * A SQLite value as JSON for PostgreSQL's column: integers as numbers (as text beyond 2^53, which
 * the column reads exactly), bytes as bytea's hex text, text with U+FFFD for each NUL (text.ts).
 * What else the column cannot hold exactly is refused, naming the row.
 */
function convert(v: unknown, p: Plan, c: number, row: unknown[]): unknown {
  const refuse = (why: string) => {
    const key = p.columns.includes('id') ? `id ${String(row[p.columns.indexOf('id')])}` : `${p.columns[0]} ${String(row[0])}`;
    return new SwitchyardError('bad_request', `${p.table} (${key}), column ${p.columns[c]}: ${why}; nothing was copied`, {
      where: `${p.table}.${p.columns[c]}`,
      hint: 'correct or delete that row in the SQLite database (with the server stopped), then copy again',
    });
  };
  if (typeof v === 'string') return storableText(v);
  if (typeof v === 'bigint') return v >= Number.MIN_SAFE_INTEGER && v <= Number.MAX_SAFE_INTEGER ? Number(v) : String(v);
  if (typeof v === 'number') {
    if (!Number.isFinite(v)) throw refuse(`${v} is not a number JSON can carry`);
    if (INTEGER_TYPES.has(p.types[c]) && !Number.isInteger(v)) throw refuse(`${v} is not a whole number, and the PostgreSQL column is ${p.types[c]}`);
    return v;
  }
  if (Buffer.isBuffer(v)) {
    if (p.types[c] !== 'bytea') throw refuse(`bytes, and the PostgreSQL column is ${p.types[c]}`);
    return `\\x${v.toString('hex')}`;
  }
  return v;
}

/** Each serial column's sequence continues after the largest copied value. */
async function setSequences(session: Session, tables: string[]): Promise<void> {
  const serials = await session.query<{ table_name: string; column_name: string }>(
    `SELECT table_name, column_name FROM information_schema.columns
     WHERE table_schema = current_schema() AND column_default LIKE 'nextval(%' ORDER BY table_name, column_name`,
  );
  for (const s of serials) {
    if (!tables.includes(s.table_name)) continue;
    await session.query(
      `SELECT setval(pg_get_serial_sequence($1, $2), (SELECT COALESCE(MAX(${quote(s.column_name)}), 0) + 1 FROM ${quote(s.table_name)}), false) AS v`,
      [quote(s.table_name), s.column_name],
    );
  }
}
