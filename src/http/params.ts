/**
 * Query parameters and request bodies of the management API as schemas (src/schema), for route(): each parameter reads the text
 * of one parameter, says what is wrong in the words the API has always used, and documents itself.
 */
import { INVALID, object, optional, typeName, type ObjectOptions, type Schema } from '../schema/index.ts';
import { quoted, readTime, TIME_FORMS } from '../schema/time.ts';

/**
 * A parameter read from its text by `parse`: the value, or `{ error }` (said after the parameter's
 * name: `limit must be …`). `jsonSchema` is what /openapi.json shows.
 */
export function param<T>(
  kind: string,
  jsonSchema: Record<string, unknown>,
  parse: (text: string) => T | { error: string; hint?: string },
): Schema<T> & { isOptional: true } {
  return optional({
    kind,
    jsonSchema,
    check(v, path, issues) {
      const r = parse(typeof v === 'string' ? v : String(v));
      if (r && typeof r === 'object' && 'error' in r) {
        issues.push({ path, message: r.error, ...(r.hint ? { hint: r.hint } : {}) });
        return INVALID;
      }
      return r as T;
    },
  });
}

/** One of `values` (a filter such as `status`). */
export function enumParam<const T extends readonly string[]>(values: T, description?: string) {
  return param<T[number]>('enum-param', { enum: [...values], ...(description ? { description } : {}) }, (v) =>
    (values as readonly string[]).includes(v) ? (v as T[number]) : { error: `must be one of ${values.join(', ')}, got "${v}"` },
  );
}

/** Any text (an id, a type name, a name to filter by). */
export const text = (description: string) => param<string>('text-param', { type: 'string', description }, (v) => v);

/** `true` when the parameter is `true`; anything else (or nothing) is false, as it always was. */
export const flag = (description: string) => param<boolean>('flag-param', { type: 'boolean', description }, (v) => v === 'true');

/** `true` or `false` (absent: undefined); anything else is refused, by name. */
export const trueOrFalse = (description: string) =>
  param<boolean>('true-or-false-param', { type: 'boolean', description }, (v) =>
    v === 'true' ? true : v === 'false' ? false : { error: `must be true or false, got "${v}"` },
  );

/**
 * A whole number written in decimal digits, at most `max`; undefined for anything else (a sign, a
 * fraction, an exponent, hex, or more than Number.MAX_SAFE_INTEGER: past 2^53 a number is no longer
 * exact here, and past 2^63 neither store holds it, so such a cursor could only fail in the query).
 */
export function wholeNumber(text: string, max = Number.MAX_SAFE_INTEGER): number | undefined {
  if (!/^\d+$/.test(text)) return undefined;
  const n = Number(text);
  return n <= max ? n : undefined;
}

/** A position in a list or a feed (a `nextCursor`, an SSE `id`): a whole number that both stores hold. */
export function cursorParam(description: string, name = 'cursor') {
  return param<string>(`${name}-param`, { type: 'string', pattern: '^\\d+$', description }, (v) =>
    wholeNumber(v) === undefined
      ? {
          error: `must be ${name === 'cursor' ? 'the nextCursor of a previous page' : 'a cursor already received'} (a whole number up to ${Number.MAX_SAFE_INTEGER}), got ${quoted(v)}`,
        }
      : v,
  );
}

/** `limit` (1-500) and `cursor` (the nextCursor of the previous page). */
export const pageQuery = {
  limit: param<number>('limit-param', { type: 'integer', minimum: 1, maximum: 500, description: 'at most this many, 1-500 (default 50)' }, (v) => {
    const n = wholeNumber(v, 500);
    return n !== undefined && n >= 1 ? n : { error: `must be a whole number from 1 to 500, got ${quoted(v)}` };
  }),
  cursor: cursorParam('nextCursor of the previous page'),
};

/** A `since`/`until` query parameter: milliseconds since the epoch (src/schema/time.ts says which forms and bounds). */
export function timeQuery(description: string) {
  return param<number>('time-param', { type: 'string', description: `${description}: ${TIME_FORMS}, from 0001-01-01 to 9999-12-31` }, (v) => readTime(v));
}

/** A `since`/`until` of a JSON body: the text as given, refused (naming its field) where timeQuery would refuse it. */
export function timeField(description: string): Schema<string> {
  return {
    kind: 'time-field',
    description,
    jsonSchema: { type: 'string', minLength: 1, description: `${description}: ${TIME_FORMS}, from 0001-01-01 to 9999-12-31` },
    check(v, path, issues) {
      const r = typeof v === 'string' && v ? readTime(v) : { error: `must be ${TIME_FORMS}, got ${typeName(v)}` };
      if (typeof r === 'number') return v as string;
      issues.push({ path, message: r.error, ...(r.hint ? { hint: r.hint } : {}) });
      return INVALID;
    },
  };
}

/**
 * A JSON request body's object: a key it does not know is refused with the closest one (a misspelt
 * `dry_run` ignored would replay for real), and a `null` is a value the sender gave, refused where
 * the key takes none (taken as a key left out, `"installation": null` would widen a bulk replay to
 * every installation).
 */
export function requestBody<S extends Record<string, Schema<any>>>(shape: S, opts: Omit<ObjectOptions<any>, 'nullIsValue' | 'passthrough'> = {}) {
  return object(shape, { ...opts, nullIsValue: true });
}
