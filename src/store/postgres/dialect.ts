/**
 * The store's SQL is written for SQLite; most of it is standard and runs on PostgreSQL once its
 * parameters are numbered. This turns a statement's text into PostgreSQL's, once per prepare:
 * `?` and `@name`/`:name`/`$name` become `$1…`, camelCase aliases are quoted (PostgreSQL folds
 * unquoted names to lower case), `INDEXED BY` hints go, `INSERT OR IGNORE` becomes
 * `ON CONFLICT DO NOTHING`, and an INSERT into a table with a row number returns it (SQLite's
 * lastInsertRowid). What differs beyond that is written per engine in the module (see `sqlFor`).
 */

export type Slot = { index: number } | { name: string };

export interface Translated {
  text: string;
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
      out += `$${slots.length}`;
      i++;
    } else if ((c === '@' || c === '$' || (c === ':' && sql[i - 1] !== ':' && sql[i + 1] !== ':')) && /[A-Za-z_]/.test(sql[i + 1] ?? '')) {
      const m = /^[A-Za-z_][A-Za-z0-9_]*/.exec(sql.slice(i + 1))!;
      let n = named.get(m[0]);
      if (n === undefined) {
        slots.push({ name: m[0] });
        named.set(m[0], (n = slots.length));
      }
      out += `$${n}`;
      i += 1 + m[0].length;
    } else {
      out += c;
      i++;
    }
  }
  out = out
    .replace(/\bAS\s+([a-z][a-z0-9_]*[A-Z][A-Za-z0-9_]*)\b/g, 'AS "$1"')
    .replace(/\s+INDEXED\s+BY\s+[A-Za-z_][A-Za-z0-9_]*/gi, '')
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
  return { text: out, slots, rowid };
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
  if (typeof v === 'boolean') throw new TypeError('SQLite3 can only bind numbers, strings, bigints, buffers, and null');
  return v;
}
