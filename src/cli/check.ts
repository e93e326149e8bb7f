/**
 * `switchyard check [dir]`: validate the manifest and the files it names, bundle the script, and
 * load it in the sandbox (when the sandbox is part of this build). Exit 0 when fine, 1 with every
 * problem listed.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { defineCommand } from 'citty';
import type { LoadedConfig } from '../config/index.ts';
import { readDotenv } from '../config/env.ts';
import { formatProblems, type Problem } from '../errors.ts';
import { displayPath, manifestFileOf, sectionFor, type ConfigurationTarget, type Manifest } from '../manifest/index.ts';
import { formatBytes, isIntegrationFolderName, prepareFolder, type GuestScript } from '../registry/index.ts';
import { parseYaml } from '../schema/yaml.ts';
import { EXIT_FAILURE, EXIT_OK } from './run.ts';
import { configArg, configFrom, jsonArg } from './common.ts';
import { dim, green, printJson, red, yellow } from './table.ts';

export interface ScriptExports {
  fetch: boolean;
  components: string[];
  events: string[];
  unsupported?: Array<{ handler: string; reason: string }>;
}

export type SandboxCheck = { status: 'unavailable'; reason: string } | { status: 'ok'; exports?: ScriptExports } | { status: 'failed'; message: string };

/**
 * Load the script in the sandbox, when this build has one. The sandbox module is imported lazily so
 * `check` works (manifest + bundle) before and without it.
 */
export async function loadInSandbox(script: GuestScript, config: LoadedConfig): Promise<SandboxCheck> {
  let mod: typeof import('../sandbox/index.ts');
  try {
    mod = await import('../sandbox/index.ts');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ERR_MODULE_NOT_FOUND' && String((e as Error).message).includes('sandbox'))
      return { status: 'unavailable', reason: 'this build has no sandbox' };
    throw e;
  }
  const { createLogger } = await import('../log/index.ts');
  const sandbox = mod.createSandbox({
    limits: config.sandbox,
    allowPrivateNetworks: config.webhooks.allow_private_networks,
    log: createLogger({ level: 'error', format: config.log.format }),
    serverOrigin: new URL(config.publicUrl).origin,
  });
  try {
    const r = await sandbox.check(script);
    return r.ok ? { status: 'ok', exports: r.exports } : { status: 'failed', message: r.error };
  } finally {
    await sandbox.close();
  }
}

/** citty drops a subcommand's return value; run() reads process.exitCode. */
function exit(code: number): number {
  process.exitCode = code;
  return code;
}

/** Another folder of the same integrations directory claiming the same name. */
function siblingClaiming(dir: string, name: string): string | undefined {
  const parent = dirname(dir);
  let entries: string[];
  try {
    entries = readdirSync(parent, { withFileTypes: true })
      .filter((e) => e.isDirectory() && isIntegrationFolderName(e.name) && e.name !== basename(dir))
      .map((e) => e.name)
      .sort();
  } catch {
    return undefined;
  }
  for (const e of entries) {
    try {
      const value = parseYaml(readFileSync(join(parent, e, manifestFileOf(join(parent, e)).name), 'utf8'), e).value as { name?: unknown } | undefined;
      if (value?.name === name) return join(parent, e);
    } catch {
      /* not an integration folder */
    }
  }
  return undefined;
}

function locate(dir: string, label: string, path: (string | number)[]): string {
  const manifestFile = manifestFileOf(dir).name;
  const file = join(label, manifestFile);
  try {
    const { line, col } = parseYaml(readFileSync(join(dir, manifestFile), 'utf8'), file).locate(path);
    return `${file}:${line}:${col}`;
  } catch {
    return file;
  }
}

/**
 * The configuration properties an installation may be given, by where it is installed: each target
 * is configured by the section the server picks for it (sectionFor), so GitBook's
 * `configurations.space` counts for space installations. A section several targets use counts once.
 */
function configurationProperties(m: Manifest): { count: number; by: string } {
  const targets: ConfigurationTarget[] = ['organization', 'space', 'site'];
  const sections = new Map<object, ConfigurationTarget[]>();
  for (const target of targets) {
    const section = sectionFor(m.configurations as Parameters<typeof sectionFor>[0], target);
    const n = Object.keys((section as { properties?: object } | undefined)?.properties ?? {}).length;
    if (section && n) sections.set(section, [...(sections.get(section) ?? []), target]);
  }
  let count = 0;
  const by: string[] = [];
  for (const [section, on] of sections) {
    const n = Object.keys((section as { properties?: object }).properties ?? {}).length;
    count += n;
    by.push(`${on.join(' and ')}: ${n}`);
  }
  return { count, by: by.join('; ') };
}

