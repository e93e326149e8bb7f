/** `--set key=value` options, repeated; values coerced by the manifest's property types. */
import { SwitchyardError } from '../errors.ts';
import { setOwn } from '../schema/index.ts';

/** Every value of a repeated option, from the raw argv (citty keeps only the last one). */
export function repeated(rawArgs: string[], name: string): string[] {
  const out: string[] = [];
  for (let i = 0; i < rawArgs.length; i++) {
    const a = rawArgs[i];
    if (a === `--${name}`) {
      if (i + 1 >= rawArgs.length) throw new SwitchyardError('bad_request', `--${name} needs a value`);
      out.push(rawArgs[++i]);
    } else if (a.startsWith(`--${name}=`)) out.push(a.slice(name.length + 3));
  }
  return out;
}

type PropertyTypes = Record<string, { type?: string } | undefined>;

/** `["a=1", "b=x"]` to `{a: 1, b: "x"}`, typed by `properties` when known. */
export function parseSets(sets: string[], properties: PropertyTypes = {}): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const s of sets) {
    const eq = s.indexOf('=');
    if (eq <= 0) throw new SwitchyardError('bad_request', `--set needs key=value, got "${s}"`);
    const key = s.slice(0, eq);
    const raw = s.slice(eq + 1);
    const type = Object.hasOwn(properties, key) ? properties[key]?.type : undefined;
    let value: unknown = raw;
    if (type === 'number') {
      value = Number(raw);
      if (raw.trim() === '' || !Number.isFinite(value)) throw new SwitchyardError('bad_request', `${key} is a number, got "${raw}"`, { where: key });
    } else if (type === 'boolean') {
      if (raw !== 'true' && raw !== 'false') throw new SwitchyardError('bad_request', `${key} is true or false, got "${raw}"`, { where: key });
      value = raw === 'true';
    } else if (type === undefined && /^(true|false|-?\d+(\.\d+)?)$/.test(raw) && !Object.hasOwn(properties, key)) {
      value = JSON.parse(raw);
    }
    setPath(out, key, value);
  }
  return out;
}

/** `a.b=1` sets nested keys (event payload overrides such as feedback.rating). */
function setPath(target: Record<string, unknown>, key: string, value: unknown): void {
  const parts = key.split('.');
  let node = target;
  // Own keys only: "__proto__.x=1" must make a key the server refuses, not reach Object.prototype.
  for (const p of parts.slice(0, -1)) {
    if (!Object.hasOwn(node, p) || typeof node[p] !== 'object' || node[p] === null) setOwn(node, p, {});
    node = node[p] as Record<string, unknown>;
  }
  setOwn(node, parts[parts.length - 1], value);
}
