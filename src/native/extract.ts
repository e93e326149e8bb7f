/**
 * Unpack the executable's native files into the cache folder, once. A file already there with the
 * manifest's size is reused (the folder name is the content hash, so a new build gets a new
 * folder). New files are written to a temp name and renamed into place, so a concurrent start or
 * a crash mid-write never leaves a half-written addon under the final name.
 */
import { createHash, randomBytes } from 'node:crypto';
import { chmodSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { SwitchyardError } from '../errors.ts';
import type { NativeManifest, NativeName } from './manifest.ts';

/** Reads one asset's bytes (node:sea's getRawAsset in the executable; a stub in tests). */
export type ReadAsset = (key: string) => ArrayBuffer | Uint8Array;

export function extractNativeFiles(manifest: NativeManifest, dir: string, readAsset: ReadAsset): Record<NativeName, string> {
  const paths = {} as Record<NativeName, string>;
  for (const [name, f] of Object.entries(manifest.files) as Array<[NativeName, NativeManifest['files'][NativeName]]>) {
    const dest = join(dir, f.file);
    paths[name] = dest;
    if (isInPlace(dest, f.size, f.mode)) continue;
    const raw = readAsset(f.asset);
    const bytes = raw instanceof Uint8Array ? raw : new Uint8Array(raw);
    const sha256 = createHash('sha256').update(bytes).digest('hex');
    // Fail closed: a blob that does not match its manifest is a broken build, never loaded.
    if (bytes.byteLength !== f.size || sha256 !== f.sha256)
      throw new SwitchyardError(
        'internal',
        `the executable's asset ${f.asset} does not match its manifest (sha256 ${sha256.slice(0, 12)}, expected ${f.sha256.slice(0, 12)})`,
        {
          hint: 'rebuild the executable with `npm run build`',
        },
      );
    const tmp = `${dest}.${process.pid}-${randomBytes(4).toString('hex')}.tmp`;
    try {
      writeFileSync(tmp, bytes, { flag: 'wx', mode: f.mode });
      chmodSync(tmp, f.mode); // the umask may have cleared bits (esbuild must be executable)
      renameSync(tmp, dest);
    } catch (e) {
      rmSync(tmp, { force: true });
      throw new SwitchyardError('cache_unwritable', `cannot unpack ${f.file} into ${dir}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`, {
        hint: 'set XDG_CACHE_HOME to a folder this user can write',
        cause: e,
      });
    }
  }
  return paths;
}

function isInPlace(file: string, size: number, mode: number): boolean {
  try {
    const st = statSync(file);
    return st.isFile() && st.size === size && (st.mode & mode & 0o111) === (mode & 0o111);
  } catch {
    return false;
  }
}
