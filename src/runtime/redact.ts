/**
 * Secret values kept out of what integration code prints and throws: the integration's manifest
 * secrets, its installation's credential-like configuration values, and every token the runtime
 * hands out (`sy_inv_...`, `sy_inst_...`, `sy_int_...`, and install links `sy_link_...`, matched by shape), and any other value the
 * runtime puts in the environment as a key (GitBook's signingSecrets). One redactor per integration version
 * and installation version (see secretRedactors), built once and used for every line.
 */
import type { Installation } from '../installations/index.ts';
import type { LoadedIntegration } from '../registry/index.ts';
import type { InvocationResult, LogLine } from '../sandbox/index.ts';
import { storableText } from '../store/text.ts';

export const REDACTED = '[redacted]';

/** Shorter values are left alone: redacting "1" or "yes" would ruin every line and hide nothing. */
export const MIN_SECRET_LENGTH = 6;

/** Configuration keys whose values are credentials (as the server's own logger decides for its fields). */
const SECRET_KEY = /secret|token|password|passwd|credential|authorization|signature|api_?key|private_?key/i;

/** Installation, invocation and integration tokens and install links: whoever's they are, they never belong in a log. */
const TOKEN_SHAPE = 'sy_(?:inv|inst|int|link)_[A-Za-z0-9_.-]+';

export type Redactor = (text: string) => string;

const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** A redactor of these values (each at least MIN_SECRET_LENGTH long) and of token shapes. */
export function createRedactor(values: Iterable<string>): Redactor {
  const distinct = [...new Set([...values].filter((v) => v.length >= MIN_SECRET_LENGTH))];
  // Longest first, so a secret that contains another is replaced whole.
  distinct.sort((a, b) => b.length - a.length);
  const re = new RegExp([...distinct.map(escape), TOKEN_SHAPE].join('|'), 'g');
  return (text) => (text.includes('sy_') || distinct.length ? text.replace(re, REDACTED) : text);
}

/** Credential-like string values of a configuration: under secret-looking keys, at any depth. */
function configurationSecrets(value: unknown, secretParent: boolean, out: string[], depth = 0): void {
  if (depth > 8) return;
  if (typeof value === 'string') {
    if (secretParent) out.push(value);
    return;
  }
  if (!value || typeof value !== 'object') return;
  for (const [k, v] of Object.entries(value)) configurationSecrets(v, secretParent || SECRET_KEY.test(k), out, depth + 1);
}

/** The values a redactor for this integration and installation hides. */
export function secretValuesOf(integration: Pick<LoadedIntegration, 'secrets'>, installation?: Pick<Installation, 'configuration'>): string[] {
  const out = Object.values(integration.secrets ?? {}).filter((v): v is string => typeof v === 'string');
  if (installation) configurationSecrets(installation.configuration, false, out);
  return out;
}

/**
 * Redactors cached per integration (a reload is a new object, with its secrets) and installation
 * version (`updatedAt` changes with every configuration edit, OAuth credentials included).
 */
export function secretRedactors<I extends Pick<LoadedIntegration, 'secrets'>, N extends Pick<Installation, 'id' | 'updatedAt' | 'configuration'>>(
  /** More values to hide for this integration and installation (keys the environment carries). */
  extra: (integration: I, installation?: N) => string[] = () => [],
) {
  const byIntegration = new WeakMap<object, Map<string, Redactor>>();
  return (integration: I, installation?: N): Redactor => {
    let perInstallation = byIntegration.get(integration);
    if (!perInstallation) byIntegration.set(integration, (perInstallation = new Map()));
    const key = installation ? `${installation.id}\0${installation.updatedAt}` : '';
    let r = perInstallation.get(key);
    if (!r) {
      if (perInstallation.size >= 10_000) perInstallation.clear();
      r = createRedactor([...secretValuesOf(integration, installation), ...extra(integration, installation)]);
      perInstallation.set(key, r);
    }
    return r;
  };
}

/**
 * Printed text as it is kept and shown: the secrets out, and each NUL or lone surrogate as U+FFFD
 * (store/text.ts), so both engines store the same line and PostgreSQL can read its record back to
 * append the lines printed after the answer.
 */
const kept = (text: string, redact: Redactor) => storableText(redact(text));

export function redactLine(line: LogLine, redact: Redactor): LogLine {
  const message = kept(line.message, redact);
  return message === line.message ? line : { ...line, message };
}

/** The result with its log lines and its error's message and stack redacted (and kept as above). */
export function redactResult(result: InvocationResult, redact: Redactor): InvocationResult {
  const e = result.error;
  return {
    ...result,
    logs: result.logs.map((l) => redactLine(l, redact)),
    ...(e ? { error: { ...e, message: kept(e.message, redact), ...(e.stack !== undefined ? { stack: kept(e.stack, redact) } : {}) } } : {}),
  };
}
