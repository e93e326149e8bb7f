/**
 * Who may reach an installation through the management API, and what of it they see. Named kinds only (fail closed): the
 * admin; an installation, itself; an integration's token (GitBook's integration-wide token, handed
 * to invocations), the installations of its own integration.
 */
import { SwitchyardError } from '../errors.ts';
import type { Principal } from '../http/app.ts';
import { hideUrlCredentials } from '../log/index.ts';
import { setOwn } from '../schema/index.ts';
import type { Installer } from './visibility.ts';

export function mayReach(p: Principal, installation: { id: string; integration: string }): boolean {
  if (p.kind === 'admin') return true;
  if (p.kind === 'installation') return p.installationId === installation.id;
  if (p.kind === 'integration') return p.integration === installation.integration;
  return false;
}

/** Throws 403 unless `p` may reach the installation, saying whose token it is. */
export function requireReach(p: Principal, installation: { id: string; integration: string }): void {
  if (mayReach(p, installation)) return;
  if (p.kind === 'installation') throw new SwitchyardError('forbidden', `this token belongs to installation ${p.installationId}, not ${installation.id}`);
  if (p.kind === 'integration')
    throw new SwitchyardError(
      'forbidden',
      `this token belongs to integration "${p.integration}"; installation ${installation.id} is one of "${installation.integration}"`,
    );
  throw new SwitchyardError('forbidden', 'this token cannot reach installations');
}

/**
 * Who installs, for the visibility rules (visibility.ts): the admin, or an install link's holder.
 * Installation and integration tokens install nothing (403).
 */
export function installerOf(p: Principal): Installer {
  if (p.kind === 'admin') return { kind: 'admin' };
  if (p.kind === 'link') return { kind: 'link', integration: p.integration, linkId: p.linkId };
  throw new SwitchyardError('forbidden', `an ${p.kind} token cannot install`, {
    hint: 'installing takes the admin token, or an install link of the integration (`switchyard integrations link <name>` makes one)',
  });
}

/** Whether `p` may speak for integration `name` as a whole (list its installations). */
export function mayListFor(p: Principal, name: string): 'all' | 'own' | false {
  if (p.kind === 'admin') return 'all';
  if (p.kind === 'integration') return p.integration === name ? 'all' : false;
  if (p.kind === 'installation') return p.integration === name ? 'own' : false;
  return false;
}

/** Whether the integration's own code is calling (a token handed to one of its invocations). */
export function isIntegrationCode(p: Principal): boolean {
  return (p.kind === 'installation' || p.kind === 'integration') && p.via === 'invocation';
}

/**
 * Values that hold credentials are hidden unless `reveal`: reserved OAuth tokens, and the user-info
 * of URLs (a webhook_url like `https://***@host/`). An edit that leaves a value alone keeps it.
 */
export function redactConfiguration(configuration: Record<string, unknown>, reveal: boolean): Record<string, unknown> {
  if (reveal) return configuration;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(configuration)) setOwn(out, k, typeof v === 'string' ? hideUrlCredentials(v) : v);
  if (configuration.oauth_credentials === undefined) return out;
  const creds = configuration.oauth_credentials as Record<string, unknown>;
  const hidden: Record<string, unknown> = {};
  for (const k of Object.keys(creds ?? {})) hidden[k] = /token|secret/i.test(k) ? '[redacted]' : creds[k];
  return { ...out, oauth_credentials: hidden };
}

/**
 * Who may see stored credentials: the admin, or integration code during an invocation (a
 * short-lived invocation or integration token: the credentials are in that invocation's reach
 * anyway). Never the long-lived installation token handed out at install.
 */
export function mayReveal(p: Principal): boolean {
  return p.kind === 'admin' || ((p.kind === 'installation' || p.kind === 'integration') && p.via === 'invocation');
}
