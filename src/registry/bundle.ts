/**
 * Bundle an integration's script into one ES module for the sandbox, with esbuild: TypeScript, JSX
 * (compiled to `jsx()`/`jsxs()`/`Fragment` from `@switchyard/runtime/jsx-runtime`), relative imports
 * and npm packages from the integration's own node_modules. `@switchyard/runtime` and its subpaths
 * stay as imports: the sandbox provides them. GitBook's `@gitbook/runtime` is the same library under
 * GitBook's name: its imports become `@switchyard/runtime` ones, even when the npm package is
 * installed (that package is a Worker entry point, not a library the sandbox can run).
 *
 * Inside the single executable esbuild runs the binary named by ESBUILD_BINARY_PATH; the JS API is
 * the same, so nothing here changes.
 */
import { createHash } from 'node:crypto';
import { realpathSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { builtinModules } from 'node:module';
import { isAbsolute, join, relative, sep } from 'node:path';
import type { BuildFailure, Message, Plugin } from 'esbuild';
import type { Problem } from '../errors.ts';
import { confineSourceMaps, SOURCE_MAP_LIMIT, sourceMapRules } from './source-maps.ts';
import { VERSION } from '../version.ts';
import type { BundleCache, CachedBuild } from './bundle-cache.ts';

export const RUNTIME_MODULE = '@switchyard/runtime';
const RUNTIME_IMPORT = /^@switchyard\/runtime(\/.*)?$/;
const GITBOOK_RUNTIME_IMPORT = /^@gitbook\/runtime(\/.*)?$/;
/** GitBook's way to ship a script or style sheet as text (`import script from './x.raw.js'`). */
const RAW_TEXT_FILE = /\.raw\.(js|css)$/;
/** Where esbuild is told the bundle goes (nothing is written): its folder anchors the source map's paths. */
const OUTPUT_FILE = '.switchyard-bundle.js';

export interface Bundle {
  code: string;
  /**
   * The bundle's source map (JSON text, sources relative to the integration folder, no sources'
   * content). Kept on the host to turn stack traces back into the author's files; never handed to
   * the sandbox.
   */
  sourceMap?: string;
  /** Content hash of the code: equal code, equal version. */
  version: string;
  /** Absolute paths of the files that went into the bundle. */
  inputs: string[];
  /** Its key in the bundle cache, when it is stored there. */
  key?: string;
  /** Read back from the bundle cache rather than built. */
  cached?: boolean;
}

export interface BundleResult {
  bundle?: Bundle;
  problems: Problem[];
}

/** A short content hash: the version the registry, the sandbox and the API show. */
export function contentHash(code: string): string {
  return createHash('sha256').update(code).digest('hex').slice(0, 16);
}

function within(dir: string, file: string): boolean {
  const rel = relative(dir, file);
  return rel !== '' && !rel.startsWith(`..${sep}`) && rel !== '..' && !isAbsolute(rel);
}

const builtins = new Set(builtinModules.flatMap((m) => [m, `node:${m}`]));

/**
 * Imports resolve only inside the integration folder: its own files and its own node_modules.
 * Failure policy: fail closed — a package found only in a parent folder (such as the server's own
 * node_modules) is refused, so a script bundles the same on every machine and in the executable.
 */
function confine(dir: string, label: string): Plugin {
  // esbuild resolves symlinks: a folder that is itself a symlink has its files under its real path.
  let real = dir;
  try {
    real = realpathSync(dir);
  } catch {
    // a folder that vanished fails the build anyway
  }
  return {
    name: 'switchyard-confine',
    setup(build) {
      build.onResolve({ filter: RUNTIME_IMPORT }, (args) => ({ path: args.path, external: true }));
      build.onResolve({ filter: GITBOOK_RUNTIME_IMPORT }, (args) => ({ path: args.path.replace('@gitbook/runtime', RUNTIME_MODULE), external: true }));
      build.onResolve({ filter: /.*/ }, async (args) => {
        if (args.pluginData?.confined || args.kind === 'entry-point') return undefined;
        const r = await build.resolve(args.path, { kind: args.kind, resolveDir: args.resolveDir, importer: args.importer, pluginData: { confined: true } });
        if (!r.errors.length && r.path && (within(dir, r.path) || within(real, r.path) || r.external)) return r;
        const relativeImport = args.path.startsWith('.') || isAbsolute(args.path);
        if (relativeImport) {
          if (r.errors.length || !r.path) return { errors: r.errors.length ? r.errors : [{ text: `cannot resolve "${args.path}"` }] };
          return {
            errors: [
              {
                text: `"${args.path}" is outside the integration folder`,
                detail: 'an integration folder is self-contained: copy the file into it',
              },
            ],
          };
        }
        if (builtins.has(args.path) || args.path.startsWith('node:'))
          return {
            errors: [
              {
                text: `"${args.path}" is a Node.js module; integration scripts run in a sandbox with Web APIs only`,
                detail: 'use fetch, crypto.subtle, URL, TextEncoder/TextDecoder, or a package written for the browser',
              },
            ],
          };
        const pkg = args.path.startsWith('@') ? args.path.split('/').slice(0, 2).join('/') : args.path.split('/')[0];
        return {
          errors: [
            {
              text: `package "${pkg}" is not installed in the integration folder`,
              detail: `run \`npm install ${pkg}\` in ${label}`,
            },
          ],
        };
      });
    },
  };
}

/** `*.raw.js` / `*.raw.css` files are imported as their text, as GitBook's bundler does. */
const rawText: Plugin = {
  name: 'switchyard-raw-text',
  setup(build) {
    build.onLoad({ filter: RAW_TEXT_FILE }, async (args) => {
      return { contents: await readFile(args.path, 'utf8'), loader: 'text' };
    });
  },
};

/**
 * esbuild's messages said in this program's words where a user meets them. The plugin's own
 * resolve calls make esbuild repeat a message (the tsconfig.json one, once per import) with a note
 * naming the plugin: that note is never a hint, and asProblems() keeps one of each.
 */
function ownWords(text: string): { message: string; hint?: string } | undefined {
  const base = /^Cannot find base config file "(.+)"$/.exec(text);
  if (base)
    return {
      message: `extends "${base[1]}", which is not in the integration folder: its compiler options are not applied`,
      hint: "harmless for a folder from GitBook's catalogue (it extends GitBook's own workspace config): JSX and the runtime are set here. If the code needs those options (paths, decorators), copy them into this file",
    };
  return undefined;
}

const PLUGIN_NOTE = /^The plugin "switchyard-[\w-]+" was triggered by this import$/;

function toProblem(m: Message, dir: string, label: string, severity: 'error' | 'warning'): Problem {
  const loc = m.location;
  const file = loc?.file ? (isAbsolute(loc.file) ? loc.file : join(dir, loc.file)) : undefined;
  const shown = file ? (within(dir, file) ? join(label, relative(dir, file)) : file) : label;
  const detail = typeof m.detail === 'string' ? m.detail : undefined;
  const own = ownWords(m.text);
  const hint = own ? own.hint : (detail ?? m.notes.find((n) => n.text && !PLUGIN_NOTE.test(n.text))?.text);
  return {
    where: loc ? `${shown}:${loc.line}:${loc.column + 1}` : shown,
    message: own?.message ?? m.text,
    ...(hint ? { hint } : {}),
    severity,
  };
}

/** esbuild's messages as problems, each said once. */
function asProblems(messages: Message[], dir: string, label: string, severity: 'error' | 'warning'): Problem[] {
  const seen = new Set<string>();
  const out: Problem[] = [];
  for (const m of messages) {
    const p = toProblem(m, dir, label, severity);
    const key = `${p.where}\0${p.message}`;
    if (seen.has(key)) continue;
    seen.add(key);
    out.push(p);
  }
  return out;
}

/**
 * Bundle `entry` (absolute, inside `dir`). `label` is how `dir` is shown in problems. Problems
 * carry file:line:col of the offending import or syntax. With `cache`, an unchanged folder's
 * bundle is read back instead of built (see bundle-cache.ts); `bundle.cached` says which.
 */
export async function bundleScript(opts: { dir: string; entry: string; label?: string; maxBytes?: number; cache?: BundleCache }): Promise<BundleResult> {
  const { dir, entry } = opts;
  const label = opts.label ?? dir;
  const req = opts.cache ? { dir, entry, label, bundler: await bundlerIdentity() } : undefined;
  const hit = req && opts.cache!.lookup(req);
  let built: CachedBuild & { key?: string };
  if (hit) built = hit;
  else {
    const startedAt = Date.now();
    const r = await build(dir, entry, label);
    if ('problems' in r) return r;
    built = r;
    if (req) built.key = opts.cache!.store(req, r, startedAt);
  }
  const problems = [...built.warnings];
  const size = Buffer.byteLength(built.code);
  if (opts.maxBytes !== undefined && size > opts.maxBytes) {
    problems.push({
      where: join(label, relative(dir, entry)),
      message: `the bundled script is ${formatBytes(size)}, over the ${formatBytes(opts.maxBytes)} limit (sandbox.script_size)`,
      hint: 'drop large dependencies, or raise sandbox.script_size in config.yaml',
      severity: 'error',
    });
    return { problems };
  }
  return {
    bundle: {
      code: built.code,
      version: contentHash(built.code),
      inputs: built.inputs,
      ...(built.sourceMap !== undefined ? { sourceMap: built.sourceMap } : {}),
      ...(built.key ? { key: built.key } : {}),
      cached: Boolean(hit),
    },
    problems,
  };
}

/** Run esbuild: the code, its inputs and warnings, or every problem. */
async function build(dir: string, entry: string, label: string): Promise<CachedBuild | { problems: Problem[] }> {
  const esbuild = await import('esbuild');
  // The source map's `sources` are relative to the output file's folder: put it (never written)
  // in the integration folder, as its real path (esbuild resolves symlinks), so they read
  // `src/handler.ts`.
  let outDir = dir;
  try {
    outDir = realpathSync(dir);
  } catch {
    // a folder that vanished fails the build anyway
  }
  let result;
  try {
    result = await esbuild.build({
      entryPoints: [entry],
      absWorkingDir: dir,
      bundle: true,
      write: false,
      format: 'esm',
      platform: 'neutral',
      target: 'es2022',
      // As Workers bundlers do: a package's browser build first (it uses Web APIs, not Node's).
      mainFields: ['browser', 'module', 'main'],
      conditions: ['worker', 'browser'],
      jsx: 'automatic',
      jsxImportSource: RUNTIME_MODULE,
      // MODE: GitBook's build-time constant ("production" once published).
      define: { 'process.env.NODE_ENV': '"production"', MODE: '"production"' },
      charset: 'utf8',
      legalComments: 'none',
      // External: the code carries no sourceMappingURL comment, so the version (a hash of the code)
      // does not depend on the map. Without the sources' text: positions are all it is used for.
      sourcemap: 'external',
      sourcesContent: false,
      outfile: join(outDir, OUTPUT_FILE),
      metafile: true,
      logLevel: 'silent',
      plugins: [confine(dir, label), rawText, confineSourceMaps((file) => within(dir, file) || within(outDir, file))],
    });
  } catch (e) {
    const failure = e as Partial<BuildFailure>;
    if (!Array.isArray(failure.errors)) throw e;
    return {
      problems: [...asProblems(failure.errors, dir, label, 'error'), ...asProblems(failure.warnings ?? [], dir, label, 'warning')],
    };
  }
  const warnings = asProblems(result.warnings, dir, label, 'warning');
  const code = result.outputFiles.find((f) => !f.path.endsWith('.map'))?.text ?? '';
  let sourceMap = result.outputFiles.find((f) => f.path.endsWith('.map'))?.text;
  const size = Buffer.byteLength(code);
  // A map is kept in memory beside each loaded version and read on its first error: a larger one
  // (a big bundle's, or one an input map blew up) is dropped, and traces point at the bundle.
  if (sourceMap !== undefined && sourceMap.length > SOURCE_MAP_LIMIT) {
    warnings.push({
      where: join(label, relative(dir, entry)),
      message: `the source map is ${formatBytes(sourceMap.length)}, over the ${formatBytes(SOURCE_MAP_LIMIT)} kept beside a bundle (this one is ${formatBytes(size)}): it is not kept, and stack traces point at the bundle`,
      hint: 'drop large dependencies, or look for a sourceMappingURL comment whose map lists many or long sources',
      severity: 'warning',
    });
    sourceMap = undefined;
  }
  return {
    code,
    inputs: Object.keys(result.metafile?.inputs ?? {}).map((f) => (isAbsolute(f) ? f : join(dir, f))),
    warnings,
    ...(sourceMap !== undefined ? { sourceMap } : {}),
  };
}

let identity: Promise<string> | undefined;

/**
 * What makes two builds of the same files equal: this program's version, esbuild's, and the source
 * text of the functions that build (options, plugins, how problems are worded, the source-map
 * rules), so any change to them makes every cached bundle a miss without anyone remembering to bump
 * a number.
 */
export function bundlerIdentity(): Promise<string> {
  identity ??= import('esbuild').then((esbuild) =>
    createHash('sha256')
      .update(
        [VERSION, esbuild.version, build, confine, rawText.setup, toProblem, ownWords, PLUGIN_NOTE, asProblems, within, ...sourceMapRules]
          .map(String)
          .join('\0'),
      )
      .digest('hex')
      .slice(0, 32),
  );
  return identity;
}

export function formatBytes(n: number): string {
  if (n < 1024) return `${n} bytes`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} kB`;
  return `${(n / 1024 / 1024).toFixed(1)} MB`;
}
