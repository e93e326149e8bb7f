/**
 * Load config.yaml: read it (or use the embedded defaults), load `.env` beside it, interpolate
 * `${{ env.NAME }}`, validate against the schema, and resolve relative paths against the file's folder.
 */
import { existsSync, readFileSync, statSync } from 'node:fs';
import { dirname, isAbsolute, resolve } from 'node:path';
import { SwitchyardError, type Problem } from '../errors.ts';
import { formatPath, isPlainObject, validate, type Schema } from '../schema/index.ts';
import { parseYaml } from '../schema/yaml.ts';
import { interpolate, readDotenv } from './env.ts';
import { configSchema, type Config } from './schema.ts';

export { configSchema, CRON_HINT, type Config } from './schema.ts';

export interface LoadedConfig extends Config {
  /** The file the settings came from, or `null` for the embedded defaults. */
  source: string | null;
  /** `server.public_url` resolved (never empty), without a trailing slash. */
  publicUrl: string;
}

export const DEFAULT_CONFIG_FILE = 'config.yaml';

/**
 * `path` given: that file must exist. Not given: `./config.yaml` when present, else the embedded
 * defaults (relative paths then resolve against the working directory).
 */
export function loadConfig(opts: { path?: string; env?: NodeJS.ProcessEnv; cwd?: string } = {}): LoadedConfig {
  const cwd = opts.cwd ?? process.cwd();
  const explicit = opts.path !== undefined;
  const file = resolve(cwd, opts.path ?? DEFAULT_CONFIG_FILE);
  if (!existsSync(file)) {
    if (explicit)
      throw new SwitchyardError('config_invalid', `config file ${file} does not exist`, {
        hint: 'pass an existing file with --config, or leave it out to use ./config.yaml or the embedded defaults; `switchyard init` writes a commented config.yaml',
      });
    return finish(parseConfig({}, null, { ...readDotenv(resolve(cwd, '.env')), ...(opts.env ?? process.env) }), cwd, null);
  }
  if (!statSync(file).isFile())
    throw new SwitchyardError('config_invalid', `config path ${file} is not a file`, {
      hint: 'pass the path of a config.yaml file with --config',
    });
  const text = readFileSync(file, 'utf8');
  const env = { ...readDotenv(resolve(dirname(file), '.env')), ...(opts.env ?? process.env) };
  return finish(parseConfigText(text, file, env), dirname(file), file);
}

/** Validate config text; every problem at once, each with file:line:col and the key path. */
export function parseConfigText(text: string, file: string, env: Record<string, string | undefined>): Config {
  const src = parseYaml(text, file);
  if (src.syntaxProblems.length) throw new SwitchyardError('config_invalid', `${file} is not valid YAML`, { problems: src.syntaxProblems });
  const problems: Problem[] = [];
  const interpolated = interpolate(src.value ?? {}, env, (name, path) => {
    const { line, col } = src.locate(path);
    problems.push({
      where: `${file}:${line}:${col}`,
      message: `${formatPath(path)}: environment variable ${name} is not set`,
      hint: `set ${name} in the environment or in a .env file beside ${file}`,
    });
  });
  const result = validate(configSchema, scalarsFromStrings(configSchema, interpolated));
  if (!result.ok) problems.push(...src.toProblems(result.issues));
  else if (result.value.server.console_url && result.value.server.public_url && sameOrigin(result.value.server.console_url, result.value.server.public_url))
    problems.push(
      ...src.toProblems([
        {
          path: ['server', 'console_url'],
          message: `"${result.value.server.console_url}" is the origin of server.public_url: integration pages served there would run with the console's authority`,
          hint: 'give the console its own host name (admin.example.com beside hooks.example.com), or leave console_url empty to reach it at http://localhost:<port>',
        },
      ]),
    );
  if (problems.length || !result.ok)
    throw new SwitchyardError('config_invalid', `${file} has ${problems.length} problem${problems.length === 1 ? '' : 's'}`, {
      problems,
      hint: 'every key with its default and what it does: `switchyard init --print` (and docs/configuration.md)',
    });
  return result.value;
}

/**
 * `port: "${{ env.PORT }}"` interpolates to a string: where the schema wants a number or a boolean,
 * a string that spells one is read as one (config.yaml only; the API stays strict).
 */
function scalarsFromStrings(schema: Schema<unknown>, v: unknown): unknown {
  const shape = (schema as { shape?: Record<string, Schema<unknown>> }).shape;
  if (shape && isPlainObject(v)) {
    const out: Record<string, unknown> = { ...v };
    for (const [k, sub] of Object.entries(shape)) if (k in out) out[k] = scalarsFromStrings(sub, out[k]);
    return out;
  }
  if (typeof v !== 'string') return v;
  const t = v.trim();
  if (schema.kind === 'number' && /^-?\d+(\.\d+)?$/.test(t)) return Number(t);
  if (schema.kind === 'boolean' && (t === 'true' || t === 'false')) return t === 'true';
  return v;
}

function parseConfig(value: unknown, file: string | null, env: Record<string, string | undefined>): Config {
  return parseConfigText(JSON.stringify(value), file ?? '(embedded defaults)', env);
}

function finish(config: Config, base: string, source: string | null): LoadedConfig {
  const abs = (p: string) => (isAbsolute(p) ? p : resolve(base, p));
  const tls = config.server.tls;
  const c = {
    ...config,
    server: { ...config.server, tls: { cert: tls.cert && abs(tls.cert), key: tls.key && abs(tls.key) } },
    data_dir: abs(config.data_dir),
    integrations_dir: abs(config.integrations_dir),
  };
  return { ...c, source, publicUrl: publicUrlOf(c) };
}

export function publicUrlOf(c: Config, port = c.server.port): string {
  if (c.server.public_url) return c.server.public_url.replace(/\/+$/, '');
  const host = c.server.host === '0.0.0.0' || c.server.host === '::' ? '127.0.0.1' : c.server.host;
  return `${listenerScheme(c)}://${host.includes(':') ? `[${host}]` : host}:${port}`;
}

/** What the server's own port speaks: https with server.tls, else http. */
export function listenerScheme(c: Config): 'http' | 'https' {
  return c.server.tls.cert ? 'https' : 'http';
}

function sameOrigin(a: string, b: string): boolean {
  return new URL(a).origin === new URL(b).origin;
}

/**
 * Where the web console lives: `server.console_url`, else the server's port on a loopback name that
 * is not the public endpoints' (localhost and 127.0.0.1 are different sites to a browser, so no
 * cookie or script of one reaches the other). Integration content is never served on this origin.
 */
export function consoleUrlOf(c: Config & { publicUrl: string }): string {
  if (c.server.console_url) return c.server.console_url.replace(/\/+$/, '');
  const publicHost = new URL(c.publicUrl).hostname;
  return `${listenerScheme(c)}://${publicHost === 'localhost' ? '127.0.0.1' : 'localhost'}:${c.server.port}`;
}

/** The embedded defaults, as a validated config. */
export function defaultConfig(): Config {
  return parseConfig({}, null, {});
}
