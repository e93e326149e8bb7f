/**
 * What an integration's own files may do to the source map the bundler makes (see Bundle.sourceMap).
 *
 * While esbuild writes a source map it follows each input file's `sourceMappingURL` comment and
 * reads the map it names: a file path or a `file://` URL, anywhere on the host, bypassing the
 * import confinement. A stranger's script could make the server read a FIFO (the load never ends),
 * `/dev/zero` (esbuild reads until memory runs out) or any file (its first bytes come back in the
 * load's error). Predicting which comment esbuild takes and where it cuts the URL failed once
 * (its idea of whitespace is not a regular expression's: `x\u2028/../../token` read as `x` here),
 * so esbuild never reads a map file: every script and style sheet is loaded here and ends with a
 * comment of ours, the one esbuild follows (the last), carrying the map inline as a `data:` URL
 * when its own comment named a permitted one, or naming nothing esbuild reads. A map is permitted
 * when it is a regular file inside the integration folder, reached by a plain relative path, not
 * through a symlink, and not too large. And the map kept is bounded in size.
 */
import { constants } from 'node:fs';
import { open, readFile, realpath } from 'node:fs/promises';
import { basename, dirname, join, resolve } from 'node:path';
import type { Plugin } from 'esbuild';

/**
 * The largest source map kept beside a bundle, however large the bundle: it stays in memory while
 * the version is loaded, in every serving process, and is read on the main thread at the version's
 * first error (runtime/stack-trace.ts), none of it counted against the sandbox's limits.
 */
export const SOURCE_MAP_LIMIT = 1024 * 1024;

/** The largest map an input file may bring in (a package's own `x.js.map`, sources' text and all). */
export const INPUT_MAP_LIMIT = 4 * 1024 * 1024;

/** Files esbuild reads a `sourceMappingURL` comment from (JavaScript, TypeScript, JSX, CSS). */
const WITH_MAP_COMMENTS = /\.([cm]?[jt]sx?|css)$/;
/**
 * Where a comment may name a map (`//# sourceMappingURL=`, `//@`, `/*#`, `/*@`); the last is the
 * author's intent. It may also find text inside a string, or cut the URL where esbuild would not:
 * that only decides which map of the folder is inlined, never what esbuild reads.
 */
const MAP_COMMENT = /\/[/*][#@] sourceMappingURL=(\S*)/g;
/** A relative path with nothing to decode: what a package's own `x.js.map` comment looks like. */
const PLAIN_RELATIVE = /^[A-Za-z0-9._-][A-Za-z0-9._/-]*$/;
/** An inline map esbuild may decode: printable ASCII, nothing that could end the comment early. */
const DATA_URL = /^data:[!-~]*$/;

/**
 * The map named by `url` (a comment's value in `file`) when it is permitted, else undefined.
 * Opened without following a symlink or blocking on a FIFO, checked on the open file.
 */
async function permittedMap(url: string, file: string, inside: (path: string) => boolean): Promise<Buffer | undefined> {
  if (!PLAIN_RELATIVE.test(url)) return undefined;
  const target = resolve(dirname(file), url);
  if (!inside(target)) return undefined;
  let real: string;
  try {
    real = join(await realpath(dirname(target)), basename(target));
  } catch {
    return undefined; // no such folder
  }
  if (!inside(real)) return undefined;
  let handle;
  try {
    handle = await open(real, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch {
    return undefined; // missing, a symlink, unreadable
  }
  try {
    const stat = await handle.stat();
    if (!stat.isFile() || stat.size > INPUT_MAP_LIMIT) return undefined;
    // Read one byte past the limit: a file that grew since fstat is refused too.
    const buffer = Buffer.alloc(stat.size + 1);
    let length = 0;
    for (let n; length < buffer.length && (n = (await handle.read(buffer, length, buffer.length - length, length)).bytesRead) > 0; ) length += n;
    return length > stat.size ? undefined : buffer.subarray(0, length);
  } catch {
    return undefined;
  } finally {
    await handle.close();
  }
}

/** The comment that ends `file`: its permitted map inline, or a URL esbuild ignores (`about:`). */
async function lastComment(text: string, file: string, inside: (path: string) => boolean): Promise<string> {
  const css = file.endsWith('.css');
  const comment = (url: string) => (css ? `\n/*# sourceMappingURL=${url} */\n` : `\n//# sourceMappingURL=${url}\n`);
  const last = [...text.matchAll(MAP_COMMENT)].at(-1)?.[1].split('*/')[0];
  if (last === undefined || last === '') return comment('about:invalid');
  if (DATA_URL.test(last)) return comment(last);
  const map = await permittedMap(last, file, inside);
  return comment(map ? `data:application/json;base64,${map.toString('base64')}` : 'about:invalid');
}

/**
 * The esbuild plugin: every file it loads is read here (so what esbuild parses is what was checked)
 * and, when it mentions a map at all, ends with our comment. Appending a comment changes no code.
 * Failure policy: fail closed, to no input map.
 */
export function confineSourceMaps(inside: (path: string) => boolean): Plugin {
  return {
    name: 'switchyard-source-maps',
    setup(build) {
      build.onLoad({ filter: WITH_MAP_COMMENTS }, async (args) => {
        if (args.namespace !== 'file') return undefined;
        const bytes = await readFile(args.path);
        // esbuild recognises a comment only by these exact bytes.
        if (!bytes.includes('sourceMappingURL')) return { contents: bytes, loader: 'default' };
        const last = await lastComment(bytes.toString('utf8'), args.path, inside);
        return { contents: Buffer.concat([bytes, Buffer.from(last)]), loader: 'default' };
      });
    },
  };
}

/** What decides the inputs' maps, for the bundle cache's identity (bundle.ts bundlerIdentity). */
export const sourceMapRules: unknown[] = [
  confineSourceMaps,
  lastComment,
  permittedMap,
  MAP_COMMENT,
  PLAIN_RELATIVE,
  DATA_URL,
  INPUT_MAP_LIMIT,
  SOURCE_MAP_LIMIT,
];
