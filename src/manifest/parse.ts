/**
 * Read and validate a manifest: every problem at once, each with file:line:col and a hint. Secrets
 * (`${{ env.NAME }}`) are resolved apart from the manifest so their values never sit in it.
 */
import { existsSync, readFileSync } from 'node:fs';
import { extname, isAbsolute, join, relative, resolve } from 'node:path';
import type { Problem } from '../errors.ts';
import { ENV_REF, envValue, readDotenv } from '../config/env.ts';
import { formatPath, isPlainObject, validate, type Issue, type Path } from '../schema/index.ts';
import { parseYaml, type YamlSource } from '../schema/yaml.ts';
import { imageInfo, isSvg, resolveInside } from './assets.ts';
import { crossFieldIssues } from './rules.ts';
import { manifestSchemaOf, NAME_CHARACTERS, NAME_MAX, SCRIPT_EXTENSIONS, type Manifest, type ManifestDialect } from './schema.ts';

export const MANIFEST_FILE = 'platform-manifest.yaml';
/** GitBook's name for the same file: read when a folder has no platform-manifest.yaml. */
export const GITBOOK_MANIFEST_FILE = 'gitbook-manifest.yaml';

/**
 * The manifest file of a folder and its dialect: `platform-manifest.yaml` when present, else
 * `gitbook-manifest.yaml`; the spec's name when neither exists (so "has no ..." names it).
 */
export function manifestFileOf(dir: string): { name: string; dialect: ManifestDialect } {
  if (!existsSync(join(dir, MANIFEST_FILE)) && existsSync(join(dir, GITBOOK_MANIFEST_FILE))) return { name: GITBOOK_MANIFEST_FILE, dialect: 'gitbook' };
  return { name: MANIFEST_FILE, dialect: 'platform' };
}

export interface ManifestResult {
  /** Set only when there is no error (warnings allowed). */
  manifest?: Manifest;
  /** Secret values resolved from the environment, by secret name. Never log these. */
  secrets: Record<string, string>;
  /** Errors and warnings (`severity`), ordered by position in the file. */
  problems: Problem[];
  /** The name the document claims, when it is a valid name even if other fields are wrong. */
  claimedName?: string;
  /** Which file was read: the spec's `platform-manifest.yaml` or GitBook's `gitbook-manifest.yaml`. */
  dialect?: ManifestDialect;
}

export interface LoadedManifestResult extends ManifestResult {
  /** Absolute path of the script entry point, when the manifest names one that exists. */
  scriptFile?: string;
}

interface Analysis extends ManifestResult {
  src?: YamlSource;
  raw?: Record<string, unknown>;
}

export function isError(p: Problem): boolean {
  return p.severity !== 'warning';
}

const REQUIRED_KEYS = 'name, title, description, organization, visibility and scopes';

function positionOf(where: string): [number, number] {
  const m = /:(\d+):(\d+)$/.exec(where);
  return m ? [Number(m[1]), Number(m[2])] : [0, 0];
}

function byPosition(a: Problem, b: Problem): number {
  const [la, ca] = positionOf(a.where);
  const [lb, cb] = positionOf(b.where);
  return la - lb || ca - cb;
}

/** Where in `text` an offset is, as `file:line:col`. */
function analyze(text: string, file: string, env: Record<string, string | undefined>, envFileHint?: string, dialect: ManifestDialect = 'platform'): Analysis {
  const src = parseYaml(text, file);
  if (src.syntaxProblems.length) return { secrets: {}, problems: src.syntaxProblems.map((p) => ({ ...p, severity: 'error' as const })), src };
  const raw = src.value;
  if (raw === null || raw === undefined || raw === '')
    return {
      secrets: {},
      problems: [{ where: `${file}:1:1`, message: 'the manifest is empty', hint: `it needs at least ${REQUIRED_KEYS}`, severity: 'error' }],
      src,
    };
  if (!isPlainObject(raw))
    return {
      secrets: {},
      problems: [
        { where: `${file}:1:1`, message: 'the manifest must be a map of keys to values', hint: `it needs at least ${REQUIRED_KEYS}`, severity: 'error' },
      ],
      src,
    };

  const errors: Problem[] = [];
  const warnings: Problem[] = [];
  const asProblems = (issues: Issue[], severity: 'error' | 'warning') => src.toProblems(issues).map((p) => ({ ...p, severity }));

  const result = validate(manifestSchemaOf(dialect), raw);
  if (!result.ok) errors.push(...asProblems(result.issues, 'error'));
  const cross = crossFieldIssues(raw, dialect);
  errors.push(...asProblems(cross.errors, 'error'));
  warnings.push(...asProblems(cross.warnings, 'warning'));

  // Secrets: each value is resolved on its own so a missing variable names both the variable and the secret.
  const secrets: Record<string, string> = {};
  if (isPlainObject(raw.secrets)) {
    for (const [name, value] of Object.entries(raw.secrets)) {
      if (typeof value !== 'string') continue; // the schema reports it
      const path: Path = ['secrets', name];
      const missing: string[] = [];
      ENV_REF.lastIndex = 0;
      const hasRef = ENV_REF.test(value);
      const resolved = value.replace(ENV_REF, (_, v: string) => {
        const x = envValue(env, v);
        if (x === undefined) missing.push(v);
        return x ?? '';
      });
      for (const v of missing)
        errors.push(
          ...asProblems(
            [
              {
                path,
                message: `environment variable ${v} is not set (secret ${name} reads it)`,
                hint: `set ${v} in the environment${envFileHint ? ` or in ${envFileHint}` : ''}`,
              },
            ],
            'error',
          ).map((p) => ({ ...p, needsEnv: v })),
        );
      if (!hasRef)
        warnings.push(
          ...asProblems(
            [
              {
                path,
                message: `secret ${name} is written in the manifest itself`,
                hint: `use \${{ env.${name} }} and keep the value in the environment or a .env file`,
              },
            ],
            'warning',
          ),
        );
      if (!missing.length) secrets[name] = resolved;
    }
  }

  const problems = [...errors, ...warnings].sort(byPosition);
  const claimedName = typeof raw.name === 'string' && NAME_CHARACTERS.test(raw.name) && raw.name.length <= NAME_MAX ? raw.name : undefined;
  const ok = result.ok && errors.length === 0;
  return { manifest: ok ? result.value : undefined, secrets: ok ? secrets : {}, problems, claimedName, dialect, src, raw };
}

