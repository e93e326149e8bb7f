/**
 * The integrations shipped with the program (the folders of `integrations/` in the source tree):
 * the built-in `webhook` integration, which the registry always serves, and the examples
 * `switchyard new --example <name>` writes out. In a checkout they are read beside the source; the
 * single executable carries them, embedded at build time as SWITCHYARD_SHIPPED_INTEGRATIONS
 * (scripts/sea/embed.ts), since it has no files beside it.
 */
import { lstatSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/** Folder name -> file path inside it (`/`-separated) -> content, base64. */
export type ShippedFiles = Record<string, Record<string, string>>;

declare const SWITCHYARD_SHIPPED_INTEGRATIONS: ShippedFiles | undefined;

/** Every shipped folder, in the order `new --example` lists them. */
export const SHIPPED_INTEGRATIONS = ['hello-components', 'oauth-example', 'webhook'] as const;

/** Served by every server whether or not its integrations folder has them (a folder of the same name overrides). */
export const BUILTIN_INTEGRATIONS = ['webhook'] as const;

/** The source tree (in the executable a folder that exists nowhere; the embedded copy is used there). */
const SOURCE_ROOT = new URL('../../', import.meta.url).pathname;

/**
 * Whether a file or folder of a shipped integration is part of it. Never what a developer keeps
 * there for themselves: a filled-in `.env` (secrets), installed packages, editor and VCS folders.
 */
function shipped(name: string): boolean {
  if (name === '.env.example' || name === '.gitignore') return true;
  if (name.startsWith('.')) return false;
  return name !== 'node_modules' && name !== 'dist';
}

/** The files of one folder (regular files only; symlinks are not followed). */
export function readShippedFolder(dir: string): Record<string, string> {
  const files: Record<string, string> = {};
  const visit = (abs: string, rel: string) => {
    for (const entry of readdirSync(abs).sort()) {
      if (!shipped(entry)) continue;
      const path = join(abs, entry);
      const st = lstatSync(path);
      const relPath = rel ? `${rel}/${entry}` : entry;
      if (st.isDirectory()) visit(path, relPath);
      else if (st.isFile()) files[relPath] = readFileSync(path).toString('base64');
    }
  };
  visit(dir, '');
  return files;
}

/** All shipped folders read from a source tree (the build embeds this). */
export function readShippedIntegrations(root: string): ShippedFiles {
  return Object.fromEntries(SHIPPED_INTEGRATIONS.map((name) => [name, readShippedFolder(join(root, 'integrations', name))]));
}

let cached: ShippedFiles | undefined;

/** The shipped folders: embedded in the executable, else read beside the source once. */
export function shippedIntegrations(): ShippedFiles {
  if (typeof SWITCHYARD_SHIPPED_INTEGRATIONS !== 'undefined' && SWITCHYARD_SHIPPED_INTEGRATIONS) return SWITCHYARD_SHIPPED_INTEGRATIONS;
  cached ??= readShippedIntegrations(SOURCE_ROOT);
  return cached;
}

/** The manifest text of a built-in integration (it has no script). */
export function builtinManifest(name: string): string {
  const text = shippedFiles(name)?.get('platform-manifest.yaml');
  if (!text) throw new Error(`the built-in integration "${name}" is not in this build`);
  return text.toString('utf8');
}

/** One shipped folder's files as bytes, by path; undefined for a name that is not shipped. */
export function shippedFiles(name: string): Map<string, Buffer> | undefined {
  const files = Object.hasOwn(shippedIntegrations(), name) ? shippedIntegrations()[name] : undefined;
  if (!files) return undefined;
  return new Map(Object.entries(files).map(([path, b64]) => [path, Buffer.from(b64, 'base64')]));
}
