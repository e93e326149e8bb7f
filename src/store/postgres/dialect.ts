/**
 * The store's SQL is written for SQLite; most of it is standard and runs on PostgreSQL once its
 * parameters are numbered. This turns a statement's text into PostgreSQL's, once per prepare:
 * `?` and `@name`/`:name`/`$name` become `$1…`, camelCase aliases are quoted (PostgreSQL folds
 * unquoted names to lower case), `INDEXED BY` hints go, `INSERT OR IGNORE` becomes
 * `ON CONFLICT DO NOTHING`, and an INSERT into a table with a row number returns it (SQLite's
 * lastInsertRowid). What differs beyond that is written per engine in the module's statement
 * (`statement({ sqlite, postgres })`, ../contract.ts).
 */
import { createHash } from 'node:crypto';
import { storableText } from '../text.ts';

export type Slot = { index: number } | { name: string };

export interface Translated {
  /** The text with `$n` placeholders, untyped. */
  text: string;
  /** The text cut at each placeholder (parts[i] precedes the i-th placeholder; holes[i] is its number). */
  parts: string[];
  holes: number[];
  /** What fills $1, $2…: the n-th positional argument or a named one. */
  slots: Slot[];
  /** The column an INSERT returns as its lastInsertRowid, if any. */
  rowid?: string;
}

/** Tables whose rows have a number SQLite would give as lastInsertRowid, and its column here. */
const ROW_NUMBERS: Record<string, string> = {
  events: 'seq',
  event_handler_runs: 'seq',
  webhook_deliveries: 'seq',
  webhook_attempts: 'id',
  webhook_secrets: 'id',
  invocations: 'rowid',
};

