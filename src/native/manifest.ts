/**
 * What the single executable carries besides its JavaScript: the native files, described by a
 * manifest the build writes next to them (as the SEA asset `manifest.json`).
 */

/** Native files by role. The build and the runtime agree on these names. */
export type NativeName = 'better-sqlite3' | 'isolated-vm' | 'esbuild';

export interface NativeFile {
  /** SEA asset key holding the bytes. */
  asset: string;
  /** File name inside the cache folder. */
  file: string;
  size: number;
  sha256: string;
  /** 0o755 for programs (esbuild), 0o644 for addons. */
  mode: number;
}

export interface NativeManifest {
  /** Content hash over every file: the name of the cache folder, so builds with equal bytes share it. */
  hash: string;
  files: Record<NativeName, NativeFile>;
}

export const MANIFEST_ASSET = 'manifest.json';
