/**
 * What an integration's own files may do to the source map the bundler makes (see Bundle.sourceMap).
 *
 * While esbuild writes a source map it follows each input file's `sourceMappingURL` comment and
 * reads the map it names: a file path or a `file://` URL, anywhere on the host, bypassing the
 * import confinement. A stranger's script could make the server read a FIFO (the load never ends),
 * `/dev/zero` (esbuild reads until memory runs out) or any file (its first bytes come back in the
 * load's error). So a comment is followed only when it names a map inside the integration folder,
 * as a plain relative path to a regular file, or carries the map itself (a `data:` URL); any other
 * makes the file's own positions the mapping. And the map kept is bounded in size.
 */
import { readFile } from 'node:fs/promises';
import { realpathSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import type { Plugin } from 'esbuild';

/** The largest source map kept beside a bundle: 1 MB, or four times the bundle's code. */
export function sourceMapLimit(codeBytes: number): number {
  return Math.max(1024 * 1024, 4 * codeBytes);
}

/** Files esbuild reads a `sourceMappingURL` comment from (JavaScript, TypeScript, JSX, CSS). */
const WITH_MAP_COMMENTS = /\.([cm]?[jt]sx?|css)$/;
/**
 * Every place a comment could name a map (`//# sourceMappingURL=`, `//@`, `/*#`, `/*@`); it may
 * also find the text inside a string, which only makes the check stricter.
 */
const MAP_COMMENT = /\/[/*][#@] sourceMappingURL=(\S*)/g;
/** A relative path with nothing to decode: what a package's own `x.js.map` comment looks like. */
const PLAIN_RELATIVE = /^[A-Za-z0-9._-][A-Za-z0-9._/-]*$/;

/** Whether esbuild may follow `url`, a comment's value in `file`: it reads nothing outside the folder. */
function followable(url: string, file: string, inside: (path: string) => boolean): boolean {
  if (url === '' || url.startsWith('data:')) return true;
  if (!PLAIN_RELATIVE.test(url)) return false;
  const target = resolve(dirname(file), url);
  if (!inside(target)) return false;
  let real: string;
  try {
    real = realpathSync(target);
  } catch {
    return true; // no such file: esbuild skips it quietly
  }
  try {
    return inside(real) && statSync(real).isFile();
  } catch {
    return false;
  }
}

/**
 * The esbuild plugin. A file whose map comments are all followable is left to esbuild; otherwise
 * a last comment that esbuild ignores (an `about:` URL; the last comment is the one it follows) is
 * appended, which changes no code. Failure policy: fail closed, to no input map.
 */
export function confineSourceMaps(inside: (path: string) => boolean): Plugin {
  return {
    name: 'switchyard-source-maps',
    setup(build) {
      build.onLoad({ filter: WITH_MAP_COMMENTS }, async (args) => {
        if (args.namespace !== 'file') return undefined;
        const text = await readFile(args.path, 'utf8');
        if (!text.includes('sourceMappingURL=')) return undefined;
        const urls = [...text.matchAll(MAP_COMMENT)].map((m) => m[1].split('*/')[0]);
        if (urls.every((url) => followable(url, args.path, inside))) return undefined;
        const ignored = args.path.endsWith('.css') ? '\n/*# sourceMappingURL=about:invalid */\n' : '\n//# sourceMappingURL=about:invalid\n';
        return { contents: text + ignored, loader: 'default' };
      });
    },
  };
}
