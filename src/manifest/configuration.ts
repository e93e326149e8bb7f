/**
 * An installation's configuration checked against the manifest's `configurations.account` or
 * `.site` (spec 2.6, 3): types, enum values, required keys. Problems say the field path
 * (`configuration.webhook_url`), what is wrong and what to do.
 */
import type { Problem } from '../errors.ts';
import { isPlainObject, setOwn, typeName } from '../schema/index.ts';
import { didYouMean } from '../schema/suggest.ts';
import type { ConfigurationsDef, PropertyDef } from './schema.ts';

/** Written by the OAuth handler (spec 2.3) even when no property declares it. */
export const OAUTH_CREDENTIALS = 'oauth_credentials';

const where = (name: string) => `configuration.${name}`;

function isUnset(v: unknown): boolean {
  return v === undefined || v === null || v === '';
}

/** Names of required properties that are not set (absent, null or ""). */
export function missingRequired(def: ConfigurationsDef | undefined, configuration: unknown): string[] {
  const config = isPlainObject(configuration) ? configuration : {};
  return (def?.required ?? []).filter((name) => !Object.hasOwn(config, name) || isUnset(config[name]));
}

function checkValue(name: string, prop: PropertyDef, v: unknown): Problem | undefined {
  switch (prop.type) {
    case 'string':
      if (typeof v !== 'string') return { where: where(name), message: `must be a string, got ${typeName(v)}` };
      if (prop.enum && !prop.enum.includes(v))
        return {
          where: where(name),
          message: `"${v}" is not one of the allowed values`,
          hint: didYouMean(v, prop.enum) ?? `use one of: ${prop.enum.map((e) => JSON.stringify(e)).join(', ')}`,
        };
      return undefined;
    case 'number':
      if (typeof v !== 'number' || !Number.isFinite(v)) return { where: where(name), message: `must be a number, got ${typeName(v)}` };
      return undefined;
    case 'boolean':
      if (typeof v !== 'boolean') return { where: where(name), message: `must be true or false, got ${typeName(v)}` };
      return undefined;
    case 'button':
      // A button's value is what its callback stored (OAuth credentials): a map.
      if (!isPlainObject(v))
        return {
          where: where(name),
          message: `is set by the "${prop.button_text}" button's callback and must be a map, got ${typeName(v)}`,
          hint: `press the button (it opens ${prop.callback_url}) instead of setting it by hand`,
        };
      return undefined;
    default: {
      const unknownType: never = prop;
      return { where: where(name), message: `has a definition of unknown type ${JSON.stringify((unknownType as { type?: unknown }).type)}` };
    }
  }
}

/** Keys a component-drawn configuration may hold beyond its declared properties. */
const FREE_KEY = /^(?!__proto__$|constructor$|prototype$)[A-Za-z_$][A-Za-z0-9_$.-]{0,127}$/;

/**
 * The configuration with each property's manifest `default` filled in where the key is absent (or
 * null). The one rule for every door (CLI, API, console, the integration's own API calls): the
 * installations service calls this whenever an installation is created or its configuration is
 * updated, so what is stored is what the code sees and what every view shows. A value that is set,
 * an empty string included, is kept.
 */
export function withDefaults(def: ConfigurationsDef | undefined, configuration: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(configuration)) setOwn(out, k, v);
  for (const [name, prop] of Object.entries(def?.properties ?? {})) {
    if (prop.type === 'button' || prop.default === undefined) continue;
    if (!Object.hasOwn(out, name) || out[name] === undefined || out[name] === null) setOwn(out, name, prop.default);
  }
  return out;
}

/**
 * Validate an installation's configuration against `def`. `partial` allows missing required keys
 * (an installation that is still pending). Unknown keys are errors, except `oauth_credentials`, and
 * except in a configuration drawn by a component (`componentId`), whose component keeps what it
 * wants there (declared properties are still checked).
 */
export function validateConfiguration(
  def: ConfigurationsDef | undefined,
  configuration: unknown,
  opts: {
    partial?: boolean;
    /**
     * Keys no property declares that are accepted (GitBook's configurations are JSON Schemas,
     * open to more keys): all of them, or those the function accepts. Never keys reaching prototypes.
     */
    undeclared?: boolean | ((name: string) => boolean);
  } = {},
): Problem[] {
  if (configuration === undefined || configuration === null) configuration = {};
  if (!isPlainObject(configuration)) return [{ where: 'configuration', message: `must be a map of property names to values, got ${typeName(configuration)}` }];
  const properties = def?.properties ?? {};
  const names = Object.keys(properties);
  const problems: Problem[] = [];
  for (const [name, v] of Object.entries(configuration)) {
    // Own keys only: a configuration key like "toString" must not find Object.prototype's.
    const prop = Object.hasOwn(properties, name) ? properties[name] : undefined;
    if (!prop) {
      if (name === OAUTH_CREDENTIALS) continue;
      // A configuration screen drawn by a component (GitBook's `componentId`) stores what its
      // component decides: keys it does not declare are its own. Never keys that reach prototypes.
      const open = typeof opts.undeclared === 'function' ? opts.undeclared(name) : opts.undeclared;
      if ((def?.componentId || open) && FREE_KEY.test(name)) continue;
      problems.push({
        where: where(name),
        message: `"${name}" is not a property of this integration`,
        hint: didYouMean(name, names) ?? (names.length ? `properties: ${names.join(', ')}` : 'this integration has no configuration properties'),
      });
      continue;
    }
    if (v === undefined || v === null) continue;
    const p = checkValue(name, prop, v);
    if (p) problems.push(p);
  }
  if (!opts.partial)
    for (const name of missingRequired(def, configuration)) {
      const prop = Object.hasOwn(properties, name) ? properties[name] : undefined;
      problems.push({
        where: where(name),
        message: `"${name}" is required`,
        hint: prop?.type === 'button' ? `press "${prop.button_text}" to set it` : prop ? `${prop.title}: ${prop.description}` : undefined,
      });
    }
  return problems;
}

/**
 * Turn text (a CLI `--set key=value`) into the property's type: numbers and booleans parsed, JSON
 * accepted for maps. Returns the text unchanged when it cannot be converted; validation says why.
 */
export function coerceConfigurationValue(def: ConfigurationsDef | undefined, name: string, text: string): unknown {
  const prop = def?.properties && Object.hasOwn(def.properties, name) ? def.properties[name] : undefined;
  if (!prop) return text;
  if (prop.type === 'number') {
    const n = Number(text);
    return text.trim() !== '' && Number.isFinite(n) ? n : text;
  }
  if (prop.type === 'boolean') return text === 'true' ? true : text === 'false' ? false : text;
  if (prop.type === 'button') {
    try {
      return JSON.parse(text);
    } catch {
      return text;
    }
  }
  return text;
}
