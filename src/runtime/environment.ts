/**
 * `context.environment` (spec 2.4): API endpoint and a short-lived token, the integration with its
 * public endpoint, the installation (organization, space or site) and the manifest's secrets.
 */
import type { Installation } from '../installations/index.ts';
import type { LoadedIntegration } from '../registry/index.ts';

export function integrationEndpoint(publicUrl: string, integration: string): string {
  return `${publicUrl}/v1/integrations/${encodeURIComponent(integration)}`;
}

export function installationEndpoint(publicUrl: string, integration: string, installationId: string): string {
  return `${integrationEndpoint(publicUrl, integration)}/installations/${encodeURIComponent(installationId)}`;
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
      urls: { publicEndpoint: integrationEndpoint(publicUrl, m.name) },
    },
    secrets: { ...integration.secrets },
  };
  if (!installation) return env;
  const urls = { publicEndpoint: installationEndpoint(publicUrl, m.name, installation.id) };
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
  if (installation.target === 'space') env.spaceInstallation = { space: installation.space, ...common };
  if (installation.target === 'site') env.siteInstallation = { site: installation.site, ...common };
  return env;
}
