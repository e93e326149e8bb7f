/** Arguments shared by every command. */
import { loadConfig, type LoadedConfig } from '../config/index.ts';

export const configArg = {
  config: {
    type: 'string',
    description: 'path of config.yaml (default ./config.yaml, else the embedded defaults)',
    valueHint: 'path',
  },
} as const;

export const jsonArg = {
  json: { type: 'boolean', description: 'print JSON for scripts instead of a table', default: false },
} as const;

export function configFrom(args: { config?: string }): LoadedConfig {
  return loadConfig({ path: args.config });
}
