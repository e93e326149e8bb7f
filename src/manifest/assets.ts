/**
 * Files a manifest points at (script, icon, preview images): they must exist inside the
 * integration's folder (no `..`, no absolute path, no symlink out of it), and images must be PNG.
 */
import { closeSync, openSync, readSync, realpathSync, statSync } from 'node:fs';
import { isAbsolute, relative, resolve, sep } from 'node:path';

export type Resolved = { ok: true; file: string } | { ok: false; message: string; hint: string };

function inside(root: string, file: string): boolean {
  const rel = relative(root, file);
  return rel !== '' && !rel.startsWith(`..${sep}`) && rel !== '..' && !isAbsolute(rel);
}

/**
 * Resolve `rel` against `dir` and insist it is a file within it. Failure policy: fail closed — a
 * path we cannot prove to be inside the folder is refused.
 */
export function resolveInside(dir: string, rel: string, what: string): Resolved {
  const hint = `give a path relative to the integration folder, like "assets/${what === 'script' ? 'index.ts' : 'icon.png'}"`;
  if (isAbsolute(rel) || /^[a-z]:[\\/]/i.test(rel)) return { ok: false, message: `"${rel}" is an absolute path`, hint };
  const file = resolve(dir, rel);
  if (!inside(dir, file)) return { ok: false, message: `"${rel}" points outside the integration folder`, hint };
  let st;
  try {
    st = statSync(file);
  } catch {
    return { ok: false, message: `${what} file "${rel}" does not exist`, hint: `create it, or fix the path (relative to ${dir})` };
  }
  if (!st.isFile()) return { ok: false, message: `${what} "${rel}" is not a file`, hint };
  try {
    if (!inside(realpathSync(dir), realpathSync(file)))
      return { ok: false, message: `"${rel}" is a link to a file outside the integration folder`, hint: 'copy the file into the folder instead of linking it' };
  } catch {
    return { ok: false, message: `${what} file "${rel}" cannot be read`, hint };
  }
  return { ok: true, file };
}

const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

/** Width and height from a PNG's IHDR chunk, or undefined when the file is not a PNG. */
export function pngSize(file: string): { width: number; height: number } | undefined {
  const head = Buffer.alloc(24);
  let fd: number | undefined;
  try {
    fd = openSync(file, 'r');
    if (readSync(fd, head, 0, 24, 0) < 24) return undefined;
  } catch {
    return undefined;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
  if (!head.subarray(0, 8).equals(PNG_SIGNATURE) || head.toString('latin1', 12, 16) !== 'IHDR') return undefined;
  const width = head.readUInt32BE(16);
  const height = head.readUInt32BE(20);
  return width > 0 && height > 0 ? { width, height } : undefined;
}
