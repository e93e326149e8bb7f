/**
 * Bundles kept across starts (`<data_dir>/cache/bundles/`), so an integration whose files have not
 * changed is not bundled again: a start reads its bundle back instead of running esbuild.
 *
 * An entry is named by its key: a hash of everything the bundle depends on.
 * - the bundler: Switchyard's version, esbuild's, and the source text of the code that builds
 *   (its options and plugins: change them and every key changes);
 * - the folder, the entry file and the label problems are shown with;
 * - every file that went into the bundle, by path and content;
 * - the names in every directory of the folder (node_modules aside) and in every directory of
 *   node_modules that holds an input or one of its parents: a file that appears and would now win
 *   an import (`./util.tsx` beside `./util.ts`, a nearer node_modules) changes the key;
 * - package.json, tsconfig.json and jsconfig.json in those directories and every directory above
 *   the folder up to the root (module type, `exports`, `paths`, JSX settings), and any tsconfig
 *   they extend by path. A tsconfig that extends a package is not followed: such a folder is
 *   bundled at every start.
 *
 * To know which files to hash before bundling, a small record per folder and entry
 * (`<data_dir>/cache/bundle-inputs/`) lists the inputs of its last bundle. A missing or stale record
 * only means a miss: the key is always computed from the files as they are now.
 *
 * A build is stored only when nothing it depends on changed from a second before it started to
 * after it was hashed (by the files' ctime, which no tool can set back): a file saved while esbuild
 * ran is never recorded under content esbuild did not see. Failure policy: the cache is never
 * trusted over a file; when in doubt it misses and the folder is bundled.
 */
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, realpathSync, statSync } from 'node:fs';
import { dirname, isAbsolute, join, relative, resolve, sep } from 'node:path';
import { createDiskCache, type DiskCache } from '../cache/index.ts';
import type { Problem } from '../errors.ts';
import { skipDir } from './watch.ts';

/** A change this close before a build started may not have been seen by a coarse file clock. */
const RACY_MS = 1_000;
/** Entries unused this long are pruned. */
export const BUNDLE_CACHE_MAX_AGE_MS = 7 * 24 * 60 * 60_000;
const CONFIG_FILES = ['package.json', 'tsconfig.json', 'jsconfig.json'];
const FORMAT = 1;

/** What a build produced, as stored. */
export interface CachedBuild {
  code: string;
  /** Absolute paths of the files that went into the bundle. */
  inputs: string[];
  /** esbuild's warnings, as problems. */
  warnings: Problem[];
  /** The bundle's source map (positions only), when one is kept (see Bundle.sourceMap). */
  sourceMap?: string;
}

export interface BundleRequest {
  dir: string;
  entry: string;
  label: string;
  /** Identity of the bundler (version, options): part of every key. */
  bundler: string;
}

export interface BundleCache {
  /** The stored build for this request when none of the files it depends on changed; its key. */
  lookup(req: BundleRequest): (CachedBuild & { key: string }) | undefined;
  /** Store a build that started at `startedAt` (ms); its key, or undefined when it was not stored. */
  store(req: BundleRequest, build: CachedBuild, startedAt: number): string | undefined;
  /** Remove entries unused for a week, except `keep` (the keys serving now). */
  prune(keep: ReadonlySet<string>): number;
}

const sha = (...parts: string[]) => {
  const h = createHash('sha256');
  for (const p of parts) h.update(p).update('\0');
  return h.digest('hex');
};

function within(root: string, p: string): boolean {
  const rel = relative(root, p);
  return rel === '' || (!rel.startsWith(`..${sep}`) && rel !== '..' && !isAbsolute(rel));
}

/** Thrown while fingerprinting: the folder cannot be cached as it is (a file vanished, an extends we cannot follow). */
class Uncacheable extends Error {}

/**
 * The key of a bundle of `req` whose inputs are `inputs`, from the files as they are now, and the
 * newest ctime among everything read (ms).
 */
