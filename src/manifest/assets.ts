/**
 * Files a manifest points at (script, icon, preview images): they must exist inside the
 * integration's folder (no `..`, no absolute path, no symlink out of it), and images must be PNG or
 * JPEG (an icon may be SVG too).
 */
import { closeSync, openSync, readFileSync, readSync, realpathSync, statSync } from 'node:fs';
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

/**
 * Width and height from a JPEG's first start-of-frame marker, or undefined when the file is not a
 * JPEG. Reads at most the first 256 kB (frames sit after the metadata segments).
 */
export function jpegSize(file: string): { width: number; height: number } | undefined {
  let buf: Buffer;
  let fd: number | undefined;
  try {
    fd = openSync(file, 'r');
    buf = Buffer.alloc(256 * 1024);
    buf = buf.subarray(0, readSync(fd, buf, 0, buf.length, 0));
  } catch {
    return undefined;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
  if (buf.length < 4 || buf[0] !== 0xff || buf[1] !== 0xd8) return undefined;
  let i = 2;
  while (i + 9 < buf.length) {
    if (buf[i] !== 0xff) return undefined;
    const marker = buf[i + 1];
    if (marker === 0xff) {
      i++;
      continue;
    }
    const len = buf.readUInt16BE(i + 2);
    // SOF0..SOF15 except DHT (C4), JPG (C8) and DAC (CC) carry the frame size.
    if (marker >= 0xc0 && marker <= 0xcf && marker !== 0xc4 && marker !== 0xc8 && marker !== 0xcc) {
      const height = buf.readUInt16BE(i + 5);
      const width = buf.readUInt16BE(i + 7);
      return width > 0 && height > 0 ? { width, height } : undefined;
    }
    i += 2 + len;
  }
  return undefined;
}

/**
 * Whether a file is an SVG image: its text (UTF-8, first 16 kB) starts, after an XML declaration,
 * comments and a doctype, with an `<svg` element. What it draws is not read: an SVG is served only
 * as an image in a sandbox (no script runs, nothing is fetched; console routes.ts).
 */
export function isSvg(file: string): boolean {
  const head = Buffer.alloc(16 * 1024);
  let n = 0;
  let fd: number | undefined;
  try {
    fd = openSync(file, 'r');
    n = readSync(fd, head, 0, head.length, 0);
  } catch {
    return false;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
  const text = head.toString('utf8', 0, n);
  return /^\uFEFF?\s*(?:<\?xml[^>]*\?>\s*)?(?:<!--[\s\S]*?-->\s*|<!DOCTYPE\s+svg[^>[]*>\s*)*<svg[\s>/]/i.test(text);
}

/** An image's format and size: PNG or JPEG, whatever its file name says. */
export function imageInfo(file: string): { format: 'png' | 'jpeg'; width: number; height: number } | undefined {
  const png = pngSize(file);
  if (png) return { format: 'png', ...png };
  const jpeg = jpegSize(file);
  return jpeg ? { format: 'jpeg', ...jpeg } : undefined;
}

/**
 * An image a manifest names (its icon, a preview image), read only when it is an image inside the
 * integration's folder `dir` (fail closed: anything else is no image): PNG or JPEG, or SVG when
 * `svg` (an icon), with the type it is served as. The console and the catalogue serve them, with
 * IMAGE_HEADERS.
 */
export function readImageInside(dir: string, rel: string | undefined, svg: boolean): { bytes: Buffer; type: string } | undefined {
  if (!rel || isAbsolute(rel)) return undefined;
  try {
    const root = realpathSync(dir);
    const file = realpathSync(resolve(dir, rel));
    if (!inside(root, file)) return undefined;
    const raster = imageInfo(file);
    const type = raster ? `image/${raster.format}` : svg && isSvg(file) ? 'image/svg+xml' : undefined;
    return type ? { bytes: readFileSync(file), type } : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Every integration image is served in a sandbox: an SVG is a document that may carry scripts and
 * links, and opened on its own (a new tab, a link) it would run them with the serving origin.
 * The CSP runs none, loads nothing and treats the document as of an opaque origin; nosniff keeps
 * the browser to the type given.
 */
export const IMAGE_HEADERS = {
  'content-security-policy': "default-src 'none'; style-src 'unsafe-inline'; sandbox",
  'x-content-type-options': 'nosniff',
  'cache-control': 'private, max-age=60',
};
