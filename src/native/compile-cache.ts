/**
 * Node's on-disk compile cache for runs from source (`npm start`, the CLI, the serving processes
 * and sandbox workers they start): the modules a command loads are compiled once and read back as
 * V8 code cache after that, which takes a CLI command from about 0.7 s to 0.4 s here. The cache
 * lives beside the executable's native files (cache.ts: this user's cache folder, or a private one
 * under the temp dir), never in Node's default shared `$TMPDIR/node-compile-cache`, where another
 * account could leave code cache for us to load. NODE_COMPILE_CACHE and NODE_DISABLE_COMPILE_CACHE
 * keep their meaning; the single executable loads no module from disk and skips this.
 */
import module from 'node:module';
import { cacheFolder } from './cache.ts';

/** Turn the cache on; returns its folder, or undefined when it stays off (never throws: it is only an optimisation). */
export function enableCompileCache(env: NodeJS.ProcessEnv = process.env): string | undefined {
  if (env.NODE_COMPILE_CACHE || env.NODE_DISABLE_COMPILE_CACHE || !module.enableCompileCache) return undefined;
  try {
    const dir = module.enableCompileCache(cacheFolder('node-compile-cache', env)).directory;
    // The serving processes and sandbox workers this process starts use it from their first module on.
    if (dir) env.NODE_COMPILE_CACHE = dir;
    return dir;
  } catch {
    return undefined;
  }
}
