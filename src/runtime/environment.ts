/**
 * `context.environment` (spec 2.4): API endpoint and a short-lived token, the integration with its
 * public endpoint, the installation (organization, space or site) and the manifest's secrets.
 */
import type { Installation } from '../installations/index.ts';
import type { LoadedIntegration } from '../registry/index.ts';

/** The runtime endpoint (authenticated multipart envelopes, spec 4.1). */
export function runtimeEndpoint(publicUrl: string, integration: string): string {
  return `${publicUrl}/v1/integrations/${encodeURIComponent(integration)}`;
}

/**
 * The integration's own public endpoint (`integration.urls.publicEndpoint`, as GitBook has it):
 * any method, handed to the integration's fetch with no installation in the environment. OAuth
 * redirect URLs and provider webhooks that serve every installation are built from it.
 */
export function integrationEndpoint(publicUrl: string, integration: string): string {
  return `${runtimeEndpoint(publicUrl, integration)}/integration`;
}

export function installationEndpoint(publicUrl: string, integration: string, installationId: string): string {
  return `${runtimeEndpoint(publicUrl, integration)}/installations/${encodeURIComponent(installationId)}`;
}

export function buildEnvironment(opts: {
  publicUrl: string;
  integration: LoadedIntegration;
  installation?: Installation;
  token?: string;
}): Record<string, unknown> {
  const { publicUrl, integration, installation } = opts;
  const m = integration.manifest;
  const env: Record<string, unknown> = {
    apiEndpoint: `${publicUrl}/api/v1`,
    apiTokens: opts.token ? { installation: opts.token } : {},
    integration: {
      name: m.name,
      title: m.title,
      description: m.description,
      visibility: m.visibility,
      scopes: m.scopes,
      version: integration.script?.version ?? null,
      // No separate cookieless content origin here: content URLs are the public endpoints.
      urls: { publicEndpoint: integrationEndpoint(publicUrl, m.name), publicContentEndpoint: integrationEndpoint(publicUrl, m.name) },
    },
    secrets: { ...integration.secrets },
  };
  if (!installation) return env;
  const endpoint = installationEndpoint(publicUrl, m.name, installation.id);
  const urls = { publicEndpoint: endpoint };
  const common = {
    status: installation.status,
    configuration: installation.configuration,
    externalIds: installation.externalIds,
    urls,
  };
  env.installation = {
    id: installation.id,
    target: installation.target,
    space_selection: installation.target === 'organization' ? 'all' : 'selected',
    ...common,
  };
  const content = { ...common, urls: { ...urls, publicContentEndpoint: endpoint } };
  if (installation.target === 'space') env.spaceInstallation = { space: installation.space, ...content };
  if (installation.target === 'site') env.siteInstallation = { site: installation.site, ...content };
  return env;
}
