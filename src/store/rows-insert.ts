/**
 * Plain rows into one table, a turn's worth in as few statements as each engine does best.
 *
 * SQLite: multi-row VALUES with bound parameters, in chunks of 128, 64, ... 1 rows (a batch of up
 * to 255 rows in at most eight statements, eight statement shapes prepared once each). Its JSON
 * functions cost more per row than binding does: on the invocations table, one JSON array
 * parameter read with `json_each` cost 7.9 us a row against 5.3-5.7 (measured, 160-row batches).
 * PostgreSQL: the caller's one statement over one JSON array parameter (rows as arrays in the
 * columns' order, see jsonRows): one round trip whatever the count. Text is stored alike on both
 * (store/text.ts).
 */
import { statement, type Queries, type Statement } from './contract.ts';
import { jsonRows } from './leased-queue.ts';
import { needsMapping, storableText } from './text.ts';

/** The largest chunk, and so at most log2(LARGEST) + 1 statements for a batch under 2 x LARGEST rows. */
const LARGEST = 128;

export interface RowsInsert {
  /** Insert `rows` (each an array in the columns' order) in the caller's transaction. */
  run(q: Queries, rows: readonly (readonly unknown[])[]): Promise<void>;
}

export function rowsInsert(table: string, columns: readonly string[], postgres: Statement): RowsInsert {
  const tuple = `(${columns.map(() => '?').join(', ')})`;
  const shapes = new Map<number, Statement>();
  const shape = (n: number): Statement => {
    let s = shapes.get(n);
    if (!s) {
      // Run on SQLite alone (PostgreSQL takes the caller's statement).
      s = statement(`INSERT INTO ${table} (${columns.join(', ')}) VALUES ${Array(n).fill(tuple).join(', ')}`);
      shapes.set(n, s);
    }
    return s;
  };
  return {
    async run(q, rows) {
      if (!rows.length) return;
      if (q.engine === 'postgres') {
        await q.run(postgres, [jsonRows(rows)]);
        return;
      }
      // In order: the rows' rowids follow the batch's order, as the one statement's did.
      for (let at = 0, n = LARGEST; at < rows.length; ) {
        while (n > rows.length - at) n >>= 1;
        await q.run(shape(n), storable(rows.slice(at, at + n).flat()));
        at += n;
      }
    },
  };
}

/** Each string as the store keeps text on either engine (store/text.ts: a NUL or a lone surrogate becomes U+FFFD). */
function storable(values: unknown[]): unknown[] {
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (typeof v === 'string' && needsMapping(v)) values[i] = storableText(v);
  }
  return values;
}
