/**
 * OAuth example: createOAuthHandler() mounted at /oauth (the callback_url of the "Connect" button);
 * /me renews the token when it is about to expire and calls the provider's userinfo endpoint with it.
 *
 * The provider is found from its URL (secret PROVIDER_URL): its OpenID discovery document when it
 * has one (/.well-known/openid-configuration), else <PROVIDER_URL>/authorize, /token and /userinfo.
 */
import { createIntegration, createOAuthHandler, defaultExtractCredentials, ExposableError } from '@switchyard/runtime';

interface Endpoints {
  authorize: string;
  token: string;
  userinfo: string;
}

/** The path below the installation's public endpoint ("/oauth", "/me"). */
function routeOf(request: Request, environment: any): string {
  const endpoint: string | undefined = environment?.installation?.urls?.publicEndpoint ?? environment?.integration?.urls?.publicEndpoint;
  const path = new URL(request.url).pathname;
  const base = endpoint ? new URL(endpoint).pathname.replace(/\/+$/, '') : '';
  return base && path.startsWith(base) ? path.slice(base.length) || '/' : path;
}

async function endpointsOf(providerUrl: string): Promise<Endpoints> {
  const base = providerUrl.replace(/\/+$/, '');
  try {
    const res = await fetch(`${base}/.well-known/openid-configuration`, { headers: { accept: 'application/json' } });
    if (res.ok) {
      const doc: any = await res.json();
      if (typeof doc.authorization_endpoint === 'string' && typeof doc.token_endpoint === 'string')
        return { authorize: doc.authorization_endpoint, token: doc.token_endpoint, userinfo: doc.userinfo_endpoint ?? `${base}/userinfo` };
    }
  } catch {
    // No discovery document: the conventional paths below.
  }
  return { authorize: `${base}/authorize`, token: `${base}/token`, userinfo: `${base}/userinfo` };
}

function oauthFor(secrets: Record<string, string>, endpoints: Endpoints) {
  return createOAuthHandler({
    clientId: secrets.CLIENT_ID,
    clientSecret: secrets.CLIENT_SECRET,
    authorizeURL: endpoints.authorize,
    accessTokenURL: endpoints.token,
    scopes: ['openid', 'profile'],
    // Spec 2.3: an answer with `ok: false` (or an OAuth error) raises; the default does that and
    // keeps access_token, refresh_token and expires_at. We also keep the granted scope.
    extractCredentials: (response: any) => {
      const credentials = defaultExtractCredentials(response);
      if (typeof response.scope === 'string') credentials.configuration.oauth_credentials.scope = response.scope;
      return credentials;
    },
  });
}

export default createIntegration({
  fetch: async (request: Request, context: any) => {
    const secrets = context.environment.secrets ?? {};
    const route = routeOf(request, context.environment);
    if (route !== '/oauth' && route !== '/me') return new Response('Not found: this integration answers /oauth and /me', { status: 404 });
    if (!secrets.CLIENT_ID || !secrets.CLIENT_SECRET || !secrets.PROVIDER_URL)
      throw new ExposableError('the OAuth app is not configured: set OAUTH_EXAMPLE_CLIENT_ID, _CLIENT_SECRET and _PROVIDER_URL', 503);
    const endpoints = await endpointsOf(secrets.PROVIDER_URL);
    const oauth = oauthFor(secrets, endpoints);

    if (route === '/oauth') return oauth(request, context);

    // /me: a call to the provider's API with the stored token, renewed first when it expires soon.
    if (!context.environment.installation?.configuration?.oauth_credentials)
      throw new ExposableError('not connected yet: open the "Connect" link of this installation first', 409);
    let credentials: Record<string, any>;
    try {
      credentials = await oauth.refreshCredentials(context, { withinSeconds: 60 });
    } catch (e) {
      // An OAuthError's message says what the provider answered, with secrets hidden.
      throw new ExposableError(`the token could not be renewed: ${(e as Error).message}`, 502);
    }
    const res = await fetch(endpoints.userinfo, { headers: { authorization: `Bearer ${credentials.access_token}`, accept: 'application/json' } });
    return new Response(await res.text(), { status: res.status, headers: { 'content-type': res.headers.get('content-type') ?? 'application/json' } });
  },
});
