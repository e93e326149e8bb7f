/**
 * Bundle the program into ONE CommonJS file for the executable (Node's SEA needs a CommonJS main).
 * Native loaders are swapped for shims that load the unpacked addons (src/native/shims); a bundled
 * native loader that was not swapped fails the build; import.meta paths get virtual values.
 */
import { build, type Message, type Plugin } from 'esbuild';
import { readFile } from 'node:fs/promises';
import { join, relative } from 'node:path';

/** Library files whose job is to find a .node file on disk, and the shim each is replaced with. */
const nativeLoaders = [
  { pkg: 'better-sqlite3', filter: /[\\/]node_modules[\\/]better-sqlite3[\\/]lib[\\/]binding\.js$/, shim: 'better-sqlite3-binding.cjs' },
  { pkg: 'isolated-vm', filter: /[\\/]node_modules[\\/]isolated-vm[\\/]isolated-vm\.js$/, shim: 'isolated-vm.cjs' },
];

function nativeShims(root: string, replaced: Set<string>): Plugin {
  return {
    name: 'switchyard-native-shims',
    setup(b) {
      for (const l of nativeLoaders) {
        const shim = join(root, 'src/native/shims', l.shim);
        b.onLoad({ filter: l.filter }, () => {
          replaced.add(l.pkg);
          return { contents: `module.exports = require(${JSON.stringify(shim)});`, loader: 'js', resolveDir: join(root, 'src/native/shims') };
        });
      }
    },
  };
}

/** Where our modules "are" inside the executable: a folder that exists on no machine. */
export const VIRTUAL_ROOT = '/switchyard-executable';

/**
 * import.meta.url/dirname/filename of our modules become their path under VIRTUAL_ROOT, so code
 * that only computes paths at load time still loads, and code that reads a file beside its source
 * fails with ENOENT on a path that says where it looked (embed such files at build time instead).
 * Each use is reported in the build output.
 */
function importMetaPaths(root: string, uses: string[]): Plugin {
  return {
    name: 'switchyard-import-meta',
    setup(b) {
      b.onLoad({ filter: /\.[cm]?tsx?$/ }, async (args) => {
        const rel = relative(root, args.path);
        if (rel.startsWith('..') || rel.split(/[\\/]/).includes('node_modules')) return undefined;
        const source = await readFile(args.path, 'utf8');
        if (!/\bimport\.meta\.(url|dirname|filename)\b/.test(source)) return undefined;
        const file = `${VIRTUAL_ROOT}/${rel.split('\\').join('/')}`;
        const values: Record<string, string> = { url: `file://${file}`, dirname: file.slice(0, file.lastIndexOf('/')), filename: file };
        const contents = source.replace(/\bimport\.meta\.(url|dirname|filename)\b/g, (_m, key: string, offset: number) => {
          uses.push(`${rel}:${source.slice(0, offset).split('\n').length}: import.meta.${key}`);
          return JSON.stringify(values[key]);
        });
        return { contents, loader: args.path.endsWith('x') ? 'tsx' : 'ts' };
      });
    },
  };
}

export interface BundleResult {
  bytes: number;
  warnings: string[];
  /** Our uses of import.meta paths (file:line), which point under VIRTUAL_ROOT in the executable. */
  importMetaUses: string[];
}

/** `defines`: esbuild defines of values embedded at build time (identifier -> JS expression text). */
export async function bundleProgram(root: string, outfile: string, defines: Record<string, string> = {}): Promise<BundleResult> {
  const replaced = new Set<string>();
  const importMetaUses: string[] = [];
  const result = await build({
    absWorkingDir: root,
    entryPoints: [join(root, 'scripts/sea/entry.ts')],
    outfile,
    bundle: true,
    platform: 'node',
    format: 'cjs',
    target: 'node24',
    // src/main.ts runs the CLI when it is the main module; in the bundle the entry does that.
    define: { ...defines, 'import.meta.main': 'false' },
    minifyWhitespace: true,
    minifySyntax: true,
    keepNames: true,
    legalComments: 'none',
    metafile: true,
    logLevel: 'silent',
    plugins: [nativeShims(root, replaced), importMetaPaths(root, importMetaUses)],
  }).catch((e: { errors?: Message[] }) => {
    if (!e.errors) throw e;
    throw new Error(`bundling failed:\n  ${e.errors.map(formatMessage).join('\n  ')}`);
  });
  const inputs = Object.keys(result.metafile.inputs);
  for (const l of nativeLoaders) {
    const bundled = inputs.some((i) => i.includes(`node_modules/${l.pkg}/`));
    if (bundled && !replaced.has(l.pkg))
      throw new Error(`${l.pkg} is bundled but its native loader was not replaced: its internals changed; update scripts/sea/bundle.ts`);
  }
  const leftover = inputs.find((i) => i.includes('node_modules/node-gyp-build/') || i.includes('node_modules/bindings/'));
  if (leftover) throw new Error(`a native-addon loader is bundled (${leftover}): it cannot find addons inside the executable`);
  const warnings = result.warnings.filter((w) => !isHarmless(w)).map(formatMessage);
  return { bytes: result.metafile.outputs[Object.keys(result.metafile.outputs)[0]]!.bytes, warnings, importMetaUses };
}

/** Known library warnings on code paths the program does not take inside the executable. */
function isHarmless(m: Message): boolean {
  const file = m.location?.file ?? '';
  // esbuild's JS API resolves its own package; unused since ESBUILD_BINARY_PATH is set.
  if (m.id === 'require-resolve-not-external' && file.includes('node_modules/esbuild/')) return true;
  return m.id === 'empty-import-meta' && file.includes('node_modules/');
}

function formatMessage(m: Message): string {
  const at = m.location ? `${m.location.file}:${m.location.line}:${m.location.column}: ` : '';
  return `${at}${m.text}`;
}
