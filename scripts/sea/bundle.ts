/**
 * Bundle the program into ONE CommonJS file for the executable (Node's SEA needs a CommonJS main).
 * Native loaders are swapped for shims that load the unpacked addons (src/native/shims), and the
 * build fails on anything that cannot work from inside one file.
 */
import { build, type Message, type Plugin } from 'esbuild';
import { join } from 'node:path';

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

export interface BundleResult {
  bytes: number;
  warnings: string[];
}

export async function bundleProgram(root: string, outfile: string): Promise<BundleResult> {
  const replaced = new Set<string>();
  const result = await build({
    absWorkingDir: root,
    entryPoints: [join(root, 'scripts/sea/entry.ts')],
    outfile,
    bundle: true,
    platform: 'node',
    format: 'cjs',
    target: 'node24',
    // src/main.ts runs the CLI when it is the main module; in the bundle the entry does that.
    define: { 'import.meta.main': 'false' },
    minifyWhitespace: true,
    minifySyntax: true,
    keepNames: true,
    legalComments: 'none',
    metafile: true,
    logLevel: 'silent',
    plugins: [nativeShims(root, replaced)],
  }).catch((e: { errors?: Message[] }) => {
    if (!e.errors) throw e;
    throw new Error(`bundling failed:\n  ${e.errors.map(formatMessage).join('\n  ')}`);
  });
  // import.meta.url & co. are empty in a CommonJS bundle: our code reading files beside its source
  // would break only inside the executable, so it breaks the build instead. (Libraries use it on
  // paths we do not take, such as h3's deprecated toNodeHandler export.)
  const ours = result.warnings.filter((w) => w.id === 'empty-import-meta' && !(w.location?.file ?? '').includes('node_modules/'));
  if (ours.length)
    throw new Error(
      `import.meta has no value inside the executable (one CommonJS file); embed the file's content instead of reading it beside the source:\n  ${ours.map(formatMessage).join('\n  ')}`,
    );
  const inputs = Object.keys(result.metafile.inputs);
  for (const l of nativeLoaders) {
    const bundled = inputs.some((i) => i.includes(`node_modules/${l.pkg}/`));
    if (bundled && !replaced.has(l.pkg))
      throw new Error(`${l.pkg} is bundled but its native loader was not replaced: its internals changed; update scripts/sea/bundle.ts`);
  }
  const leftover = inputs.find((i) => i.includes('node_modules/node-gyp-build/') || i.includes('node_modules/bindings/'));
  if (leftover) throw new Error(`a native-addon loader is bundled (${leftover}): it cannot find addons inside the executable`);
  const warnings = result.warnings.filter((w) => !isHarmless(w)).map(formatMessage);
  return { bytes: result.metafile.outputs[Object.keys(result.metafile.outputs)[0]]!.bytes, warnings };
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
