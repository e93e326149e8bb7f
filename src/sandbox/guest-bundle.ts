/**
 * The guest library as source text, built once per process with esbuild from src/sandbox/guest/:
 * `core` (Web APIs + runtime library, evaluated in every new isolate) and the lazily loaded
 * `extras` (IDNA tables, legacy multi-byte encodings) that a guest pulls in on first use.
 *
 * A packaged build can skip esbuild at run time: define SWITCHYARD_GUEST_BUNDLE (esbuild `define`)
 * as the JSON of `await buildGuestBundle()`.
 */
import { createHash } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { dirname, join } from 'node:path';

export interface GuestBundle {
  core: string;
  extras: Record<string, string>;
}

declare const SWITCHYARD_GUEST_BUNDLE: GuestBundle | undefined;

const here = dirname(fileURLToPath(import.meta.url));
const guestDir = join(here, 'guest');
const root = join(here, '..', '..');

const aliases = {
  tr46: join(guestDir, 'vendor', 'tr46.ts'),
  '@exodus/bytes/whatwg.js': join(guestDir, 'vendor', 'percent.ts'),
  // whatwg-url imports this for its side effect (multi-byte tables); web/encoding.ts loads them lazily.
  '@exodus/bytes/encoding.js': join(guestDir, 'vendor', 'empty.ts'),
};

// whatwg-url's lib/encoding.js builds a TextEncoder at load, before the guest defines globals.
const redirectUrlEncoding = {
  name: 'whatwg-url-encoding',
  setup(build: any) {
    build.onResolve({ filter: /^\.\/encoding(\.js)?$/ }, (args: { importer: string }) =>
      /whatwg-url[\\/]lib/.test(args.importer) ? { path: join(guestDir, 'vendor', 'url-encoding.ts') } : undefined,
    );
  },
};

async function buildOne(entry: string, opts: { globalName?: string; alias?: boolean; minify: boolean }): Promise<string> {
  const esbuild = await import('esbuild');
  const out = await esbuild.build({
    entryPoints: [entry],
    bundle: true,
    write: false,
    format: 'iife',
    globalName: opts.globalName,
    platform: 'neutral',
    mainFields: ['module', 'main'],
    target: 'es2022',
    minify: opts.minify,
    legalComments: 'none',
    absWorkingDir: root,
    alias: opts.alias ? aliases : undefined,
    plugins: opts.alias ? [redirectUrlEncoding] : [],
    logLevel: 'silent',
  });
  return out.outputFiles[0].text;
}

/**
 * Build the guest library from source (about 0.2 s). `minify: false` keeps its names, for
 * a profile (scripts/bench/guest-dispatch.ts); isolates always run the minified build.
 */
export async function buildGuestBundle(opts: { minify?: boolean } = {}): Promise<GuestBundle> {
  const minify = opts.minify ?? true;
  const [core, idna, encodings] = await Promise.all([
    buildOne(join(guestDir, 'index.ts'), { alias: true, minify }),
    buildOne(join(guestDir, 'vendor', 'extra-idna.ts'), { globalName: '__extra', minify }),
    buildOne(join(guestDir, 'vendor', 'extra-encodings.ts'), { globalName: '__extra', minify }),
  ]);
  // Extras are evaluated with an indirect eval whose value is the module's exports.
  const wrap = (code: string) => `(function(){${code};return __extra;})()`;
  return { core, extras: { idna: wrap(idna), encodings: wrap(encodings) } };
}

let cached: Promise<GuestBundle> | undefined;

/** The guest library for this process: prebuilt when packaged, else built once on first use. */
export function guestBundle(): Promise<GuestBundle> {
  if (typeof SWITCHYARD_GUEST_BUNDLE !== 'undefined' && SWITCHYARD_GUEST_BUNDLE) return Promise.resolve(SWITCHYARD_GUEST_BUNDLE);
  cached ??= buildGuestBundle();
  return cached;
}

let libraryId: Promise<string> | undefined;

/**
 * A short hash of the guest library this process runs: what a script exports is read by it, so
 * anything remembered about a script (see runtime/exports-cache.ts) is remembered per library.
 */
export function guestLibraryId(): Promise<string> {
  libraryId ??= guestBundle().then((b) => {
    const h = createHash('sha256').update(b.core);
    for (const k of Object.keys(b.extras).sort()) h.update('\0').update(k).update('\0').update(b.extras[k]);
    return h.digest('hex').slice(0, 16);
  });
  return libraryId;
}
