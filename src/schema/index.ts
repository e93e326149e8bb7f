/**
 * A small schema language: declare a shape once, get its TypeScript type (`Infer`), its defaults,
 * and validation that reports every problem at once with a field path. Used by config.yaml, the
 * manifest and the management API, so their errors read the same way.
 */
import { didYouMean } from './suggest.ts';

export type Path = (string | number)[];
export interface Issue {
  path: Path;
  message: string;
  hint?: string;
  /** Point at the key itself rather than its value (unknown keys). */
  atKey?: boolean;
}

export const INVALID: unique symbol = Symbol('invalid');
type Invalid = typeof INVALID;

export interface Schema<T> {
  readonly kind: string;
  readonly description?: string;
  readonly isOptional?: boolean;
  readonly hasDefault?: boolean;
  readonly defaultValue?: unknown;
  /** What the kind was declared with (bounds, items, values), read by toJsonSchema. */
  readonly options?: Readonly<Record<string, unknown>>;
  /** A shared shape's name: toJsonSchema refers to it once declared (`#/components/schemas/<name>`). */
  readonly name?: string;
  /** The JSON Schema of a kind declared outside this file (a query parameter's own form, say). */
  readonly jsonSchema?: Readonly<Record<string, unknown>>;
  /** Validate (and normalise) one value; push issues and return INVALID on failure. */
  check(value: unknown, path: Path, issues: Issue[]): T | Invalid;
  /** Phantom field carrying the output type. */
  readonly _type?: T;
}

export type Infer<S> = S extends Schema<infer T> ? T : never;

type AnySchema = Schema<any>;
type Shape = Record<string, AnySchema>;
type OptionalKeys<S extends Shape> = { [K in keyof S]: S[K] extends { isOptional: true } ? K : never }[keyof S];
type ObjectOut<S extends Shape> = { [K in Exclude<keyof S, OptionalKeys<S>>]: Infer<S[K]> } & {
  [K in OptionalKeys<S>]?: Infer<S[K]>;
};
type Pretty<T> = { [K in keyof T]: T[K] } & {};

export function typeName(v: unknown): string {
  if (v === undefined) return 'nothing';
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'a list';
  if (typeof v === 'object') return 'a map';
  if (typeof v === 'string') return `the string "${v.length > 40 ? `${v.slice(0, 40)}…` : v}"`;
  return `${typeof v} ${String(v)}`;
}

function fail(issues: Issue[], path: Path, message: string, hint?: string): Invalid {
  issues.push({ path, message, ...(hint ? { hint } : {}) });
  return INVALID;
}

export function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * Set `key` as an own property, whatever its name. `out[key] = v` with a key parsed from JSON
 * ("__proto__") would replace the object's prototype instead: the key would vanish from every
 * later check while its value still leaked through the prototype.
 */
export function setOwn(target: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(target, key, { value, writable: true, enumerable: true, configurable: true });
}

export function string(
  opts: {
    min?: number;
    max?: number;
    pattern?: RegExp;
    patternHint?: string;
    /** An absolute http(s) URL; `'or-empty'` also takes the empty string (an unset optional URL). */
    url?: boolean | 'or-empty';
    /** The JSON Schema `format` it is documented with (`date-time`); not checked. */
    format?: string;
    description?: string;
  } = {},
): Schema<string> {
  return {
    kind: 'string',
    description: opts.description,
    options: opts,
    check(v, path, issues) {
      if (typeof v !== 'string') return fail(issues, path, `must be a string, got ${typeName(v)}`);
      if (opts.min !== undefined && v.length < opts.min)
        return fail(issues, path, opts.min === 1 ? 'must not be empty' : `must be at least ${opts.min} characters`);
      if (opts.max !== undefined && v.length > opts.max) return fail(issues, path, `must be at most ${opts.max} characters (it has ${v.length})`);
      if (opts.pattern && !opts.pattern.test(v)) return fail(issues, path, `"${v}" does not have the required form`, opts.patternHint);
      if (opts.url && !(opts.url === 'or-empty' && v === '')) {
        let u: URL;
        try {
          u = new URL(v);
        } catch {
          return fail(issues, path, `"${v}" is not a valid URL`, 'use an absolute http:// or https:// URL');
        }
        if (u.protocol !== 'http:' && u.protocol !== 'https:') return fail(issues, path, `"${v}" must use http or https`);
      }
      return v;
    },
  };
}

