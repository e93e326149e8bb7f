/**
 * `switchyard gitbook install <folder>`: install the npm dependencies of a folder copied from
 * GitBook's catalogue. Its package.json names GitBook's own tooling as `workspace:*` packages of
 * GitBook's repository, which npm cannot fetch: `npm install` in the folder fails on them
 * (EUNSUPPORTEDPROTOCOL) before installing anything. So npm runs in a folder of its own beside it,
 * on the `dependencies` alone minus those, and the `node_modules` it makes is moved in.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { isAbsolute, join, resolve } from 'node:path';
import { defineCommand } from 'citty';
import { SwitchyardError } from '../errors.ts';

/** npm's rule for a package name: lowercase (older ones may have capitals), an optional @scope/. */
const PACKAGE_NAME = /^(@[a-z0-9~][\w.~-]*\/)?[a-z0-9~][\w.~-]*$/i;

/** The folder's installable dependencies as npm specs (`name@range`), and the `workspace:` ones left out. */
export function dependencySpecs(folder: string): { specs: string[]; leftOut: string[] } {
  const file = join(folder, 'package.json');
  let pkg: unknown;
  try {
    pkg = JSON.parse(readFileSync(file, 'utf8'));
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') throw new SwitchyardError('bad_request', `${folder} has no package.json: it has no dependencies to install`);
    throw new SwitchyardError('bad_request', code ? `cannot read it: ${code}` : `not valid JSON: ${(e as Error).message}`, { where: file });
  }
  const section = (key: 'dependencies' | 'devDependencies'): [string, string][] => {
    const v = (pkg as Record<string, unknown> | null)?.[key];
    if (v === undefined) return [];
    if (typeof v !== 'object' || v === null || Array.isArray(v))
      throw new SwitchyardError('bad_request', `${key} must be a map of package name to version`, { where: file });
    return Object.entries(v).map(([name, range]) => {
      // A name is handed to npm as an argument: one that is no package name (`--registry=…`) never is.
      if (!PACKAGE_NAME.test(name) || typeof range !== 'string')
        throw new SwitchyardError(
          'bad_request',
          `${key}: ${JSON.stringify(name)} ${typeof range !== 'string' ? 'has no version string' : 'is not an npm package name'}`,
          { where: file },
        );
      return [name, range];
    });
  };
  if (typeof pkg !== 'object' || pkg === null || Array.isArray(pkg)) throw new SwitchyardError('bad_request', 'must hold a JSON object', { where: file });
  const specs: string[] = [];
  const leftOut: string[] = [];
  for (const [name, r] of section('dependencies')) {
    if (r.startsWith('workspace:')) leftOut.push(`${name}@${r}`);
    // A local package is named from the folder, where npm will not run.
    else if (r.startsWith('file:') && !isAbsolute(r.slice(5))) specs.push(`${name}@file:${resolve(folder, r.slice(5))}`);
    else specs.push(`${name}@${r}`);
  }
  for (const [name, range] of section('devDependencies')) if (range.startsWith('workspace:')) leftOut.push(`${name}@${range}`);
  return { specs, leftOut };
}

/** The npm command line that installs `specs` into the current folder (copies of local packages, no scripts run). */
export function npmInstallArgs(specs: string[]): string[] {
  return ['install', '--no-audit', '--no-fund', '--no-package-lock', '--install-links', '--ignore-scripts', '--loglevel=error', '--', ...specs];
}

function runNpm(args: string[], cwd: string): Promise<number> {
  return new Promise((done, fail) => {
    const child = spawn('npm', args, { cwd, stdio: ['ignore', 'ignore', 'inherit'] });
    child.on('error', (e: NodeJS.ErrnoException) =>
      fail(
        e.code === 'ENOENT'
          ? new SwitchyardError('bad_request', 'npm is not on PATH: it installs the packages', {
              hint: 'install Node.js with npm (any version that has npm 7 or newer)',
            })
          : e,
      ),
    );
    child.on('close', (code) => done(code ?? 1));
  });
}

const install = defineCommand({
  meta: {
    name: 'install',
    description: "Install a GitBook catalogue folder's npm dependencies (plain `npm install` fails on its workspace:* tooling, which is left out)",
  },
  args: {
    folder: { type: 'positional', required: true, description: 'the integration folder (holding package.json)' },
  },
  async run({ args }) {
    const folder = resolve(String(args.folder));
    if (!existsSync(folder) || !statSync(folder).isDirectory())
      throw new SwitchyardError('bad_request', `${folder} is not a folder`, { where: String(args.folder) });
    const { specs, leftOut } = dependencySpecs(folder);
    const skipped = leftOut.length ? ` (left out, GitBook's own tooling: ${leftOut.join(', ')})` : '';
    if (!specs.length) {
      process.stdout.write(`${folder}: no dependencies to install${skipped}\n`);
      return 0;
    }
    // Beside the folder's node_modules, on the same disk, so it is moved in by a rename.
    const side = mkdtempSync(join(folder, '.switchyard-npm-'));
    try {
      writeFileSync(join(side, 'package.json'), `${JSON.stringify({ private: true, description: 'switchyard gitbook install: removed when done' })}\n`);
      process.stderr.write(`npm ${npmInstallArgs(specs).join(' ')}\n`);
      const code = await runNpm(npmInstallArgs(specs), side);
      if (code !== 0)
        throw new SwitchyardError('internal', `npm could not install the dependencies of ${folder} (exit code ${code}; its message is above)`, {
          hint: 'check the package names and versions in its package.json, and that the npm registry is reachable',
        });
      // The folder's own node_modules goes only once there is one to take its place.
      if (!existsSync(join(side, 'node_modules'))) throw new SwitchyardError('internal', `npm installed nothing for ${folder} (its message, if any, is above)`);
      rmSync(join(folder, 'node_modules'), { recursive: true, force: true });
      renameSync(join(side, 'node_modules'), join(folder, 'node_modules'));
    } finally {
      rmSync(side, { recursive: true, force: true });
    }
    process.stdout.write(`installed into ${join(folder, 'node_modules')}: ${specs.join(' ')}${skipped}\n`);
    return 0;
  },
});

export default defineCommand({
  meta: { name: 'gitbook', description: "Work with integrations copied from GitBook's catalogue" },
  subCommands: { install },
});