export function translate(sql: string): Translated {
  const slots: Slot[] = [];
  const named = new Map<string, number>();
  let positional = 0;
  let out = '';
  const mark = (n: number) => (out += `\u0000${n}\u0000`);
  for (let i = 0; i < sql.length; ) {
    const c = sql[i];
    if (c === "'" || c === '"') {
      const end = closing(sql, i, c);
      out += sql.slice(i, end);
      i = end;
    } else if (c === '-' && sql[i + 1] === '-') {
      const end = sql.indexOf('\n', i);
      i = end < 0 ? sql.length : end;
    } else if (c === '?') {
      slots.push({ index: positional++ });
      mark(slots.length);
      i++;
    } else if ((c === '@' || c === '$' || (c === ':' && sql[i - 1] !== ':' && sql[i + 1] !== ':')) && /[A-Za-z_]/.test(sql[i + 1] ?? '')) {
      const m = /^[A-Za-z_][A-Za-z0-9_]*/.exec(sql.slice(i + 1))!;
      let n = named.get(m[0]);
      if (n === undefined) {
        slots.push({ name: m[0] });
        named.set(m[0], (n = slots.length));
      }
      mark(n);
      i += 1 + m[0].length;
    } else {
      out += c;
      i++;
    }
  }
  out = out
    .replace(/\bAS\s+([a-z][a-z0-9_]*[A-Z][A-Za-z0-9_]*)\b/g, 'AS "$1"')
    .replace(/\s+INDEXED\s+BY\s+[A-Za-z_][A-Za-z0-9_]*/gi, '')
    // `+col`: SQLite's way to keep a column off an index; PostgreSQL has no unary plus on text.
    .replace(/(\b(?:AND|OR|WHERE|ON)\s+)\+(?=[A-Za-z_])/gi, '$1')
    // SQLite's `a IS NOT (subquery)` compares with NULLs as values.
    .replace(/\bIS\s+NOT\s+(?=\()/g, 'IS DISTINCT FROM ')
    .replace(/^\s*BEGIN\s+(IMMEDIATE|EXCLUSIVE|DEFERRED)\b/i, 'BEGIN');
  if (/^\s*INSERT\s+OR\s+IGNORE\s+/i.test(out)) {
    out = out.replace(/^\s*INSERT\s+OR\s+IGNORE\s+/i, 'INSERT ');
    if (!/\bON\s+CONFLICT\b/i.test(out)) out = appendBeforeReturning(out, ' ON CONFLICT DO NOTHING');
  }
  let rowid: string | undefined;
  const insert = /^\s*INSERT\s+INTO\s+([A-Za-z_][A-Za-z0-9_]*)/i.exec(out);
  if (insert && ROW_NUMBERS[insert[1]] && !/\bRETURNING\b/i.test(out)) {
    rowid = ROW_NUMBERS[insert[1]];
    out = `${out.replace(/;\s*$/, '')} RETURNING ${rowid} AS "__rowid"`;
  }
  const pieces = out.split('\u0000');
  const parts: string[] = [];
  const holes: number[] = [];
  for (let k = 0; k < pieces.length; k++) k % 2 ? holes.push(Number(pieces[k])) : parts.push(pieces[k]);
  return { text: render({ parts, holes }, ''), parts, holes, slots, rowid };
}

/**
 * PostgreSQL types a parameter by its context, and where the context says nothing
 * (`COALESCE($1, col)`, `CASE … THEN $1`) it takes text. Numbers and bytes are therefore cast where
 * they stand: `kinds` has a letter per slot (i integer, f fraction, b bytes, - anything else).
 */
export function render(t: { parts: string[]; holes: number[] }, kinds: string): string {
  let text = t.parts[0];
  for (let k = 0; k < t.holes.length; k++) {
    const n = t.holes[k];
    const cast = CASTS[kinds[n - 1]] ?? '';
    text += `$${n}${cast}${t.parts[k + 1]}`;
  }
  return text;
}

const CASTS: Record<string, string> = { i: '::bigint', f: '::double precision', b: '::bytea', s: '::text' };

export function kindsOf(values: unknown[]): string {
  let k = '';
  for (const v of values)
    k +=
      typeof v === 'number'
        ? Number.isInteger(v)
          ? 'i'
          : 'f'
        : typeof v === 'bigint'
          ? 'i'
          : typeof v === 'string'
            ? 's'
            : v instanceof Uint8Array
              ? 'b'
              : '-';
  return k;
}

function closing(sql: string, start: number, quote: string): number {
  let i = start + 1;
  while (i < sql.length) {
    if (sql[i] === quote) {
      if (sql[i + 1] === quote) i += 2;
      else return i + 1;
    } else i++;
  }
  return sql.length;
}

function appendBeforeReturning(sql: string, clause: string): string {
  const m = /\bRETURNING\b/i.exec(sql);
  return m ? `${sql.slice(0, m.index)}${clause} ${sql.slice(m.index)}` : `${sql.replace(/;\s*$/, '')}${clause}`;
}

/**
 * Binds better-sqlite3's argument forms (positional values, arrays of them, and one object of
 * named values) to the translated statement's slots.
 */
export function bind(slots: Slot[], args: unknown[]): unknown[] {
  if (!slots.length) return [];
  const positional: unknown[] = [];
  let named: Record<string, unknown> | undefined;
  for (const a of args) {
    if (Array.isArray(a)) positional.push(...a);
    else if (a !== null && typeof a === 'object' && !(a instanceof Uint8Array)) named = a as Record<string, unknown>;
    else positional.push(a);
  }
  return slots.map((s) => {
    if ('index' in s) {
      if (s.index >= positional.length) throw new RangeError('Too few parameter values were provided');
      return value(positional[s.index]);
    }
    if (!named || !(s.name in named)) throw new RangeError(`Missing named parameter "${s.name}"`);
    return value(named[s.name]);
  });
}

function value(v: unknown): unknown {
  if (v === undefined) return null;
  // PostgreSQL's text cannot hold NUL (SQLite's can): no write may fail for one, so it becomes
  // U+FFFD (../text.ts). The modules map what outsiders control before this, on both engines alike.
  if (typeof v === 'string') return storableText(v);
  if (typeof v === 'boolean') throw new TypeError('SQLite3 can only bind numbers, strings, bigints, buffers, and null');
  return v;
}

/**
 * A statement ready to send: translated once, then per call its values bound and its text rendered
 * for their kinds (one named, server-side prepared statement per variant, so each connection
 * parses and plans it once). Used by the pool (pool.ts).
 */
export class Compiled {
  private readonly t: Translated;
  private readonly variants = new Map<string, { text: string; name: string }>();
  constructor(source: string) {
    this.t = translate(source);
  }
  /** The query to send for these arguments (better-sqlite3's argument forms). */
  query(args: unknown[]): { text: string; values: unknown[]; name: string } {
    const values = bind(this.t.slots, args);
    const kinds = kindsOf(values);
    let v = this.variants.get(kinds);
    if (!v) {
      const text = render(this.t, kinds);
      this.variants.set(kinds, (v = { text, name: `s${createHash('sha1').update(text).digest('hex').slice(0, 16)}` }));
    }
    return { text: v.text, values, name: v.name };
  }
  /** The row number an INSERT returned (SQLite's lastInsertRowid), 0 where it returns none. */
  lastId(rows: Array<Record<string, unknown>>): number {
    return this.t.rowid && rows.length ? Number(rows.at(-1)!.__rowid) : 0;
  }
  /** A row as SQLite would give it: without the row-number column added for lastId. */
  shape(row: Record<string, unknown>): Record<string, unknown> {
    if (this.t.rowid) delete row.__rowid;
    return row;
  }
}