export function number(opts: { min?: number; max?: number; integer?: boolean; description?: string } = {}): Schema<number> {
  return {
    kind: 'number',
    description: opts.description,
    options: opts,
    check(v, path, issues) {
      if (typeof v !== 'number' || !Number.isFinite(v)) return fail(issues, path, `must be a number, got ${typeName(v)}`);
      if (opts.integer && !Number.isInteger(v)) return fail(issues, path, `must be a whole number, got ${v}`);
      // Past 2^53 a number is no longer exact here, and past 2^63 no store column holds it.
      if (opts.integer && !Number.isSafeInteger(v))
        return fail(issues, path, `must be a whole number from ${-Number.MAX_SAFE_INTEGER} to ${Number.MAX_SAFE_INTEGER}, got ${v}`);
      if (opts.min !== undefined && v < opts.min) return fail(issues, path, `must be at least ${opts.min}, got ${v}`);
      if (opts.max !== undefined && v > opts.max) return fail(issues, path, `must be at most ${opts.max}, got ${v}`);
      return v;
    },
  };
}

export function boolean(opts: { description?: string } = {}): Schema<boolean> {
  return {
    kind: 'boolean',
    description: opts.description,
    check(v, path, issues) {
      if (typeof v !== 'boolean') return fail(issues, path, `must be true or false, got ${typeName(v)}`);
      return v;
    },
  };
}

export function oneOf<const T extends readonly (string | number | boolean)[]>(
  values: T,
  opts: { description?: string; hint?: (v: unknown) => string | undefined } = {},
): Schema<T[number]> {
  return {
    kind: 'enum',
    description: opts.description,
    options: { values },
    check(v, path, issues) {
      if ((values as readonly unknown[]).includes(v)) return v as T[number];
      const custom = opts.hint?.(v);
      const guess = typeof v === 'string' ? didYouMean(v, values.map(String)) : undefined;
      return fail(issues, path, `${typeName(v)} is not allowed; expected one of: ${values.map((x) => JSON.stringify(x)).join(', ')}`, custom ?? guess);
    },
  };
}

const durationUnits: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/**
 * The longest duration anything takes: 3650000d (about 10,000 years). A time that far from now is
 * still a date (a Date holds 273,000 years either side of 1970), and a number of milliseconds that
 * size is exact and fits every store's 64-bit integers.
 */
export const MAX_DURATION_MS = 3_650_000 * 86_400_000;

/** Parse "500ms", "10s", "2m", "1h", "7d" (or a bare number of milliseconds) into milliseconds. */
export function parseDuration(v: string): number | undefined {
  const m = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)\s*$/.exec(v);
  return m ? Number(m[1]) * durationUnits[m[2]] : undefined;
}

/** Milliseconds as a person writes them: the largest unit that divides them (2000 -> `2s`, 90000 -> `90s`). */
export function formatDuration(ms: number): string {
  for (const [unit, size] of [
    ['d', 86_400_000],
    ['h', 3_600_000],
    ['m', 60_000],
    ['s', 1000],
  ] as const)
    if (ms >= size && ms % size === 0) return `${ms / size}${unit}`;
  return `${ms}ms`;
}

/** A duration, written `10s`, `500ms`, `2m`, `1h`, `7d` or as milliseconds; yields milliseconds. */
export function duration(opts: { min?: number; max?: number; description?: string } = {}): Schema<number> {
  return {
    kind: 'duration',
    description: opts.description,
    options: opts,
    check(v, path, issues) {
      const ms = typeof v === 'number' ? v : typeof v === 'string' ? parseDuration(v) : undefined;
      if (ms === undefined || Number.isNaN(ms) || ms < 0)
        return fail(issues, path, `must be a duration, got ${typeName(v)}`, 'write it like 500ms, 10s, 2m, 1h or 7d');
      if (ms > MAX_DURATION_MS) return fail(issues, path, `must be at most ${formatDuration(MAX_DURATION_MS)}, got ${typeName(v)}`);
      if (opts.min !== undefined && ms < opts.min) return fail(issues, path, `must be at least ${formatDuration(opts.min)}, got ${formatDuration(ms)}`);
      if (opts.max !== undefined && ms > opts.max) return fail(issues, path, `must be at most ${formatDuration(opts.max)}, got ${formatDuration(ms)}`);
      return ms;
    },
  };
}

const byteUnits: Record<string, number> = { b: 1, kb: 1024, mb: 1024 ** 2, gb: 1024 ** 3 };