export default defineCommand({
  meta: { name: 'check', description: 'Validate an integration folder: manifest, files, bundle, and loading the script in the sandbox' },
  args: {
    dir: { type: 'positional', required: false, description: 'the integration folder (default: the current folder)', valueHint: 'dir' },
    ...configArg,
    ...jsonArg,
  },
  async run({ args }) {
    const config = configFrom(args);
    const dir = resolve(args.dir ?? '.');
    const label = displayPath(dir) || '.';
    const base = config.source ? dirname(config.source) : process.cwd();
    const env = { ...readDotenv(join(base, '.env')), ...process.env };

    const p = await prepareFolder(dir, { env, label, maxBytes: config.sandbox.script_size });
    const errors: Problem[] = [...p.errors];
    const warnings: Problem[] = [...p.warnings];
    let sandbox: SandboxCheck | undefined;

    if (p.prepared) {
      const { manifest, script } = p.prepared;
      if (resolve(dirname(dir)) === resolve(config.integrations_dir)) {
        const other = siblingClaiming(dir, manifest.name);
        if (other)
          errors.push({
            where: locate(dir, label, ['name']),
            message: `name: "${manifest.name}" is also claimed by ${displayPath(other)}; names are unique across loaded integrations`,
            hint: 'rename one of them',
            severity: 'error',
          });
      }
      if (script) {
        sandbox = await loadInSandbox(script, config);
        if (sandbox.status === 'failed')
          errors.push({
            where: join(label, p.prepared.scriptPath ?? ''),
            message: `the script failed to load in the sandbox: ${sandbox.message}`,
            severity: 'error',
          });
        if (sandbox.status === 'ok' && sandbox.exports) {
          for (const u of sandbox.exports.unsupported ?? [])
            warnings.push({
              where: join(label, p.prepared.scriptPath ?? ''),
              message: `${u.handler}: not supported here, its invocations are answered 501: ${u.reason}`,
              severity: 'warning',
            });
          const components = sandbox.exports.components;
          (manifest.blocks ?? []).forEach((b, i) => {
            if (!components.includes(b.id))
              errors.push({
                where: locate(dir, label, ['blocks', i, 'id']),
                message: `block "${b.id}" has no component: the script defines ${components.length ? components.map((c) => `"${c}"`).join(', ') : 'no components'}`,
                hint: `a block's id is the componentId of a createComponent() in the script`,
                severity: 'error',
              });
          });
        }
      }
    }

    const ok = errors.length === 0;
    const script = p.prepared?.script;
    if (args.json) {
      printJson({
        ok,
        dir,
        name: p.prepared?.manifest.name ?? p.claimedName ?? null,
        version: script?.version ?? null,
        bytes: script ? Buffer.byteLength(script.code) : null,
        sandbox: sandbox ?? null,
        errors,
        warnings,
      });
      return exit(ok ? EXIT_OK : EXIT_FAILURE);
    }

    const m = p.prepared?.manifest;
    const out: string[] = [];
    out.push(`${label}: ${m ? `${m.name} (${m.title})` : (p.claimedName ?? basename(dir))}`);
    if (m) {
      const props = configurationProperties(m);
      out.push(
        `  manifest  ${green('ok')}  ${m.scopes.length} scope(s), ${m.blocks?.length ?? 0} block(s), ${props.count} configuration propert${props.count === 1 ? 'y' : 'ies'}${props.by ? ` (${props.by})` : ''}`,
      );
      if (script) out.push(`  bundle    ${green('ok')}  ${formatBytes(Buffer.byteLength(script.code))}, version ${script.version}`);
      else out.push(`  bundle    ${dim('no script')}`);
      if (sandbox?.status === 'ok') {
        const e = sandbox.exports;
        out.push(
          `  sandbox   ${green('ok')}${e ? `  ${[e.fetch ? 'fetch' : '', e.components.length ? `components: ${e.components.join(', ')}` : '', e.events.length ? `events: ${e.events.join(', ')}` : '', e.unsupported?.length ? `not run here: ${e.unsupported.map((u) => u.handler).join(', ')}` : ''].filter(Boolean).join('; ') || 'nothing exported'}` : ''}`,
        );
      } else if (sandbox?.status === 'failed') out.push(`  sandbox   ${red('failed')}`);
      else if (sandbox?.status === 'unavailable') out.push(`  sandbox   ${yellow('skipped')}  ${sandbox.reason}`);
    }
    process.stdout.write(`${out.join('\n')}\n`);
    if (warnings.length) process.stdout.write(`${formatProblems(warnings)}\n`);
    if (!ok) {
      process.stderr.write(`${formatProblems(errors)}\n${red(`${errors.length} error${errors.length === 1 ? '' : 's'}`)}\n`);
      return exit(EXIT_FAILURE);
    }
    process.stdout.write(`${green('ok')}\n`);
    return exit(EXIT_OK);
  },
});
