/**
 * The type declarations of '@switchyard/runtime' for integration authors (`switchyard new` copies
 * them so editors autocomplete). Read from src/sandbox/guest/*.d.ts in a source checkout; the
 * executable has no files beside its code, so its build embeds them as SWITCHYARD_RUNTIME_TYPES.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';

declare const SWITCHYARD_RUNTIME_TYPES: string | undefined;

export function runtimeTypes(): string | undefined {
  if (typeof SWITCHYARD_RUNTIME_TYPES !== 'undefined' && SWITCHYARD_RUNTIME_TYPES) return SWITCHYARD_RUNTIME_TYPES;
  try {
    const guest = fileURLToPath(new URL('./guest/', import.meta.url));
    const texts = readdirSync(guest)
      .filter((f) => f.endsWith('.d.ts'))
      .sort()
      .map((f) => readFileSync(join(guest, f), 'utf8'))
      .filter((t) => t.includes('@switchyard/runtime'));
    return texts.length ? texts.join('\n') : undefined;
  } catch {
    return undefined;
  }
}