export function fingerprint(req: BundleRequest, inputs: string[], opts: { stamps?: boolean } = {}): { key: string; newest: number } {
  const h = createHash('sha256');
  const add = (...parts: string[]) => {
    for (const p of parts) h.update(p).update('\0');
  };
  // ctimes are only wanted when storing (see RACY_MS), and are read after the content they vouch
  // for, so a change during the read shows as recent.
  let newest = 0;
  const stamp = (path: string) => {
    if (opts.stamps) newest = Math.max(newest, statSync(path).ctimeMs);
  };
  /** A regular file's content; undefined when absent or not a regular file (a FIFO or a device could block the server). */
  const readRegular = (file: string): Buffer | undefined => {
    if (!statSync(file, { throwIfNoEntry: false })?.isFile()) return undefined;
    const content = readFileSync(file);
    stamp(file);
    return content;
  };
  add(`switchyard-bundle/${FORMAT}`, req.bundler, req.dir, req.entry, req.label);

  let real = req.dir;
  try {
    real = realpathSync(req.dir);
  } catch {
    throw new Uncacheable('the folder is gone');
  }
  const roots = [req.dir, real];
  const insideFolder = (p: string) => roots.some((r) => within(r, p));

  // Directories whose names count (resolution), with their names, and directories whose config
  // files count.
  const listed = new Map<string, string[]>();
  const configured = new Set<string>();
  const list = (d: string) => {
    if (listed.has(d)) return;
    let names: string[];
    try {
      const entries = readdirSync(d, { withFileTypes: true });
      stamp(d);
      names = entries.map((e) => e.name).sort();
      listed.set(d, names);
      if (within(req.dir, d) || within(real, d)) for (const e of entries) if (e.isDirectory() && !skipDir(e.name)) list(join(d, e.name));
    } catch {
      listed.set(d, ['<unreadable>']);
    }
  };
  list(req.dir);
  const upFrom = (start: string) => {
    for (let d = start; ; d = dirname(d)) {
      if (configured.has(d)) break;
      configured.add(d);
      if (insideFolder(d) && !listed.has(d)) {
        // node_modules directories holding an input, and their parents: listed, not walked.
        let names: string[];
        try {
          names = readdirSync(d).sort();
          stamp(d);
        } catch {
          names = ['<unreadable>'];
        }
        listed.set(d, names);
      }
      if (dirname(d) === d) break;
    }
  };
  upFrom(req.dir);
  for (const input of inputs) upFrom(dirname(input));

  for (const file of [...inputs].sort()) {
    let content: Buffer | undefined;
    try {
      content = readRegular(file);
    } catch {
      content = undefined;
    }
    if (!content) throw new Uncacheable(`${file} cannot be read as a regular file`);
    add('file', file, createHash('sha256').update(content).digest('hex'));
  }
  for (const d of [...listed.keys()].sort()) add('dir', d, ...listed.get(d)!);
  const extended = new Set<string>();
  const config = (file: string) => {
    let text: string | undefined;
    try {
      text = readRegular(file)?.toString('utf8');
    } catch {
      text = undefined;
    }
    // Absent is as good as any other state: the directory's listing says when it appears.
    if (text === undefined) return;
    add('config', file, text);
    if (/tsconfig|jsconfig/.test(file)) for (const target of extendsOf(text, file)) if (!extended.has(target)) extended.add(target), config(target);
  };
  for (const d of [...configured].sort()) for (const name of CONFIG_FILES) config(join(d, name));
  return { key: h.digest('hex').slice(0, 40), newest };
}

/** The files a tsconfig extends, by path; a package name (or anything else) cannot be followed. */
function extendsOf(text: string, file: string): string[] {
  const m = /"extends"\s*:\s*(\[[^\]]*\]|"[^"]*")/.exec(text);
  if (!m) {
    if (/"extends"/.test(text)) throw new Uncacheable(`${file}: an "extends" that cannot be read`);
    return [];
  }
  const targets = [...m[1].matchAll(/"([^"]*)"/g)].map((x) => x[1]);
  return targets.map((t) => {
    if (!t.startsWith('.') && !isAbsolute(t)) throw new Uncacheable(`${file} extends the package "${t}"`);
    const p = resolve(dirname(file), t);
    return p.endsWith('.json') ? p : `${p}.json`;
  });
}

function isProblem(p: unknown): p is Problem {
  return typeof p === 'object' && p !== null && typeof (p as Problem).where === 'string' && typeof (p as Problem).message === 'string';
}

export function createBundleCache(root: string, onError?: (e: Error) => void): BundleCache {
  const entries: DiskCache = createDiskCache(join(root, 'bundles'), onError);
  const records: DiskCache = createDiskCache(join(root, 'bundle-inputs'), onError);
  const recordName = (req: BundleRequest) => sha(req.dir, req.entry, req.label).slice(0, 40);

  const readInputs = (req: BundleRequest): string[] | undefined => {
    const text = records.read(recordName(req));
    if (!text) return undefined;
    try {
      const r = JSON.parse(text) as { inputs?: unknown };
      return Array.isArray(r.inputs) && r.inputs.every((x) => typeof x === 'string' && isAbsolute(x)) ? (r.inputs as string[]) : undefined;
    } catch {
      return undefined;
    }
  };

  return {
    lookup(req) {
      const inputs = readInputs(req);
      if (!inputs) return undefined;
      let key: string;
      try {
        key = fingerprint(req, inputs).key;
      } catch (e) {
        if (e instanceof Uncacheable) return undefined;
        throw e;
      }
      const text = entries.read(key);
      if (!text) return undefined;
      try {
        const e = JSON.parse(text) as Partial<CachedBuild> & { key?: unknown; codeHash?: unknown };
        // A whole, matching entry or nothing (a disk that lost bytes must not hand over a bundle).
        if (e.key !== key || typeof e.code !== 'string' || e.codeHash !== sha(e.code)) throw new Error('mismatch');
        if (!Array.isArray(e.inputs) || !e.inputs.every((x) => typeof x === 'string')) throw new Error('inputs');
        if (!Array.isArray(e.warnings) || !e.warnings.every(isProblem)) throw new Error('warnings');
        if (e.sourceMap !== undefined && typeof e.sourceMap !== 'string') throw new Error('sourceMap');
        return { key, code: e.code, inputs: e.inputs, warnings: e.warnings, ...(e.sourceMap !== undefined ? { sourceMap: e.sourceMap } : {}) };
      } catch {
        entries.remove(key);
        return undefined;
      }
    },
    store(req, build, startedAt) {
      let fp: { key: string; newest: number };
      try {
        fp = fingerprint(req, build.inputs, { stamps: true });
      } catch (e) {
        if (e instanceof Uncacheable) return undefined;
        throw e;
      }
      if (fp.newest >= startedAt - RACY_MS) return undefined;
      const entry = { key: fp.key, codeHash: sha(build.code), code: build.code, inputs: build.inputs, warnings: build.warnings, sourceMap: build.sourceMap };
      if (!entries.write(fp.key, JSON.stringify(entry))) return undefined;
      records.write(recordName(req), JSON.stringify({ inputs: build.inputs }));
      return fp.key;
    },
    prune(keep) {
      return entries.prune(BUNDLE_CACHE_MAX_AGE_MS, keep) + records.prune(BUNDLE_CACHE_MAX_AGE_MS);
    },
  };
}
