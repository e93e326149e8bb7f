/**
 * Where an integration and its installations are reached on this server: pure URL builders, below
 * both the installations module (which shows them) and the runtime (which serves them).
 */

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

/** GitBook's API URL of an installation (`urls.location`): its route under this server's API. */
export function installationLocation(publicUrl: string, integration: string, installationId: string): string {
  return `${publicUrl}/api/v1/integrations/${encodeURIComponent(integration)}/installations/${encodeURIComponent(installationId)}`;
}
