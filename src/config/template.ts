/**
 * The commented config.yaml `switchyard init` writes: the one at the top of the source tree, every
 * key with its default and what it does (test/config.test.ts holds it equal to the embedded
 * defaults). The executable has no files beside its code: its build embeds the text as
 * SWITCHYARD_CONFIG_TEMPLATE (scripts/sea/embed.ts).
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

declare const SWITCHYARD_CONFIG_TEMPLATE: string | undefined;

export function configTemplate(): string {
  if (typeof SWITCHYARD_CONFIG_TEMPLATE !== 'undefined' && SWITCHYARD_CONFIG_TEMPLATE) return SWITCHYARD_CONFIG_TEMPLATE;
  return readFileSync(fileURLToPath(new URL('../../config.yaml', import.meta.url)), 'utf8');
}