/** Validate manifest text. `file` is only used to say where problems are. */
export function parseManifest(text: string, file: string, env: Record<string, string | undefined>, dialect: ManifestDialect = 'platform'): ManifestResult {
  const { src: _src, raw: _raw, ...result } = analyze(text, file, env, undefined, dialect);
  return result;
}

/** A path as people read it: relative to the working directory when inside it. */
export function displayPath(p: string): string {
  const rel = relative(process.cwd(), p);
  return rel && !rel.startsWith('..') && !isAbsolute(rel) ? rel : p;
}

/**
 * Read `<dir>/platform-manifest.yaml` (or GitBook's `gitbook-manifest.yaml`), validate it, and check the files it names (script, icon,
 * preview images). A `.env` in the folder supplies secrets; `env` wins over it.
 */
export function loadManifest(dir: string, env: Record<string, string | undefined>, opts: { label?: string } = {}): LoadedManifestResult {
  const abs = resolve(dir);
  const label = opts.label ?? displayPath(abs);
  const { name: manifestName, dialect } = manifestFileOf(abs);
  const file = join(abs, manifestName);
  const fileLabel = join(label, manifestName);
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    const yml = existsSync(join(abs, 'platform-manifest.yml'));
    return {
      secrets: {},
      problems: [
        {
          where: fileLabel,
          message: code === 'ENOENT' ? `${label} has no ${MANIFEST_FILE}` : `${fileLabel} cannot be read (${code})`,
          hint: yml
            ? `rename platform-manifest.yml to ${MANIFEST_FILE}`
            : `every integration folder needs a ${MANIFEST_FILE} (or GitBook's ${GITBOOK_MANIFEST_FILE}); \`switchyard new <name>\` creates one`,
          severity: 'error',
        },
      ],
    };
  }

  const dotenv = join(label, '.env');
  const example = !existsSync(join(abs, '.env')) && existsSync(join(abs, '.env.example'));
  const a = analyze(
    text,
    fileLabel,
    { ...readDotenv(join(abs, '.env')), ...env },
    example ? `${dotenv} (copy ${dotenv}.example and fill it in)` : dotenv,
    dialect,
  );
  if (!a.src || !a.raw) return { manifest: a.manifest, secrets: a.secrets, problems: a.problems, claimedName: a.claimedName, dialect };
  const raw = a.raw;
  const src = a.src;
  const extra: Problem[] = [];
  const at = (path: Path, message: string, hint: string | undefined, severity: 'error' | 'warning' = 'error') => {
    const { line, col } = src.locate(path);
    extra.push({ where: `${fileLabel}:${line}:${col}`, message: `${formatPath(path)}: ${message}`, ...(hint ? { hint } : {}), severity });
  };

  let scriptFile: string | undefined;
  if (typeof raw.script === 'string' && raw.script) {
    const r = resolveInside(abs, raw.script, 'script');
    if (!r.ok) at(['script'], r.message, r.hint);
    else if (!(SCRIPT_EXTENSIONS as readonly string[]).includes(extname(r.file)))
      at(['script'], `"${raw.script}" is not a script the bundler reads`, `use one of: ${SCRIPT_EXTENSIONS.join(', ')}`);
    else scriptFile = r.file;
  }
  const image = (path: Path, rel: unknown, preview: boolean) => {
    if (typeof rel !== 'string' || !rel) return;
    const r = resolveInside(abs, rel, preview ? 'preview image' : 'icon');
    if (!r.ok) return at(path, r.message, r.hint);
    const size = imageInfo(r.file);
    // Spec 2.5: an icon is a "local asset path", of any format; GitBook's CLI publishes PNG only.
    if (!size && !preview && isSvg(r.file))
      return at(
        path,
        `"${rel}" is an SVG image; GitBook's CLI publishes PNG icons only`,
        'it is served here as an image (scripts in it do not run); to publish the integration on GitBook too, save it as PNG',
        'warning',
      );
    if (!size) return at(path, `"${rel}" is not a ${preview ? 'PNG or JPEG' : 'PNG, JPEG or SVG'} image`, 'save it as PNG');
    if (size.format === 'jpeg' && /\.png$/i.test(rel)) at(path, `"${rel}" is a JPEG image with a .png name`, 'rename it to .jpg, or save it as PNG', 'warning');
    if (preview && size.width !== size.height * 2)
      at(path, `"${rel}" is ${size.width} x ${size.height}, not 2:1`, 'preview images are shown at 2:1; 1600 x 800 pixels is recommended', 'warning');
  };
  image(['icon'], raw.icon, false);
  if (Array.isArray(raw.previewImages)) raw.previewImages.forEach((p, i) => image(['previewImages', i], p, true));

  const problems = [...a.problems, ...extra].sort(byPosition);
  const failed = problems.some(isError);
  return {
    manifest: failed ? undefined : a.manifest,
    secrets: failed ? {} : a.secrets,
    problems,
    claimedName: a.claimedName,
    dialect,
    ...(failed ? {} : scriptFile ? { scriptFile } : {}),
  };
}
