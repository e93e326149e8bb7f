/**
 * `${{ env.NAME }}` references and `.env` files. Shared by config.yaml and manifest `secrets`.
 */
import { readFileSync } from 'node:fs';
import { setOwn } from '../schema/index.ts';

export const ENV_REF = /\$\{\{\s*env\.([A-Za-z_][A-Za-z0-9_]*)\s*\}\}/g;

/** Parse a `.env` file: `NAME=value`, `export NAME=value`, quotes, `#` comments. */
export function parseDotenv(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const raw of text.split(/\r?\n/)) {
    const line = raw.trim();
    if (!line || line.startsWith('#')) continue;
    const m = /^(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*)$/.exec(line);
    if (!m) continue;
    let v = m[2];
    if ((v.startsWith('"') && v.endsWith('"')) || (v.startsWith("'") && v.endsWith("'"))) {
      v = v.slice(1, -1);
      if (m[2].startsWith('"')) v = v.replace(/\\n/g, '\n');
    } else v = v.replace(/\s+#.*$/, '');
    out[m[1]] = v;
  }
  return out;
}

export function readDotenv(file: string): Record<string, string> {
  try {
    return parseDotenv(readFileSync(file, 'utf8'));
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return {};
    throw e;
  }
}

/** The variable `name` of `env`, never one its prototype has (`env.constructor` is not set unless it is). */
export function envValue(env: Record<string, string | undefined>, name: string): string | undefined {
  return Object.hasOwn(env, name) ? env[name] : undefined;
}

/**
 * Replace every `${{ env.NAME }}` in the strings of `value`; report each missing variable with the
 * path of the key that names it.
 */
export function interpolate(
  value: unknown,
  env: Record<string, string | undefined>,
  onMissing: (name: string, path: (string | number)[]) => void,
  path: (string | number)[] = [],
): unknown {
  if (typeof value === 'string') {
    return value.replace(ENV_REF, (_, name: string) => {
      const v = envValue(env, name);
      if (v === undefined) {
        onMissing(name, path);
        return '';
      }
      return v;
    });
  }
  if (Array.isArray(value)) return value.map((v, i) => interpolate(v, env, onMissing, [...path, i]));
  if (value && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    // setOwn: `out[k] =` with a key `__proto__` would set the prototype, and the key would pass validation unseen.
    for (const [k, v] of Object.entries(value)) setOwn(out, k, interpolate(v, env, onMissing, [...path, k]));
    return out;
  }
  return value;
}
