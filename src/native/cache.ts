/**
 * Where the executable unpacks its native files: `$XDG_CACHE_HOME/switchyard/<hash>/`, else
 * `~/.cache/switchyard/<hash>/`. When neither can be written (a read-only home in a container), a
 * private folder under the system temp dir. Whichever it is, the `switchyard` folder is used only
 * if it is a real folder (not a symlink) this user owns and nobody else can write: what is loaded
 * from it runs as this user (the executable's .node files, Node's compile cache), so an
 * XDG_CACHE_HOME pointing somewhere shared must never hand us someone else's code.
 */
import { accessSync, constants, lstatSync, mkdirSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { isAbsolute, join } from 'node:path';
import { SwitchyardError } from '../errors.ts';

/** Cache folders to try, best first. A relative XDG_CACHE_HOME is invalid per the XDG spec and ignored. */
export function cacheRoots(env: NodeJS.ProcessEnv = process.env): string[] {
  const roots: string[] = [];
  const xdg = env.XDG_CACHE_HOME;
  if (xdg && isAbsolute(xdg)) roots.push(join(xdg, 'switchyard'));
  else {
    const home = env.HOME || safeHomedir();
    if (home && isAbsolute(home)) roots.push(join(home, '.cache', 'switchyard'));
  }
  const tmp = env.TMPDIR && isAbsolute(env.TMPDIR) ? env.TMPDIR : tmpdir();
  roots.push(join(tmp, `switchyard-${process.getuid?.() ?? 'user'}`));
  return roots;
}

function safeHomedir(): string {
  try {
    return homedir();
  } catch {
    return '';
  }
}

/** Create (if needed) and return `<root>/<hash>` under the first root this user can write safely. */
export function cacheFolder(hash: string, env: NodeJS.ProcessEnv = process.env): string {
  const roots = cacheRoots(env);
  const tried: string[] = [];
  for (const root of roots) {
    const dir = join(root, hash);
    try {
      mkdirSync(root, { recursive: true, mode: 0o700 });
      assertPrivate(root);
      mkdirSync(dir, { recursive: true, mode: 0o700 });
      accessSync(dir, constants.W_OK);
      return dir;
    } catch (e) {
      tried.push(`${dir} (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
    }
  }
  throw new SwitchyardError('cache_unwritable', `no folder to unpack the executable's native addons into; tried ${tried.join(', ')}`, {
    hint: 'set XDG_CACHE_HOME to a folder this user can write',
  });
}

function assertPrivate(dir: string): void {
  const st = lstatSync(dir);
  const uid = process.getuid?.();
  if (!st.isDirectory() || (uid !== undefined && st.uid !== uid) || (st.mode & 0o022) !== 0) throw new Error('not a private folder of this user');
}
