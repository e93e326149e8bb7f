/**
 * Everything that can be checked about an integration folder without running it: the manifest,
 * the files it names, and the bundled script. Shared by the registry and `switchyard check`.
 */
import { relative } from 'node:path';
import type { Problem } from '../errors.ts';
import { isError, loadManifest, type Manifest, type ManifestDialect } from '../manifest/index.ts';
import { bundleScript } from './bundle.ts';
import type { BundleCache } from './bundle-cache.ts';

export interface PreparedIntegration {
  manifest: Manifest;
  /** Which manifest file it came from: GitBook's integrations see GitBook's environment shape. */
  dialect: ManifestDialect;
  secrets: Record<string, string>;
  script?: { name: string; version: string; code: string };
  /** The bundle's source map (see Bundle.sourceMap): host-side only, never part of `script`. */
  sourceMap?: string;
  /** Script entry, relative to the folder, when there is one. */
  scriptPath?: string;
  bundleInputs: string[];
  /** The bundle's key in the bundle cache, when it is stored there. */
  bundleKey?: string;
  /** The bundle was read back from the cache (nothing changed since it was built). */
  bundleCached?: boolean;
}

export interface Preparation {
  prepared?: PreparedIntegration;
  errors: Problem[];
  warnings: Problem[];
  /** The name the manifest claims, even when it has errors. */
  claimedName?: string;
}

export async function prepareFolder(
  dir: string,
  opts: { env: Record<string, string | undefined>; label: string; maxBytes?: number; cache?: BundleCache },
): Promise<Preparation> {
  const res = loadManifest(dir, opts.env, { label: opts.label });
  const warnings = res.problems.filter((p) => !isError(p));
  const errors = res.problems.filter(isError);
  if (errors.length || !res.manifest) return { errors, warnings, claimedName: res.claimedName };
  const manifest = res.manifest;
  if (!res.scriptFile)
    return { prepared: { manifest, dialect: res.dialect ?? 'platform', secrets: res.secrets, bundleInputs: [] }, errors, warnings, claimedName: manifest.name };
  const b = await bundleScript({ dir, entry: res.scriptFile, label: opts.label, maxBytes: opts.maxBytes, cache: opts.cache });
  warnings.push(...b.problems.filter((p) => !isError(p)));
  if (!b.bundle) return { errors: b.problems.filter(isError), warnings, claimedName: manifest.name };
  return {
    prepared: {
      manifest,
      dialect: res.dialect ?? 'platform',
      secrets: res.secrets,
      script: { name: manifest.name, version: b.bundle.version, code: b.bundle.code },
      ...(b.bundle.sourceMap ? { sourceMap: b.bundle.sourceMap } : {}),
      scriptPath: relative(dir, res.scriptFile),
      bundleInputs: b.bundle.inputs,
      ...(b.bundle.key ? { bundleKey: b.bundle.key } : {}),
      bundleCached: b.bundle.cached,
    },
    errors,
    warnings,
    claimedName: manifest.name,
  };
}
