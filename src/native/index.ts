/**
 * Native code inside the single executable. The executable carries better-sqlite3's and
 * isolated-vm's addons and the esbuild binary as SEA assets; on start they are unpacked once into
 * a content-hashed cache folder (see cache.ts) and loaded from there with process.dlopen. The
 * build points `isolated-vm` and better-sqlite3's addon lookup at small shims (./shims/) that call
 * loadAddon(), and ESBUILD_BINARY_PATH at the unpacked esbuild, so the rest of the program imports
 * these packages as usual. Outside the executable nothing here is used.
 */
import * as sea from 'node:sea';
import { cacheFolder } from './cache.ts';
import { extractNativeFiles } from './extract.ts';
import { MANIFEST_ASSET, type NativeManifest, type NativeName } from './manifest.ts';

export { cacheFolder, cacheRoots } from './cache.ts';
export { extractNativeFiles, type ReadAsset } from './extract.ts';
export { MANIFEST_ASSET, type NativeFile, type NativeManifest, type NativeName } from './manifest.ts';

/**
 * Inside the executable, the sandbox's worker process is the executable itself re-run with this
 * flag as its first argument (process.execPath + [SANDBOX_WORKER_FLAG, ...]); the executable's
 * entry (scripts/sea/entry.ts) hands such a start to the sandbox worker instead of the CLI.
 */
export const SANDBOX_WORKER_FLAG = '--sandbox-worker';

/** True when running inside the single executable (dist/switchyard). */
export function isExecutable(): boolean {
  return sea.isSea();
}

export interface NativeFiles {
  /** The cache folder holding the unpacked files. */
  dir: string;
  paths: Record<NativeName, string>;
}

let prepared: NativeFiles | undefined;

/**
 * Unpack the native files (first start only) and point esbuild's JS API at its binary. Must run
 * before esbuild's JS API is loaded: it reads ESBUILD_BINARY_PATH when first required. Idempotent.
 */
export function prepareNativeFiles(env: NodeJS.ProcessEnv = process.env): NativeFiles {
  if (prepared) return prepared;
  const manifest = JSON.parse(sea.getAsset(MANIFEST_ASSET, 'utf8')) as NativeManifest;
  const dir = cacheFolder(manifest.hash, env);
  const paths = extractNativeFiles(manifest, dir, (key) => sea.getRawAsset(key));
  // Ours wins over an inherited value: esbuild's JS API refuses a binary of another version.
  env.ESBUILD_BINARY_PATH = paths.esbuild;
  prepared = { dir, paths };
  return prepared;
}

const loaded = new Map<NativeName, unknown>();

/** The exports of an unpacked addon, dlopen'ed once. */
export function loadAddon(name: 'better-sqlite3' | 'isolated-vm'): any {
  let exports = loaded.get(name);
  if (exports === undefined) {
    const module = { exports: {} as unknown };
    process.dlopen(module, prepareNativeFiles().paths[name]);
    exports = module.exports;
    loaded.set(name, exports);
  }
  return exports;
}