/** A size, written `512kb`, `1mb` or as bytes; yields bytes. */
export function bytes(opts: { min?: number; max?: number; description?: string } = {}): Schema<number> {
  return {
    kind: 'bytes',
    description: opts.description,
    options: opts,
    check(v, path, issues) {
      let n: number | undefined;
      if (typeof v === 'number') n = v;
      else if (typeof v === 'string') {
        const m = /^\s*(\d+(?:\.\d+)?)\s*(b|kb|mb|gb)\s*$/i.exec(v);
        if (m) n = Math.round(Number(m[1]) * byteUnits[m[2].toLowerCase()]);
      }
      if (n === undefined || !Number.isFinite(n) || n < 0)
        return fail(issues, path, `must be a size, got ${typeName(v)}`, 'write it like 512kb, 1mb or a number of bytes');
      if (!Number.isSafeInteger(Math.round(n))) return fail(issues, path, `${typeName(v)} is too large for a size`);
      if (opts.min !== undefined && n < opts.min) return fail(issues, path, `must be at least ${opts.min} bytes`);
      if (opts.max !== undefined && n > opts.max) return fail(issues, path, `must be at most ${opts.max} bytes`);
      return n;
    },
  };
}

export function array<T>(item: Schema<T>, opts: { min?: number; max?: number; unique?: boolean; description?: string } = {}): Schema<T[]> {
  return {
    kind: 'array',
    description: opts.description,
    options: { ...opts, item },
    check(v, path, issues) {
      if (!Array.isArray(v)) return fail(issues, path, `must be a list, got ${typeName(v)}`);
      if (opts.min !== undefined && v.length < opts.min)
        return fail(issues, path, opts.min === 1 ? 'must not be empty' : `must have at least ${opts.min} items`);
      if (opts.max !== undefined && v.length > opts.max) return fail(issues, path, `must have at most ${opts.max} items`);
      const out: T[] = [];
      let ok = true;
      const seen = new Set<string>();
      v.forEach((x, i) => {
        const r = item.check(x, [...path, i], issues);
        if (r === INVALID) ok = false;
        else {
          if (opts.unique) {
            const key = JSON.stringify(r);
            if (seen.has(key)) {
              issues.push({ path: [...path, i], message: `${typeName(x)} is listed twice` });
              ok = false;
            }
            seen.add(key);
          }
          out.push(r);
        }
      });
      return ok ? out : INVALID;
    },
  };
}

export function record<T>(value: Schema<T>, opts: { key?: RegExp; keyHint?: string; description?: string } = {}): Schema<Record<string, T>> {
  return {
    kind: 'record',
    description: opts.description,
    options: { ...opts, value },
    check(v, path, issues) {
      if (!isPlainObject(v)) return fail(issues, path, `must be a map, got ${typeName(v)}`);
      const out: Record<string, T> = {};
      let ok = true;
      for (const [k, x] of Object.entries(v)) {
        if (opts.key && !opts.key.test(k)) {
          issues.push({ path: [...path, k], message: `key "${k}" does not have the required form`, hint: opts.keyHint, atKey: true });
          ok = false;
          continue;
        }
        const r = value.check(x, [...path, k], issues);
        if (r === INVALID) ok = false;
        else setOwn(out, k, r);
      }
      return ok ? out : INVALID;
    },
  };
}

export interface ObjectOptions<T> {
  description?: string;
  /** Unknown keys are errors (with a "did you mean" hint) unless this is true (then they are kept). */
  passthrough?: boolean;
  /**
   * A `null` is a value the sender gave, checked as one (JSON request bodies: `"dryRun": null` is
   * refused, not taken as "use the default"). Without it a null is a key left out, as YAML's `key:`.
   */
  nullIsValue?: boolean;
  /** Cross-field rules, run only when every field passed. */
  refine?: (value: T, report: (path: Path, message: string, hint?: string) => void) => void;
}

