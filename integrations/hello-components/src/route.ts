/**
 * The path of a request below the installation's public endpoint: "/" for the endpoint itself,
 * "/channels" for <publicEndpoint>/channels.
 */
export function routeOf(request: Request, environment: any): string {
  const endpoint: string | undefined =
    environment?.installation?.urls?.publicEndpoint ?? environment?.integration?.urls?.publicEndpoint;
  const path = new URL(request.url).pathname;
  const base = endpoint ? new URL(endpoint).pathname.replace(/\/+$/, '') : '';
  if (base && path.startsWith(base)) return path.slice(base.length) || '/';
  return path;
}
