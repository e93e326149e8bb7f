/**
 * Loading one folder: validated and bundled off to the side (prepare.ts), checked against the
 * names other folders and the built-ins serve, loaded in the sandbox when it changed after start,
 * then swapped in at once. A change that fails keeps the last good version serving and records
 * why (log line + state); a folder gone is removed, and what it served falls back to the built-in.
 */
import { existsSync, readFileSync } from 'node:fs';
import { isDeepStrictEqual } from 'node:util';
import { join } from 'node:path';
import type { Problem } from '../errors.ts';
import { displayPath, manifestFileOf } from '../manifest/index.ts';
import { parseYaml } from '../schema/yaml.ts';
import { prepareFolder } from './prepare.ts';
import { isIntegrationFolderName, type LoadedIntegration } from './registry-types.ts';
import { displayName, fallback, isDirectory, type Folder, type RegistryState } from './registry-state.ts';
import type { StartupPass } from './registry-startup.ts';

/** `enqueue` loads a folder again soon: one that lost a name is retried when the name frees up. */
export function createFolderLoader(state: RegistryState, startup: StartupPass, enqueue: (key: string) => void) {
  const { opts, root, log, now, folders, byName, builtins, cache } = state;
  const emit = state.listeners.notify;

  function retryConflicts(name: string): void {
    for (const f of folders.values()) if (f.conflictWith === name) enqueue(f.key);
  }

  function remove(key: string): void {
    const f = folders.get(key);
    if (!f) return;
    folders.delete(key);
    if (f.current && byName.get(f.current.name) === key) {
      byName.delete(f.current.name);
      const builtin = fallback(state, f.current.name);
      log.info(builtin ? 'integration removed; the built-in version serves again' : 'integration removed', { integration: f.current.name, dir: f.label });
      emit(f.current.name, builtin);
      retryConflicts(f.current.name);
    }
  }

  function fail(f: Folder, errors: Problem[], warnings: Problem[], claimed: string | undefined, conflictWith?: string): void {
    const unset = errors.every((p) => p.needsEnv) ? [...new Set(errors.map((p) => p.needsEnv!))] : [];
    f.status = unset.length ? 'needs_configuration' : 'error';
    f.errors = errors;
    f.warnings = warnings;
    f.claimed = claimed;
    f.conflictWith = conflictWith;
    f.updatedAt = now();
    folders.set(f.key, f);
    if (unset.length && !f.current) {
      const example = existsSync(join(f.dir, '.env.example')) ? ` (copy ${join(f.label, '.env.example')} to ${join(f.label, '.env')} and fill it in)` : '';
      log.warn('integration needs configuration', {
        integration: displayName(f),
        dir: f.label,
        set: `${unset.join(', ')} in the environment or in ${join(f.label, '.env')}${example}`,
      });
      return;
    }
    const builtinServes = !f.current && claimed !== undefined && fallback(state, claimed) && !byName.has(claimed);
    log.error(
      f.current
        ? 'integration change rejected; the last good version keeps serving'
        : builtinServes
          ? 'integration failed to load; the built-in version keeps serving'
          : 'integration failed to load',
      {
        integration: displayName(f),
        dir: f.label,
        ...(f.current ? { serving: f.current.script?.version ?? 'manifest only' } : {}),
        problems: errors.map((p) => `${p.where}: ${p.message}${p.hint ? ` (${p.hint})` : ''}`),
      },
    );
  }

  /** Where `name:` sits in the manifest, for the duplicate-name error. */
  function namePosition(f: Folder): string {
    const manifestFile = manifestFileOf(f.dir).name;
    const file = join(f.label, manifestFile);
    try {
      const src = parseYaml(readFileSync(join(f.dir, manifestFile), 'utf8'), file);
      const { line, col } = src.locate(['name']);
      return `${file}:${line}:${col}`;
    } catch {
      return file;
    }
  }

  async function loadFolder(key: string): Promise<void> {
    const dir = join(root, key);
    if (!isIntegrationFolderName(key) || !isDirectory(dir)) return remove(key);
    const f: Folder = folders.get(key) ?? { key, dir, label: displayPath(dir), status: 'error', errors: [], warnings: [], updatedAt: now() };

    const firstAtStart = startup.firstTry(key);
    const p = await prepareFolder(dir, { env: opts.env, label: f.label, maxBytes: opts.limits.script_size, cache });
    if (firstAtStart && p.prepared?.script) startup.countBundle(Boolean(p.prepared.bundleCached));
    const warnings = p.warnings;
    if (!p.prepared) return fail(f, p.errors, warnings, p.claimedName);
    const { manifest, script, secrets, sourceMap, dialect } = p.prepared;
    const name = manifest.name;

    // Failure policy: fail closed. A built-in integration is overridden only by a folder of its own
    // name: a folder named otherwise that claims it in its manifest would take over its
    // installations unasked (the webhook's: their configuration and tokens, enough to point their
    // URL elsewhere).
    if (builtins.has(name) && key !== name)
      return fail(
        f,
        [
          {
            where: namePosition(f),
            message: `name: "${name}" is the built-in integration's: only a folder named ${name} overrides it, so ${f.label} is not loaded`,
            hint: `give this integration a name of its own, or rename the folder to ${name} to override the built-in one`,
            severity: 'error',
          },
        ],
        warnings,
        undefined,
      );

    const owner = byName.get(name);
    if (owner !== undefined && owner !== key) {
      const other = folders.get(owner)!;
      return fail(
        f,
        [
          {
            where: namePosition(f),
            message: `name: "${name}" is already used by the integration in ${other.label}; names are unique, so ${f.label} is not loaded`,
            hint: `rename one of them (${join(other.label, manifestFileOf(other.dir).name)} or ${join(f.label, manifestFileOf(f.dir).name)})`,
            severity: 'error',
          },
        ],
        warnings,
        name,
        name,
      );
    }

    // Isolates start on first use: the start-up pass does not load scripts in the sandbox (a script
    // that only fails when loaded answers its invocations with the load error; `switchyard check`
    // finds it beforehand). A change afterwards is loaded off to the side before it swaps in.
    if (script && opts.verify && !firstAtStart && f.current?.script?.version !== script.version) {
      let message: string | undefined;
      try {
        message = await opts.verify(script);
      } catch (e) {
        message = (e as Error).message ?? String(e);
      }
      if (message)
        return fail(
          f,
          [
            {
              where: join(f.label, p.prepared.scriptPath ?? ''),
              message: `the script failed to load in the sandbox: ${message}`,
              hint: `run \`switchyard check ${f.label}\` to see it again`,
              severity: 'error',
            },
          ],
          warnings,
          name,
        );
    }
    if (state.closed) return;
    if (!isDirectory(dir)) return remove(key); // removed while bundling

    // The swap: synchronous from here on, so no reader sees a half-updated registry.
    const prev = f.current;
    f.status = 'loaded';
    f.errors = [];
    f.warnings = warnings;
    f.claimed = name;
    f.conflictWith = undefined;
    f.updatedAt = now();
    f.bundleKey = p.prepared.bundleKey ?? (prev?.script?.version === script?.version ? f.bundleKey : undefined);
    folders.set(key, f);
    const unchanged =
      prev !== undefined &&
      prev.name === name &&
      prev.script?.version === script?.version &&
      isDeepStrictEqual(prev.manifest, manifest) &&
      prev.dialect === dialect &&
      isDeepStrictEqual(prev.secrets, secrets);
    if (unchanged) {
      prev.warnings = warnings;
      return;
    }
    const next: LoadedIntegration = { name, dir, manifest, dialect, secrets, script, ...(sourceMap ? { sourceMap } : {}), warnings, loadedAt: now() };
    f.current = next;
    if (prev && prev.name !== name && byName.get(prev.name) === key) byName.delete(prev.name);
    byName.set(name, key);
    log.info(prev ? 'integration reloaded' : 'integration loaded', {
      integration: name,
      version: script?.version ?? 'manifest only',
      dir: f.label,
      ...(!prev && fallback(state, name) ? { overrides: `the built-in ${name} integration` } : {}),
      ...(warnings.length ? { warnings: warnings.map((p) => `${p.where}: ${p.message}`) } : {}),
    });
    if (prev && prev.name !== name) {
      emit(prev.name, fallback(state, prev.name));
      retryConflicts(prev.name);
    }
    emit(name, next);
  }

  return { loadFolder };
}
