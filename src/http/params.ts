/**
 * Query parameters and request bodies of the management API as schemas (src/schema), for route(): each parameter reads the text
 * of one parameter, says what is wrong in the words the API has always used, and documents itself.
 */
import { INVALID, object, optional, type ObjectOptions, type Schema } from '../schema/index.ts';

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

/** `limit` (1-500) and `cursor` (the nextCursor of the previous page). */
export const pageQuery = {
  limit: param<number>('limit-param', { type: 'integer', minimum: 1, maximum: 500, description: 'at most this many, 1-500 (default 50)' }, (v) => {
    const n = Number(v);
    return Number.isInteger(n) && n >= 1 && n <= 500 ? n : { error: `must be a whole number from 1 to 500, got "${v}"` };
  }),
  cursor: param<string>('cursor-param', { type: 'string', pattern: '^\\d+$', description: 'nextCursor of the previous page' }, (v) =>
    /^\d+$/.test(v) ? v : { error: `must be the nextCursor of a previous page, got "${v}"` },
  ),
};

/**
 * A JSON request body's object: a key it does not know is refused with the closest one (a misspelt
 * `dry_run` ignored would replay for real), and a `null` is a value the sender gave, refused where
 * the key takes none (taken as a key left out, `"installation": null` would widen a bulk replay to
 * every installation).
 */
export function requestBody<S extends Record<string, Schema<any>>>(shape: S, opts: Omit<ObjectOptions<any>, 'nullIsValue' | 'passthrough'> = {}) {
  return object(shape, { ...opts, nullIsValue: true });
}
