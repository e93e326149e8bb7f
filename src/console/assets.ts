/**
 * The console's browser bundle, built once per process on first use and kept in memory.
 *
 * In a checkout it is built from src/console/web/ by esbuild (build.ts, about 0.1 s). The single
 * executable has no source files: its build defines CONSOLE_ASSETS_DEFINE (an esbuild `define`)
 * as the JSON of `await buildConsoleAssets()`, and then nothing is built at run time.
 */
export interface ConsoleAssets {
  /** Content hash of js + css: the asset URLs carry it, so they can be cached forever. */
  hash: string;
  js: string;
  css: string;
  sizes: { js: number; css: number; jsGzip: number; cssGzip: number };
  buildMs: number;
}

/** The name the executable's build defines to embed the prebuilt assets. */
export const CONSOLE_ASSETS_DEFINE = 'SWITCHYARD_CONSOLE_ASSETS';
declare const SWITCHYARD_CONSOLE_ASSETS: ConsoleAssets | undefined;

let cached: Promise<ConsoleAssets> | undefined;

/**
 * Loaded by a computed specifier so that bundlers leave build.ts (and its esbuild import and source
 * paths) out of the executable, where the assets come prebuilt.
 */
const builderModule = ['.', 'build.ts'].join('/');

export function consoleAssets(): Promise<ConsoleAssets> {
  if (typeof SWITCHYARD_CONSOLE_ASSETS !== 'undefined' && SWITCHYARD_CONSOLE_ASSETS) return Promise.resolve(SWITCHYARD_CONSOLE_ASSETS);
  cached ??= (import(builderModule) as Promise<typeof import('./build.ts')>)
    .then((m) => m.buildConsoleAssets())
    .catch((e: unknown) => {
      // Not cached: the next request tries again (a source file may have been mid-save).
      cached = undefined;
      throw e;
    });
  return cached;
}
