/**
 * What a caller of the runtime endpoint may put in an envelope's `environment` (spec 4.1: the
 * platform "normalizes the request envelope before it reaches the integration code").
 *
 * The caller chooses which installation the code runs for (`installation.id`), nothing else the
 * platform owns: every field of spec 2.4 (and of GitBook's shape) is rebuilt from the store, so a
 * forged configuration, status, URL, token or secret never reaches the code. Top-level keys the
 * platform never sets and the spec does not name are the caller's (a test may hand the code extra
 * context that way) and pass through unchanged.
 */
import { SwitchyardError } from '../errors.ts';

/**
 * Every top-level key the platform owns: what buildEnvironment sets in either dialect (some only
 * for some installations, so a caller must not fill them in where the platform leaves them out),
 * and the names spec 2.4 lists for its groups. test/runtime-envelope.test.ts checks that every key
 * buildEnvironment writes is here.
 */
export const PLATFORM_ENVIRONMENT_KEYS: readonly string[] = [
  // built here (environment.ts)
  'apiEndpoint',
  'apiTokens',
  'integration',
  'installation',
  'spaceInstallation',
  'siteInstallation',
  'secrets',
  'signingSecrets',
  // spec 2.4's group fields, and GitBook's site counterparts
  'space',
  'site',
  'status',
  'configuration',
  'externalIds',
  'urls',
  'id',
  'space_selection',
  'site_selection',
  'target',
];

/**
 * The installation id a caller names (`environment.installation.id`), if any. Fails closed: an id
 * that is not a non-empty string is a 400, never read as "no installation".
 */
export function chosenInstallationId(environment: Record<string, unknown>): string | undefined {
  const installation = environment.installation;
  if (installation === undefined || installation === null) return undefined;
  if (typeof installation !== 'object' || Array.isArray(installation))
    throw new SwitchyardError('bad_request', 'environment.installation must be an object like {"id": "inst_..."}', { where: 'environment.installation' });
  const id = (installation as { id?: unknown }).id;
  if (id === undefined) return undefined;
  if (typeof id !== 'string' || !id)
    throw new SwitchyardError('bad_request', 'environment.installation.id must be an installation id (a string)', {
      where: 'environment.installation.id',
      hint: 'see `switchyard installations list`',
    });
  return id;
}

/** The caller's own top-level keys: those the platform does not own (PLATFORM_ENVIRONMENT_KEYS). */
export function callerFields(environment: Record<string, unknown>): Record<string, unknown> {
  // fromEntries defines each key (a "__proto__" key stays a key, never the object's prototype).
  return Object.fromEntries(Object.entries(environment).filter(([key]) => !PLATFORM_ENVIRONMENT_KEYS.includes(key)));
}
