/**
 * `platform-manifest.yaml`, declared once (spec 2.5, 2.6 and section 8): the TypeScript type and the
 * structural checks come from this schema. Rules that span fields or need the raw document (required
 * names declared, duplicate ids) live in rules.ts so they are reported even when other fields fail.
 */
import * as s from '../schema/index.ts';
import type { Issue, Path, Schema } from '../schema/index.ts';

/**
 * What an integration name must be here (spec 2.5: "string", unique): it is the integration's path
 * segment in every URL of it (`/v1/integrations/<name>/...`), written as it is, so it is made of the
 * characters a URL path keeps unchanged (RFC 3986's unreserved ones), and is not `.` or `..`, which
 * URL parsers fold away.
 */
export const NAME_CHARACTERS = /^(?!\.\.?$)[A-Za-z0-9._~-]+$/;
export const NAME_CHARACTERS_HINT = 'a name is ASCII letters, digits, "-", "_", "." and "~" (it is part of the integration\'s URLs), like "my-integration"';
/**
 * The names GitBook's manifest validator accepts (its CLI's `IntegrationNameSchema`: letters and
 * digits in words joined by single hyphens, either case). Another name loads here with a warning.
 */
export const GITBOOK_NAME_PATTERN = /^[A-Za-z0-9]+(-[A-Za-z0-9]+)*$/;
/** The form `switchyard new` writes: lowercase words joined by single hyphens (also an npm package name). */
export const NAME_PATTERN = /^[a-z0-9]+(-[a-z0-9]+)*$/;
export const NAME_HINT = 'use lowercase letters and digits in words joined by single hyphens, like "my-integration"';

/**
 * Which manifest file a folder has: `platform-manifest.yaml` (the spec's name) or
 * `gitbook-manifest.yaml` (GitBook's, read so its catalogue runs unchanged). They share one schema;
 * the GitBook dialect only relaxes what GitBook's own catalogue relies on (see manifestSchemaFor).
 */
export type ManifestDialect = 'platform' | 'gitbook';
export const NAME_MAX = 64;

export const SUMMARY_MAX = 2048;
/**
 * GitBook's validator's limits on a configuration property's `title` (`@gitbook/api`'s
 * INTEGRATION_PROPERTY_TITLE_MAX_LENGTH) and `description`. The spec states none: past them a
 * manifest loads with a warning (rules.ts).
 */
export const PROPERTY_TITLE_MAX = 50;
export const PROPERTY_DESCRIPTION_MAX = 100;

export const VISIBILITIES = ['private', 'unlisted', 'public'] as const;

/** Every scope identifier of spec 2.5. */
export const SCOPES = [
  'space:content:read',
  'space:content:write',
  'space:metadata:read',
  'space:metadata:write',
  'space:git:sync',
  'site:metadata:read',
  'site:views:read',
  'site:script:inject',
  'site:script:cookies',
  'site:visitor:auth',
  'site:visitor:claims',
  'site:adaptive:read',
  'site:adaptive:write',
  'openapi:read',
  'openapi:write',
  'conversations:ingest',
] as const;
export type Scope = (typeof SCOPES)[number];

/** Marked internal in spec 2.5: injecting JavaScript into a site or space is not possible for integrations. */
export const INTERNAL_SCOPES: readonly string[] = ['site:script:inject', 'site:script:cookies'];

/** Scopes GitBook has that the spec does not list: accepted only in `gitbook-manifest.yaml`. */
export const GITBOOK_SCOPES: readonly string[] = ['page:feedback:read'];

export const CATEGORIES = ['analytics', 'collaboration', 'content', 'marketing', 'authenticated-access', 'visitor-auth', 'other'] as const;

/** `target:` (GitBook): where the integration can be installed. */
export const TARGETS = ['organization', 'space', 'site', 'all'] as const;

export const PROPERTY_TYPES = ['string', 'number', 'boolean', 'button'] as const;
export type PropertyType = (typeof PROPERTY_TYPES)[number];

/** Script entry points the bundler accepts. */
export const SCRIPT_EXTENSIONS = ['.ts', '.tsx', '.mts', '.js', '.jsx', '.mjs'] as const;

/** Secret and configuration property names. */
export const SECRET_NAME = /^(?!__proto__$|constructor$|prototype$)[A-Za-z_][A-Za-z0-9_]*$/;
export const PROPERTY_NAME = /^(?!__proto__$|constructor$|prototype$)[A-Za-z_][A-Za-z0-9_-]*$/;

/**
 * The schema module keeps its failure marker private; a custom check gets it from a check that
 * fails on purpose (its issues are dropped) and returns it after pushing its own issue.
 */
const FAILED = s.string().check(0, [], []) as never;

function reject(issues: Issue[], path: Path, message: string, hint?: string): never {
  issues.push({ path, message, ...(hint ? { hint } : {}) });
  return FAILED;
}

/**
 * A path on the installation's public endpoint (`/oauth`, `/channels`): starts with one `/`, no
 * scheme or host, no `..` segment, no whitespace or fragment.
 */
