/**
 * Manifest rules that span fields. They read the raw document (anything YAML can hold) so they are
 * reported together with the schema's problems, not only once those are fixed.
 */
import { isPlainObject, type Issue } from '../schema/index.ts';
import { didYouMean } from '../schema/suggest.ts';
import { ENV_REF } from '../config/env.ts';
import { GITBOOK_NAME_PATTERN, INTERNAL_SCOPES, NAME_CHARACTERS, PROPERTY_DESCRIPTION_MAX, PROPERTY_TITLE_MAX, type ManifestDialect } from './schema.ts';

/**
 * Limits GitBook's own manifest validator has (its CLI's `manifest.ts` schema) that the spec does
 * not state: past one, a manifest loads here with a warning citing it, for whoever also publishes
 * the integration there.
 */
function gitbookLimitIssues(raw: Record<string, unknown>): Issue[] {
  const warnings: Issue[] = [];
  // A name this server refuses gets that error alone (schema.ts).
  if (typeof raw.name === 'string' && NAME_CHARACTERS.test(raw.name) && !GITBOOK_NAME_PATTERN.test(raw.name))
    warnings.push({
      path: ['name'],
      message: `"${raw.name}" is not a name GitBook's manifest validator accepts (letters and digits in words joined by single hyphens)`,
      hint: 'it loads here; to publish it on GitBook too, name it like "my-integration"',
    });
  const configurations = raw.configurations;
  if (!isPlainObject(configurations)) return warnings;
  for (const [target, def] of Object.entries(configurations)) {
    if (!isPlainObject(def) || !isPlainObject(def.properties)) continue;
    for (const [name, p] of Object.entries(def.properties)) {
      if (!isPlainObject(p)) continue;
      for (const [key, max, source] of [
        ['title', PROPERTY_TITLE_MAX, " (@gitbook/api's INTEGRATION_PROPERTY_TITLE_MAX_LENGTH)"],
        ['description', PROPERTY_DESCRIPTION_MAX, ''],
      ] as const) {
        const text = p[key];
        if (typeof text !== 'string' || text.length <= max) continue;
        warnings.push({
          path: ['configurations', target, 'properties', name, key],
          message: `is ${text.length} characters; GitBook's manifest validator allows at most ${max} in a property ${key}${source}`,
          hint: `it loads here (the spec sets no limit); to publish it on GitBook too, keep it to ${max} characters`,
        });
      }
    }
  }
  return warnings;
}

export function crossFieldIssues(raw: unknown, dialect: ManifestDialect = 'platform'): { errors: Issue[]; warnings: Issue[] } {
  const errors: Issue[] = [];
  const warnings: Issue[] = [];
  if (!isPlainObject(raw)) return { errors, warnings };
  warnings.push(...gitbookLimitIssues(raw));

  // Every name in `required` must be a declared property.
  const configurations = raw.configurations;
  if (isPlainObject(configurations)) {
    for (const target of ['account', 'site', 'space'] as const) {
      const def = configurations[target];
      if (!isPlainObject(def) || !Array.isArray(def.required)) continue;
      const declared = isPlainObject(def.properties) ? Object.keys(def.properties) : [];
      def.required.forEach((name, i) => {
        if (typeof name !== 'string' || !name || declared.includes(name)) return;
        errors.push({
          path: ['configurations', target, 'required', i],
          message: `"${name}" is required but is not a declared property`,
          hint:
            didYouMean(name, declared) ??
            (declared.length ? `declared properties: ${declared.join(', ')}` : `declare it under configurations.${target}.properties`),
        });
      });
    }
  }

  // Block ids are component ids: one component per id.
  if (Array.isArray(raw.blocks)) {
    const seen = new Map<string, number>();
    raw.blocks.forEach((b, i) => {
      if (!isPlainObject(b) || typeof b.id !== 'string') return;
      const first = seen.get(b.id);
      if (first !== undefined)
        errors.push({ path: ['blocks', i, 'id'], message: `block id "${b.id}" is used twice (also blocks[${first}])`, hint: 'give every block its own id' });
      else seen.set(b.id, i);
    });
  }

  // `${{ env.NAME }}` is only interpolated in secrets; elsewhere it would be shown literally.
  const walk = (v: unknown, path: (string | number)[]) => {
    if (typeof v === 'string') {
      ENV_REF.lastIndex = 0;
      if (ENV_REF.test(v))
        warnings.push({
          path,
          message: 'environment references are only replaced under secrets; this one stays as written',
          hint: 'move the value to secrets and read it from context.environment.secrets',
        });
    } else if (Array.isArray(v)) v.forEach((x, i) => walk(x, [...path, i]));
    else if (isPlainObject(v)) for (const [k, x] of Object.entries(v)) walk(x, [...path, k]);
  };
  for (const [k, v] of Object.entries(raw)) if (k !== 'secrets' && k !== 'envs') walk(v, [k]);

  // GitBook's catalogue asks for script injection (spec 2.5: internal, not possible for
  // integrations): the manifest loads, and says what will not run.
  if (dialect === 'gitbook' && Array.isArray(raw.scopes))
    raw.scopes.forEach((scope, i) => {
      if (typeof scope === 'string' && INTERNAL_SCOPES.includes(scope))
        warnings.push({
          path: ['scopes', i],
          message: `"${scope}" is an internal scope here: injecting scripts or cookies into sites is not possible for integrations (spec 2.5)`,
          hint: 'the integration loads; its fetch_published_script handler answers 501',
        });
    });
  if (raw.envs !== undefined) {
    // Secrets an environment declares that `secrets` does not: the code will find them unset.
    const declared = new Set(isPlainObject(raw.secrets) ? Object.keys(raw.secrets) : []);
    const onlyThere = new Set<string>();
    if (isPlainObject(raw.envs))
      for (const env of Object.values(raw.envs))
        if (isPlainObject(env) && isPlainObject(env.secrets)) for (const name of Object.keys(env.secrets)) if (!declared.has(name)) onlyThere.add(name);
    const names = [...onlyThere];
    warnings.push({
      path: ['envs'],
      message: names.length
        ? `envs is GitBook's per-environment publishing setting and is not read here: ${names.join(', ')} ${names.length === 1 ? 'is' : 'are'} declared only there, so environment.secrets will not have ${names.length === 1 ? 'it' : 'them'}`
        : "envs is GitBook's per-environment publishing setting and is not read here",
      hint: names.length
        ? `add ${names.length === 1 ? 'it' : 'them'} under secrets, e.g. ${names[0]}: \${{ env.${String(raw.name ?? 'APP')
            .toUpperCase()
            .replace(/[^A-Z0-9]+/g, '_')}_${names[0]} }}`
        : 'put the secrets this server should use under secrets, as ${{ env.NAME }} references',
    });
  }

  return { errors, warnings };
}
