/**
 * The most an installation may store of the texts its callers control (docs/installations.md,
 * "Limits"): enough for any real value, small enough that no row can grow past what the store
 * holds or indexes. Past one, the request is answered 400 naming the field, and nothing is stored.
 */
import { SwitchyardError } from '../errors.ts';

export const INSTALLATION_LIMITS = {
  /** `configuration.webhook_url`, in characters (browsers and proxies keep URLs to about 2 kB). */
  webhookUrl: 2048,
  /** The whole configuration as JSON, in bytes (credentials and settings, not data). */
  configurationBytes: 64 * 1024,
  /** `space`, `site` and each of `externalIds`, in characters. */
  id: 200,
  /** How many `externalIds` an installation keeps. */
  externalIds: 100,
  /** A webhook signing secret given at install (`webhook_secret`), in characters. */
  webhookSecret: 256,
} as const;

/** The configuration's size problem, if it is larger than the limit. */
export function configurationSizeProblem(configuration: Record<string, unknown>): { where: string; message: string; hint: string } | undefined {
  // TextEncoder, not Buffer: the console's browser code reads this file's limits (through api.ts).
  const bytes = new TextEncoder().encode(JSON.stringify(configuration)).byteLength;
  if (bytes <= INSTALLATION_LIMITS.configurationBytes) return undefined;
  return {
    where: 'configuration',
    message: `is ${Math.ceil(bytes / 1024)} kB as JSON; an installation's configuration may be at most ${INSTALLATION_LIMITS.configurationBytes / 1024} kB`,
    hint: 'keep settings and credentials in the configuration, and data elsewhere (remove keys with null)',
  };
}

/** Refuses externalIds beyond the limits (any door: the installations API, GitBook's routes). */
export function checkExternalIds(ids: string[]): void {
  if (ids.length > INSTALLATION_LIMITS.externalIds)
    throw new SwitchyardError('bad_request', `externalIds must have at most ${INSTALLATION_LIMITS.externalIds} items (it has ${ids.length})`, {
      where: 'externalIds',
    });
  const long = ids.findIndex((id) => id.length > INSTALLATION_LIMITS.id);
  if (long >= 0)
    throw new SwitchyardError('bad_request', `externalIds[${long}] must be at most ${INSTALLATION_LIMITS.id} characters (it has ${ids[long].length})`, {
      where: `externalIds[${long}]`,
    });
}