export function endpointPath(): Schema<string> {
  const base = s.string({ min: 1 });
  return {
    kind: 'string',
    check(v, path, issues) {
      const r = base.check(v, path, issues);
      if (typeof r !== 'string') return r;
      const hint = 'write a path on the installation\'s public endpoint, like "/oauth"; the endpoint URL is added for you';
      if (/^[a-z][a-z0-9+.-]*:/i.test(r) || r.startsWith('//')) return reject(issues, path, `"${r}" must be a path, not a URL`, hint);
      if (!r.startsWith('/')) return reject(issues, path, `"${r}" must start with "/"`, hint);
      if (/\s|#/.test(r)) return reject(issues, path, `"${r}" must not contain spaces or "#"`, hint);
      if (r.split(/[/?]/).includes('..')) return reject(issues, path, `"${r}" must not contain ".." segments`, hint);
      return r;
    },
  };
}

// No upper bound: the spec states none (GitBook's is a warning, rules.ts).
const title = () => s.string({ min: 1 });
const description = () => s.string({ min: 1 });

const stringProperty = s.object(
  {
    type: s.oneOf(['string'] as const),
    title: title(),
    description: description(),
    default: s.optional(s.string()),
    // An empty value is a choice too (GitBook's catalogue offers "" for "none").
    enum: s.optional(s.array(s.string(), { min: 1, unique: true })),
    completion_url: s.optional(endpointPath()),
  },
  {
    refine(p, report) {
      if (p.enum && p.completion_url)
        report(['completion_url'], 'use either enum or completion_url, not both', 'enum lists fixed options; completion_url fetches them from your script');
      if (p.enum && p.default !== undefined && !p.enum.includes(p.default))
        report(['default'], `default "${p.default}" is not one of the enum values`, `use one of: ${p.enum.map((e) => JSON.stringify(e)).join(', ')}`);
    },
  },
);
const numberProperty = s.object({
  type: s.oneOf(['number'] as const),
  title: title(),
  description: description(),
  default: s.optional(s.number()),
});
const booleanProperty = s.object({
  type: s.oneOf(['boolean'] as const),
  title: title(),
  description: description(),
  default: s.optional(s.boolean()),
});
const buttonProperty = s.object({
  type: s.oneOf(['button'] as const),
  title: title(),
  description: description(),
  button_text: s.string({ min: 1 }),
  callback_url: endpointPath(),
});

export type StringPropertyDef = s.Infer<typeof stringProperty>;
export type NumberPropertyDef = s.Infer<typeof numberProperty>;
export type BooleanPropertyDef = s.Infer<typeof booleanProperty>;
export type ButtonPropertyDef = s.Infer<typeof buttonProperty>;
/** One configuration property (spec 2.6), discriminated by `type`. */
export type PropertyDef = StringPropertyDef | NumberPropertyDef | BooleanPropertyDef | ButtonPropertyDef;

const byType: Record<PropertyType, Schema<PropertyDef> & { shape: Record<string, unknown> }> = {
  string: stringProperty,
  number: numberProperty,
  boolean: booleanProperty,
  button: buttonProperty,
};

/** Which property types take a key, for "enum is only allowed on string properties". */
function typesTaking(key: string): PropertyType[] {
  return PROPERTY_TYPES.filter((t) => key in byType[t].shape);
}

const typeSchema = s.oneOf(PROPERTY_TYPES);

/** A property definition: dispatch on `type`, and say which type a misplaced key belongs to. */
export function propertySchema(): Schema<PropertyDef> {
  return {
    kind: 'property',
    check(v, path, issues) {
      if (!s.isPlainObject(v)) return reject(issues, path, `must be a map with type, title and description, got ${s.typeName(v)}`);
      if (v.type === undefined || v.type === null) return reject(issues, [...path, 'type'], '"type" is required', `one of: ${PROPERTY_TYPES.join(', ')}`);
      const type = typeSchema.check(v.type, [...path, 'type'], issues);
      if (typeof type !== 'string') return type;
      const before = issues.length;
      const r = byType[type].check(v, path, issues);
      // Turn `unknown key "enum"` into a message that says which type takes it.
      for (let i = before; i < issues.length; i++) {
        const iss = issues[i];
        const key = iss.path[iss.path.length - 1];
        if (key === 'default' && iss.path.length === path.length + 1 && !iss.hint)
          iss.hint = `the default of a ${type} property must be a ${type === 'boolean' ? 'boolean (true or false)' : type}`;
        if (!iss.atKey || iss.path.length !== path.length + 1 || typeof key !== 'string') continue;
        const takers = typesTaking(key);
        if (takers.length) {
          iss.message = `"${key}" is not allowed on a ${type} property`;
          iss.hint = `only ${takers.join(' and ')} properties take ${key}`;
        }
      }
      return r;
    },
  };
}

const configurationsDef = s.object({
  /** GitBook: the component that renders this configuration screen (in place of, or beside, properties). */
  componentId: s.optional(s.string({ min: 1 })),
  properties: s.optional(
    s.record(propertySchema(), {
      key: PROPERTY_NAME,
      keyHint: 'property names are letters, digits, "_" and "-", starting with a letter or "_", like webhook_url',
    }),
  ),
  required: s.optional(s.array(s.string({ min: 1 }), { unique: true })),
});
/** `configurations.account`, `.site` or (GitBook) `.space` (spec 2.6). */
export type ConfigurationsDef = s.Infer<typeof configurationsDef>;

/**
 * Scope identifiers. The platform dialect refuses the internal ones with a message that says why;
 * the GitBook dialect accepts them (rules.ts warns that what they serve does not run here) and
 * GitBook's extra scopes.
 */
function scopeSchema(dialect: ManifestDialect): Schema<Scope> {
  const known = s.oneOf(SCOPES);
  return {
    kind: 'enum',
    check(v, path, issues) {
      if (typeof v === 'string' && INTERNAL_SCOPES.includes(v)) {
        if (dialect === 'gitbook') return v as Scope;
        return reject(issues, path, `"${v}" is an internal scope: integrations cannot inject scripts or cookies into sites or spaces`, 'remove it from scopes');
      }
      if (dialect === 'gitbook' && typeof v === 'string' && GITBOOK_SCOPES.includes(v)) return v as Scope;
      return known.check(v, path, issues);
    },
  };
}

/** A CSP directive's sources (GitBook's `contentSecurityPolicy`): recorded, shown, not applied here. */
const cspSchema = () => s.record(s.string(), { key: /^[a-z][a-z-]*$/, keyHint: 'CSP directive names, like script-src or connect-src' });

/** The manifest schema of one dialect; both have the same shape (one Manifest type). */
export function manifestSchemaFor(dialect: ManifestDialect) {
  return s.object({
    name: s.string({ min: 1, max: NAME_MAX, pattern: NAME_CHARACTERS, patternHint: NAME_CHARACTERS_HINT }),
    title: s.string({ min: 1 }),
    description: s.string({ min: 1 }),
    summary: s.optional(s.string({ max: SUMMARY_MAX, description: 'Markdown shown on the installation page' })),
    organization: s.string({ min: 1, description: 'id or subdomain of the owning organization' }),
    visibility: s.oneOf(VISIBILITIES, { hint: () => 'private (only your organization), unlisted (anyone with the link) or public' }),
    scopes: s.array(scopeSchema(dialect), { unique: true }),
    script: s.optional(s.string({ min: 1 })),
    blocks: s.optional(
      s.array(
        s.object({
          id: s.string({ min: 1, pattern: /^[A-Za-z0-9][A-Za-z0-9_-]*$/, patternHint: 'letters, digits, "-" and "_"; it is the componentId of the component' }),
          title: s.string({ min: 1 }),
          description: s.optional(s.string()),
          /** GitBook: URL patterns whose links unfurl into this block (recorded; the editor is GitBook's). */
          urlUnfurl: s.optional(s.array(s.string({ min: 1 }))),
          /** GitBook: the Markdown code block this block converts to and from. */
          markdown: s.optional(s.object({ codeblock: s.string({ min: 1 }), body: s.string({ min: 1 }) })),
        }),
      ),
    ),
    categories: s.optional(s.array(s.oneOf(CATEGORIES), { unique: true })),
    icon: s.optional(s.string({ min: 1 })),
    previewImages: s.optional(s.array(s.string({ min: 1 }))),
    externalLinks: s.optional(
      s.array(
        s.object({
          label: s.string({ min: 1 }),
          url: s.string({ min: 1, url: true }),
        }),
      ),
    ),
    configurations: s.optional(
      s.object({
        account: s.optional(configurationsDef),
        site: s.optional(configurationsDef),
        space: s.optional(configurationsDef),
      }),
    ),
    secrets: s.optional(s.record(s.string(), { key: SECRET_NAME, keyHint: 'secret names are letters, digits and "_", like CLIENT_ID' })),
    /** GitBook: where the integration installs (organization, space, site or all). */
    target: s.optional(s.oneOf(TARGETS)),
    /** GitBook: CSP sources its injected scripts need. Script injection does not run here (spec 2.5). */
    contentSecurityPolicy: s.optional(cspSchema()),
    /** GitBook: per-environment overrides for its publishing tool; not read here (rules.ts warns). */
    envs: s.optional(s.record(s.any())),
  });
}

const platformSchema = manifestSchemaFor('platform');
const gitbookSchema = manifestSchemaFor('gitbook');
export const manifestSchema = platformSchema;
export const manifestSchemaOf = (dialect: ManifestDialect) => (dialect === 'gitbook' ? gitbookSchema : platformSchema);

/** A validated manifest. `secrets` holds the references as written; resolved values are returned apart. */
export type Manifest = s.Infer<typeof manifestSchema>;
