/**
 * How to run this same program again from where it was started, for the commands a command prints
 * (`new` says how to check the folder it wrote; `init` how to start the server). `switchyard`
 * only when that name on PATH is a way to run it: `npm run switchyard --` from a checkout through
 * npm, the executable's path when it is not on PATH, else node with this entry.
 */
import { accessSync, constants, realpathSync } from 'node:fs';
import { basename, delimiter, isAbsolute, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { isExecutable } from '../native/index.ts';

/** The file `name` runs as a command, from PATH; undefined when none. */
function onPath(name: string, path = process.env.PATH ?? ''): string | undefined {
  for (const dir of path.split(delimiter)) {
    if (!dir) continue;
    const file = join(dir, name);
    try {
      accessSync(file, constants.X_OK);
      return file;
    } catch {
      // not there
    }
  }
  return undefined;
}

function real(file: string): string {
  try {
    return realpathSync(file);
  } catch {
    return file;
  }
}

/** `file` as typed from the working directory: `./dist/switchyard` below it, else its absolute path. */
function typed(file: string): string {
  const rel = relative(process.cwd(), file);
  return rel && !rel.startsWith('..') && !isAbsolute(rel) ? `./${rel}` : file;
}

/** `s` as one word for a POSIX shell. */
export const shellWord = (s: string) => (/^[\w./@:+-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`);

export function selfCommand(): string {
  if (isExecutable()) {
    return ownOnPath(process.execPath) ?? shellWord(typed(process.execPath));
  }
  // `npm run switchyard -- ...` from a checkout: npm runs it in the checkout's folder, as it will again.
  if (process.env.npm_lifecycle_event === 'switchyard') return 'npm run switchyard --';
  // A `switchyard` of the user's own on PATH (a wrapper or a link to this checkout).
  if (onPath('switchyard')) return 'switchyard';
  const entry = fileURLToPath(new URL('../main.ts', import.meta.url));
  return `${shellWord(ownOnPath(process.execPath) ?? typed(process.execPath))} --no-node-snapshot ${shellWord(typed(entry))}`;
}

/** `file`'s name when that name on PATH runs `file` itself. */
function ownOnPath(file: string): string | undefined {
  const name = basename(file);
  const found = onPath(name);
  return found && real(found) === real(file) ? name : undefined;
}
