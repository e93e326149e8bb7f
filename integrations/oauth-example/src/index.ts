/**
 * OAuth example: createOAuthHandler() mounted at /oauth (the callback_url of the "Connect" button),
 * and /me, which calls the provider's API with the stored access token.
 */
import { createIntegration, createOAuthHandler, ExposableError } from '@switchyard/runtime';

/** The path below the installation's public endpoint ("/oauth", "/me"). */
function routeOf(request: Request, environment: any): string {
  const endpoint: string | undefined = environment?.installation?.urls?.publicEndpoint ?? environment?.integration?.urls?.publicEndpoint;
  const path = new URL(request.url).pathname;
  const base = endpoint ? new URL(endpoint).pathname.replace(/\/+$/, '') : '';
  return base && path.startsWith(base) ? path.slice(base.length) || '/' : path;
}

export default createIntegration({
  fetch: async (request: Request, context: any) => {
    const { secrets } = context.environment;
    const route = routeOf(request, context.environment);

    if (route === '/oauth') {
      const oauth = createOAuthHandler({
        clientId: secrets.CLIENT_ID,
        clientSecret: secrets.CLIENT_SECRET,
        authorizeURL: `${secrets.PROVIDER_URL}/authorize`,
        accessTokenURL: `${secrets.PROVIDER_URL}/token`,
        scopes: ['openid', 'profile'],
        // Spec 2.3: raise when the exchange is not ok; keep the token under oauth_credentials.
        extractCredentials: async (response: any) => {
          if (response.ok === false || !response.access_token)
            throw new Error(`the token exchange failed: ${JSON.stringify(response)}`);
          return { configuration: { oauth_credentials: { access_token: response.access_token } } };
        },
      });
      return oauth(request, context);
    }

    if (route === '/me') {
      const token = context.environment.installation?.configuration?.oauth_credentials?.access_token;
      if (!token) throw new ExposableError('not connected yet: press "Connect" in the configuration first', 409);
      const res = await fetch(`${secrets.PROVIDER_URL}/userinfo`, { headers: { Authorization: `Bearer ${token}` } });
      return new Response(await res.text(), { status: res.status, headers: { 'content-type': 'application/json' } });
    }

    return new Response('Not found', { status: 404 });
  },
});