export function object<S extends Shape>(shape: S, opts: ObjectOptions<Pretty<ObjectOut<S>>> = {}): Schema<Pretty<ObjectOut<S>>> & { shape: S } {
  return {
    kind: 'object',
    shape,
    description: opts.description,
    options: { passthrough: opts.passthrough, nullIsValue: opts.nullIsValue },
    check(v, path, issues) {
      if (v === undefined || (v === null && !opts.nullIsValue)) v = {};
      if (!isPlainObject(v)) return fail(issues, path, `must be a map, got ${typeName(v)}`);
      const out: Record<string, unknown> = {};
      let ok = true;
      for (const [key, schema] of Object.entries(shape)) {
        const x = v[key];
        if (x === undefined || (x === null && !opts.nullIsValue && schema.kind !== 'object' && schema.kind !== 'nullable')) {
          if (schema.hasDefault) {
            out[key] = structuredClone(schema.defaultValue);
            continue;
          }
          if (schema.isOptional) continue;
          if (schema.kind === 'object') {
            const r = schema.check({}, [...path, key], issues);
            if (r === INVALID) ok = false;
            else out[key] = r;
            continue;
          }
          issues.push({ path: [...path, key], message: `"${key}" is required` });
          ok = false;
          continue;
        }
        const r = schema.check(x, [...path, key], issues);
        if (r === INVALID) ok = false;
        else out[key] = r;
      }
      if (!opts.passthrough) {
        for (const key of Object.keys(v)) {
          if (Object.hasOwn(shape, key)) continue; // "constructor" is not a key of the shape
          issues.push({ path: [...path, key], message: `unknown key "${key}"`, hint: didYouMean(key, Object.keys(shape)), atKey: true });
          ok = false;
        }
      } else {
        for (const key of Object.keys(v)) if (!Object.hasOwn(shape, key)) setOwn(out, key, v[key]);
      }
      if (!ok) return INVALID;
      if (opts.refine) {
        const before = issues.length;
        opts.refine(out as Pretty<ObjectOut<S>>, (p, message, hint) => issues.push({ path: [...path, ...p], message, ...(hint ? { hint } : {}) }));
        if (issues.length > before) return INVALID;
      }
      return out as Pretty<ObjectOut<S>>;
    },
  };
}

/** A key that may be absent. */
export function optional<T>(schema: Schema<T>): Schema<T> & { isOptional: true } {
  return { ...schema, check: schema.check, isOptional: true };
}

/** A key that takes `value` when absent. */
export function withDefault<T>(schema: Schema<T>, value: T): Schema<T> {
  return { ...schema, check: schema.check, hasDefault: true, defaultValue: value };
}

/** Accept any value (free-form data such as configuration values); optionally check it. */
export function any(description?: string): Schema<unknown> {
  return { kind: 'any', description, check: (v) => v };
}

/** A value that may also be `null` (an answer's `nextAttemptAt` before any is scheduled). */
export function nullable<T>(schema: Schema<T>): Schema<T | null> {
  return {
    kind: 'nullable',
    description: schema.description,
    options: { inner: schema },
    check(v, path, issues) {
      return v === null ? null : schema.check(v, path, issues);
    },
  };
}

/**
 * One of several shapes (an event, or a list of them): the first that takes the value wins. When
 * none does, the issues are those of the one meant for the value's form (a map, a list), else one
 * naming the forms expected.
 */
export function union<const S extends readonly AnySchema[]>(variants: S, opts: { description?: string } = {}): Schema<Infer<S[number]>> {
  const formOf = (kind: string) => (kind === 'array' ? 'list' : kind === 'object' || kind === 'record' ? 'map' : kind);
  return {
    kind: 'union',
    description: opts.description,
    options: { variants },
    check(v, path, issues) {
      for (const variant of variants) {
        const mine: Issue[] = [];
        const r = variant.check(v, path, mine);
        if (r !== INVALID && !mine.length) return r;
      }
      const form = Array.isArray(v) ? 'list' : isPlainObject(v) ? 'map' : undefined;
      const meant = variants.find((x) => formOf(x.kind) === form);
      if (meant) return meant.check(v, path, issues) as Infer<S[number]> | Invalid;
      return fail(issues, path, `must be ${variants.map((x) => `a ${formOf(x.kind)}`).join(' or ')}, got ${typeName(v)}`);
    },
  };
}

/** A shape with a name: the OpenAPI document declares it once and refers to it wherever it is used. */
export function named<S extends AnySchema>(name: string, schema: S): S {
  return { ...schema, name };
}

/** An ISO-8601 date-time as the API writes it (`2026-01-31T12:00:00.000Z`): a string, documented as such. */
export function dateTime(description?: string): Schema<string> {
  return string({ format: 'date-time', description });
}

export type JsonSchema = Record<string, unknown>;

/**
 * The JSON Schema (2020-12, the dialect of OpenAPI 3.1) of a schema: what it accepts, its bounds,
 * defaults and descriptions. With `components`, a named schema is declared there once and referred
 * to by `$ref: '#/components/schemas/<name>'`; without, it is written out in place. `open`: an
 * object does not say `additionalProperties: false` (an answer, which may gain keys in a later
 * version, rather than what is accepted).
 */
