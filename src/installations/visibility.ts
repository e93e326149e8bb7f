/**
 * Who may install what (spec 2.5, `visibility`). A self-hosted server installs for one organization,
 * its own (`organization:` in config.yaml), and has two doors:
 *
 * - the admin token (the CLI, scripts, and the console, whose session is opened with it): installs
 *   any integration, whatever its visibility: it is the operator;
 * - an install link (links.ts): installs the one integration it names, under the rules below.
 *
 *   private   only when the manifest's `organization` is the server's
 *   unlisted  through its own install link (the link is the door)
 *   public    anyone who may install at all; listed in the catalogue
 *
 * Installation and integration tokens install nothing. The rules are checked when an installation
 * is made, never again: existing installations are not touched by a change of visibility or of
 * `organization:`.
 */
import { SwitchyardError } from '../errors.ts';
import type { Config } from '../config/index.ts';

/** Who installs: the admin, or the holder of an install link of `integration`. */
export type Installer = { kind: 'admin' } | { kind: 'link'; integration: string; linkId: string };

/** The organization names this server answers to (its id and subdomain), from `organization:`. */
export function serverOrganizations(config: Pick<Config, 'organization'>): string[] {
  const o = config.organization;
  return o === undefined ? [] : typeof o === 'string' ? [o] : o;
}

/**
 * Why `by` may not install the integration named `name`, or undefined when it may. Fail closed: a
 * visibility this function does not know installs through the admin token only.
 */
export function installRefusal(
  name: string,
  manifest: { organization?: unknown; visibility?: unknown },
  by: Installer,
  organizations: readonly string[],
): SwitchyardError | undefined {
  if (by.kind === 'admin') return undefined;
  const visibility = manifest.visibility;
  const adminHint = `the admin token installs it whatever its visibility (\`switchyard install ${name}\`)`;
  if (by.integration !== name) {
    // A link is for its own integration; an unlisted one needs its own link, whatever else is held.
    if (visibility === 'unlisted')
      return new SwitchyardError(
        'install_link_required',
        `integration "${name}" is unlisted: it installs only through its own install link, and this link is for "${by.integration}"`,
        {
          hint: `ask for a link of "${name}" (\`switchyard integrations link ${name}\`); ${adminHint}`,
        },
      );
    return new SwitchyardError('forbidden', `this install link installs "${by.integration}", not "${name}"`, { where: 'integration', hint: adminHint });
  }
  if (visibility === 'public' || visibility === 'unlisted') return undefined;
  if (visibility === 'private') {
    const owner = String(manifest.organization ?? '');
    if (organizations.includes(owner)) return undefined;
    const here = organizations.length
      ? `this server installs for ${organizations.map((o) => `"${o}"`).join(' / ')}`
      : 'this server names no organization (`organization:` in config.yaml is unset)';
    return new SwitchyardError('integration_private', `integration "${name}" is private to organization "${owner}"; ${here}`, {
      hint: `only members of "${owner}" install it: set \`organization: ${owner}\` in config.yaml if this server is that organization's; ${adminHint}`,
    });
  }
  return new SwitchyardError('forbidden', `integration "${name}" has no visibility this server knows ("${String(visibility)}")`, { hint: adminHint });
}
