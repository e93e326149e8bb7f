/**
 * `context.environment` (spec 2.4): API endpoint and a short-lived token, the integration with its
 * public endpoint, the installation (organization, space or site) and the manifest's secrets.
 * environmentOf builds it for one invocation, with the tokens minted for it.
 */
import type { Installation } from '../installations/index.ts';
import type { LoadedIntegration } from '../registry/index.ts';
import { installationEndpoint, installationLocation, integrationEndpoint, runtimeEndpoint } from '../installations/urls.ts';
import { invocationTokenTtl } from '../installations/tokens.ts';
import type { RuntimeDeps } from './service-deps.ts';

export { installationEndpoint, installationLocation, integrationEndpoint, invocationTokenTtl, runtimeEndpoint };

export function buildEnvironment(opts: {
  publicUrl: string;
  integration: LoadedIntegration;
  installation?: Installation;
  /** Short-lived tokens: the installation's (when there is one) and the integration's. */
  tokens: { installation?: string; integration?: string };
  /** GitBook's shape (gitbook-manifest.yaml): `installation.target` is `{ organization }`, this id. */
  organization?: string;
  /** GitBook's `signingSecrets` (gitbook-manifest.yaml only): keys the integration's code may sign its own data with. */
  signingSecrets?: { integration: string; installation?: string };
}): Record<string, unknown> {
  const { publicUrl, integration, installation, tokens } = opts;
  const m = integration.manifest;
  const gitbook = integration.dialect === 'gitbook';
  const endpoint = installation ? installationEndpoint(publicUrl, m.name, installation.id) : undefined;
  // Spec 2.4: `integration.urls.publicEndpoint` is "the public HTTPS endpoint of the installation".
  // GitBook's is the integration-wide one (its OAuth redirect URLs are built on it): a
  // gitbook-manifest.yaml keeps that, and so does an invocation with no installation.
  const integrationUrl = endpoint && !gitbook ? endpoint : integrationEndpoint(publicUrl, m.name);
  const env: Record<string, unknown> = {
    apiEndpoint: `${publicUrl}/api/v1`,
    apiTokens: { ...(tokens.installation ? { installation: tokens.installation } : {}), ...(tokens.integration ? { integration: tokens.integration } : {}) },
    integration: {
      name: m.name,
      title: m.title,
      description: m.description,
      visibility: m.visibility,
      scopes: m.scopes,
      version: integration.script?.version ?? null,
      // No separate cookieless content origin here: content URLs are the public endpoints.
      urls: { publicEndpoint: integrationUrl, publicContentEndpoint: integrationUrl },
    },
    secrets: { ...integration.secrets },
  };
  if (gitbook) {
    // What GitBook's Integration object carries that the manifest holds (code reads them, e.g.
    // integration.externalLinks[0].url); lists default to empty as in GitBook's API.
    Object.assign(env.integration as Record<string, unknown>, {
      object: 'integration',
      summary: m.summary,
      target: (m as { target?: string }).target ?? 'organization',
      categories: m.categories ?? [],
      externalLinks: m.externalLinks ?? [],
      blocks: m.blocks ?? [],
      configurations: m.configurations ?? {},
      previewImages: [],
    });
    if (opts.signingSecrets) {
      const t = opts.signingSecrets;
      const forContent = installation && installation.target !== 'organization' ? { [`${installation.target}Installation`]: t.installation } : {};
      env.signingSecrets = { integration: t.integration, ...(t.installation ? { installation: t.installation, ...forContent } : {}) };
    }
  }
  if (!installation || !endpoint) return env;
  const location = installationLocation(publicUrl, m.name, installation.id);
  const urls = gitbook ? { location, publicEndpoint: endpoint, publicContentEndpoint: endpoint } : { publicEndpoint: endpoint };
  const common = {
    status: installation.status,
    configuration: installation.configuration,
    externalIds: installation.externalIds,
    urls,
  };
  env.installation = {
    id: installation.id,
    // The spec's target is a string; GitBook's is the organization that installed it.
    target: gitbook ? { organization: opts.organization ?? 'local' } : installation.target,
    space_selection: gitbook ? selection(installation) : spaceSelection(installation),
    ...(gitbook ? { site_selection: selection(installation) } : {}),
    ...common,
  };
  // GitBook's space and site installations name their integration and installation (a flat
  // installation here: the same id).
  const content = { ...(gitbook ? { integration: m.name, installation: installation.id } : {}), ...common, urls: { ...urls, publicContentEndpoint: endpoint } };
  if (installation.target === 'space') env.spaceInstallation = { space: installation.space, ...content };
  // Spec 2.4 gives a site installation the `space` it is installed in: the one the install named
  // beside its site (null when it named none). GitBook's site installations carry the site only.
  if (installation.target === 'site') env.siteInstallation = { ...(gitbook ? {} : { space: installation.space ?? null }), site: installation.site, ...content };
  return env;
}

/** GitBook's `IntegrationInstallationSpaceSelection` (and site selection): a string, `all` or `selected`. */
function selection(installation: Installation): 'all' | 'selected' {
  return installation.target === 'organization' ? 'all' : 'selected';
}

/**
 * Spec 2.4's `space_selection` object ("whether all spaces or selected spaces are used"; its fields
 * are not shown). GitBook's API defines no object: it has the string `space_selection` (`all` or
 * `selected`) and, beside it, `spaces`, a count. The object holds both, the spaces as their ids: an
 * organization installation uses all spaces (`spaces` empty), a space installation its space, a
 * site installation the space it names, if any.
 */
export function spaceSelection(installation: Installation): { selection: 'all' | 'selected'; spaces: string[] } {
  const mode = selection(installation);
  return { selection: mode, spaces: mode === 'selected' && installation.space ? [installation.space] : [] };
}

/**
 * The environment one invocation gets, with tokens minted for it (installation and integration,
 * living `tokenTtlMs`) and, for GitBook's dialect, the signing secrets.
 */
export function environmentOf(deps: Pick<RuntimeDeps, 'publicUrl' | 'installations' | 'tokenTtlMs' | 'organization'>) {
  return function environmentFor(integration: LoadedIntegration, installation?: Installation): Record<string, unknown> {
    return buildEnvironment({
      publicUrl: deps.publicUrl(),
      integration,
      installation,
      tokens: {
        installation: installation ? deps.installations.invocationToken(installation.id, deps.tokenTtlMs) : undefined,
        integration: deps.installations.integrationToken(integration.name, deps.tokenTtlMs),
      },
      organization: deps.organization?.(),
      signingSecrets:
        integration.dialect === 'gitbook'
          ? {
              integration: deps.installations.signingSecret('integration', integration.name),
              installation: installation ? deps.installations.signingSecret('installation', installation.id) : undefined,
            }
          : undefined,
    });
  };
}
