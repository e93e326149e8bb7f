/**
 * Values computed at build time and embedded in the bundle as esbuild defines, for code that in a
 * source checkout reads files beside itself (there are no such files inside the executable).
 * Each module declares its identifier and documents it; this is the one list the build fills in.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

export interface Embedded {
  name: string;
  /** What it holds, for the build output. */
  what: string;
  /** JavaScript expression text (JSON). */
  value: string;
}

export async function embeddedValues(root: string): Promise<Embedded[]> {
  const out: Embedded[] = [];
  // src/sandbox/guest-bundle.ts: the guest library (Web APIs + runtime library), prebuilt.
  if (existsSync(join(root, 'src/sandbox/index.ts'))) {
    const sandbox = (await import(join(root, 'src/sandbox/index.ts'))) as { buildGuestBundle?: () => Promise<unknown> };
    const types = (await import(join(root, 'src/sandbox/runtime-types.ts'))) as { runtimeTypes: () => string | undefined };
    const text = types.runtimeTypes();
    if (text) out.push({ name: 'SWITCHYARD_RUNTIME_TYPES', what: 'runtime library types', value: JSON.stringify(text) });
    if (sandbox.buildGuestBundle) out.push({ name: 'SWITCHYARD_GUEST_BUNDLE', what: 'guest library', value: JSON.stringify(await sandbox.buildGuestBundle()) });
  }
  // src/console/assets.ts: the web console's browser bundle (JS + CSS), prebuilt.
  if (existsSync(join(root, 'src/console/build.ts'))) {
    const consoleBuild = (await import(join(root, 'src/console/build.ts'))) as { buildConsoleAssets: () => Promise<unknown> };
    out.push({ name: 'SWITCHYARD_CONSOLE_ASSETS', what: 'web console', value: JSON.stringify(await consoleBuild.buildConsoleAssets()) });
  }
  // src/registry/shipped.ts: the shipped integrations (built-in webhook, examples for `new --example`).
  if (existsSync(join(root, 'src/registry/shipped.ts'))) {
    const shipped = (await import(join(root, 'src/registry/shipped.ts'))) as { readShippedIntegrations: (root: string) => unknown };
    out.push({
      name: 'SWITCHYARD_SHIPPED_INTEGRATIONS',
      what: 'shipped integrations (built-in webhook, examples)',
      value: JSON.stringify(shipped.readShippedIntegrations(root)),
    });
  }
  // src/config/template.ts: the commented config.yaml `switchyard init` writes.
  if (existsSync(join(root, 'config.yaml')))
    out.push({
      name: 'SWITCHYARD_CONFIG_TEMPLATE',
      what: 'commented config.yaml (switchyard init)',
      value: JSON.stringify(readFileSync(join(root, 'config.yaml'), 'utf8')),
    });
  return out;
}