export function toJsonSchema(schema: AnySchema, components?: Record<string, JsonSchema>, opts: { open?: boolean } = {}): JsonSchema {
  if (schema.name && components) {
    if (!(schema.name in components)) {
      components[schema.name] = {}; // a shape that refers to itself finds its name taken
      components[schema.name] = toJsonSchema({ ...schema, name: undefined }, components, opts);
    }
    return { $ref: `#/components/schemas/${schema.name}` };
  }
  const o = (schema.options ?? {}) as Record<string, any>;
  const out: JsonSchema = schema.jsonSchema ? { ...schema.jsonSchema } : jsonOfKind(schema, o, components, opts);
  if (schema.description && out.description === undefined) out.description = schema.description;
  if (schema.hasDefault && schema.defaultValue !== undefined) out.default = schema.defaultValue;
  return out;
}

function jsonOfKind(schema: AnySchema, o: Record<string, any>, components: Record<string, JsonSchema> | undefined, opts: { open?: boolean }): JsonSchema {
  const defined = (v: JsonSchema) => Object.fromEntries(Object.entries(v).filter(([, x]) => x !== undefined));
  switch (schema.kind) {
    case 'string':
      return defined({
        type: 'string',
        minLength: o.min,
        maxLength: o.max,
        pattern: o.pattern instanceof RegExp ? o.pattern.source : undefined,
        format: o.format ?? (o.url === true ? 'uri' : undefined),
      });
    case 'number':
      return defined({ type: o.integer ? 'integer' : 'number', minimum: o.min, maximum: o.max });
    case 'boolean':
      return { type: 'boolean' };
    case 'enum':
      return { enum: [...(o.values as unknown[])] };
    case 'duration':
      return { type: ['string', 'number'], description: 'a duration: 500ms, 10s, 2m, 1h, 7d, or a number of milliseconds' };
    case 'bytes':
      return { type: ['string', 'integer'], description: 'a size: 512kb, 1mb, or a number of bytes' };
    case 'array':
      return defined({ type: 'array', items: toJsonSchema(o.item, components, opts), minItems: o.min, maxItems: o.max, uniqueItems: o.unique || undefined });
    case 'record':
      return defined({
        type: 'object',
        additionalProperties: toJsonSchema(o.value, components, opts),
        propertyNames: o.key instanceof RegExp ? { pattern: o.key.source } : undefined,
      });
    case 'object': {
      const shape = (schema as AnySchema & { shape: Shape }).shape;
      const properties: Record<string, JsonSchema> = {};
      const required: string[] = [];
      for (const [key, sub] of Object.entries(shape)) {
        properties[key] = toJsonSchema(sub, components, opts);
        // In a request an absent object takes its own defaults (not required); an answer always has it.
        if (!sub.isOptional && !sub.hasDefault && (sub.kind !== 'object' || opts.open)) required.push(key);
      }
      return defined({
        type: 'object',
        properties,
        required: required.length ? required : undefined,
        additionalProperties: o.passthrough || opts.open ? undefined : false,
      });
    }
    case 'nullable': {
      const inner = toJsonSchema(o.inner, components, opts);
      if (typeof inner.type === 'string') return { ...inner, type: [inner.type, 'null'] };
      if (Array.isArray(inner.enum)) return { ...inner, enum: [...inner.enum, null] };
      return { anyOf: [inner, { type: 'null' }] };
    }
    case 'union':
      return { oneOf: (o.variants as AnySchema[]).map((x) => toJsonSchema(x, components, opts)) };
    case 'any':
      return {};
    default:
      // A kind declared elsewhere without its JSON Schema: anything (documented as such, never wrong).
      return {};
  }
}

export type Result<T> = { ok: true; value: T; issues: [] } | { ok: false; issues: Issue[] };

export function validate<T>(schema: Schema<T>, input: unknown): Result<T> {
  const issues: Issue[] = [];
  const value = schema.check(input, [], issues);
  if (value === INVALID || issues.length) return { ok: false, issues };
  return { ok: true, value, issues: [] };
}

/** `a.b[2].c` */
export function formatPath(path: Path): string {
  let s = '';
  for (const seg of path) s += typeof seg === 'number' ? `[${seg}]` : s ? `.${seg}` : seg;
  return s || '(top level)';
}
