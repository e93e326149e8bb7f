/**
 * A turn's rows in as few statements as each engine does best.
 *
 * SQLite: multi-row VALUES with bound parameters, in chunks of 128, 64, ... 1 rows (a batch of up
 * to 255 rows in at most eight statements, eight statement shapes prepared once each). Its JSON
 * functions cost more per row than binding does: each `value ->> 'field'` reads the row's JSON
 * again. Measured on the real schema (better-sqlite3, WAL, batches of 5): a delivery's INSERT 9.6
 * us a row against 21.3 read from one JSON array, its attempt's 7.8 against 16.6, its final state's
 * UPDATE 6.7 against 11.9, its event's INSERT 6.4 against 10.1; on the invocations table 5.3-5.7
 * against 7.9 (160-row batches).
 * PostgreSQL: the caller's one statement over one JSON array parameter: one round trip whatever
 * the count. Text is stored alike on both (store/text.ts).
 */
import { statement, type Params, type Queries, type Statement } from './contract.ts';
import { jsonRows } from './leased-queue.ts';
import { needsMapping, storableText } from './text.ts';

/** The largest chunk, and so at most log2(LARGEST) + 1 statements for a batch under 2 x LARGEST rows. */
const LARGEST = 128;

export interface BatchStatement<T, R> {
  /** Run over `rows` in the caller's transaction; the rows it returns, chunk after chunk, in the batch's order. */
  all(q: Queries, rows: readonly T[]): Promise<R[]>;
  /** The same, for a statement that returns no rows. */
  run(q: Queries, rows: readonly T[]): Promise<void>;
}

/**
 * A statement over a batch of rows. `sqlite` writes the SQLite statement around `values`, a
 * multi-row `VALUES (?, ...), ...` list of `columns.length` columns a row (as a table of named
 * columns: `rowsTable(columns, values)`); `values` gives one row's parameters in the columns'
 * order. `postgres` is the PostgreSQL statement, run once with the parameters `postgresParams`
 * makes of the batch. SQLite runs the chunks in order, so rows go in in the batch's order.
 */
export function batchStatement<T, R = unknown>(spec: {
  columns: readonly string[];
  sqlite: (values: string) => string;
  values: (row: T) => unknown[];
  postgres: Statement<R>;
  postgresParams: (rows: readonly T[]) => Params;
}): BatchStatement<T, R> {
  const tuple = `(${spec.columns.map(() => '?').join(', ')})`;
  const shapes = new Map<number, Statement<R>>();
  const shape = (n: number): Statement<R> => {
    let s = shapes.get(n);
    if (!s) {
      // Run on SQLite alone (PostgreSQL takes the caller's statement).
      s = statement<R>(spec.sqlite(`VALUES ${Array(n).fill(tuple).join(', ')}`));
      shapes.set(n, s);
    }
    return s;
  };
  /** SQLite: each chunk's statement and parameters, in order. */
  function* chunks(rows: readonly T[]): Generator<[Statement<R>, unknown[]]> {
    for (let at = 0, n = LARGEST; at < rows.length; ) {
      while (n > rows.length - at) n >>= 1;
      const params: unknown[] = [];
      for (let i = at; i < at + n; i++) for (const v of spec.values(rows[i])) params.push(typeof v === 'string' && needsMapping(v) ? storableText(v) : v);
      yield [shape(n), params];
      at += n;
    }
  }
  return {
    async all(q, rows) {
      if (!rows.length) return [];
      if (q.engine === 'postgres') return q.all(spec.postgres, spec.postgresParams(rows));
      const out: R[] = [];
      for (const [s, params] of chunks(rows)) for (const r of await q.all(s, params)) out.push(r);
      return out;
    },
    async run(q, rows) {
      if (!rows.length) return;
      if (q.engine === 'postgres') await q.run(spec.postgres, spec.postgresParams(rows));
      else for (const [s, params] of chunks(rows)) await q.run(s, params);
    },
  };
}

/** SQLite: a VALUES list as a table whose columns have these names (in a FROM clause). */
export function rowsTable(columns: readonly string[], values: string): string {
  return `(SELECT ${columns.map((c, i) => `column${i + 1} AS ${c}`).join(', ')} FROM (${values}))`;
}

export interface RowsInsert {
  /** Insert `rows` (each an array in the columns' order) in the caller's transaction. */
  run(q: Queries, rows: readonly (readonly unknown[])[]): Promise<void>;
}

/**
 * Plain rows into one table: on SQLite multi-row VALUES; on PostgreSQL the caller's statement over
 * one JSON array of the rows (each an array in the columns' order, see jsonRows).
 */
export function rowsInsert(table: string, columns: readonly string[], postgres: Statement): RowsInsert {
  const batch = batchStatement<readonly unknown[]>({
    columns,
    sqlite: (values) => `INSERT INTO ${table} (${columns.join(', ')}) ${values}`,
    values: (row) => [...row],
    postgres,
    postgresParams: (rows) => [jsonRows(rows)],
  });
  return { run: (q, rows) => batch.run(q, rows) };
}

export interface ParentsAndChildren<P, C, CR> {
  /**
   * Store `parents`, and of `children` those whose parent (`parentOf`) this call stored, in the
   * caller's transaction: the ids of the parents it stored, and the rows the children's statement
   * returned for those it stored (in the children's order).
   */
  all(q: Queries, parents: readonly P[], children: readonly C[]): Promise<{ stored: Set<string>; children: CR[] }>;
}

/**
 * Parent rows and their children, where a child is stored only under a parent stored now (a
 * parent already there keeps what it has). SQLite: the two batch statements, the children filtered
 * by the ids the parents' returned. PostgreSQL: `postgres`, one statement (the parents' INSERT in
 * a WITH the children's reads its RETURNING from), one round trip and one statement fewer: each
 * row it returns is either a stored parent's id (`parent_id` set) or a stored child's row.
 */
export function parentsAndChildren<P, C, CR>(spec: {
  parents: BatchStatement<P, { id: string }>;
  children: BatchStatement<C, CR>;
  parentOf: (child: C) => string;
  postgres: Statement<CR & { parent_id: string | null }>;
  postgresParams: (parents: readonly P[], children: readonly C[]) => Params;
}): ParentsAndChildren<P, C, CR> {
  return {
    async all(q, parents, children) {
      if (!parents.length) return { stored: new Set(), children: [] };
      if (q.engine === 'postgres' && children.length) {
        const stored = new Set<string>();
        const rows: CR[] = [];
        for (const r of await q.all(spec.postgres, spec.postgresParams(parents, children))) {
          if (r.parent_id !== null) stored.add(r.parent_id);
          else rows.push(r);
        }
        return { stored, children: rows };
      }
      const stored = new Set((await spec.parents.all(q, parents)).map((r) => r.id));
      const under = children.filter((c) => stored.has(spec.parentOf(c)));
      return { stored, children: under.length ? await spec.children.all(q, under) : [] };
    },
  };
}
