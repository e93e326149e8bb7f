/**
 * createOAuthHandler (spec 2.3, 5.1): a fetch handler for the OAuth redirect path.
 *
 * Without `?code`: redirect to authorizeURL with client_id, response_type=code, redirect_uri (the
 * static redirectURL, else this request's URL without its query), scope (space-joined), state and
 * prompt. With `?code`: check the state, POST the code to accessTokenURL as
 * application/x-www-form-urlencoded with `Accept: application/json`, run extractCredentials, store
 * the result in the installation's configuration (under `oauth_credentials` by default) and answer
 * a page that closes the window.
 *
 * The state is issued and verified by the server through context.api (`POST oauth/state` with
 * `{ installationId, redirectUri }` answers `{ state }`; `POST oauth/state/consume` with
 * `{ state }` answers `{ installationId }` or an error), so it can be signed, single-use and
 * expiring there: never unsigned JSON that names an installation.
 */
import { fetch } from '../web/fetch.ts';
import { Response } from '../web/response.ts';
import { URL, URLSearchParams } from '../web/url.ts';
import { ExposableError } from './errors.ts';

export interface OAuthConfig {
  clientId: string;
  clientSecret: string;
  authorizeURL: string;
  accessTokenURL: string;
  redirectURL?: string;
  scopes?: string[];
  prompt?: string;
  extractCredentials?: (response: any) => OAuthCredentials | Promise<OAuthCredentials>;
}

export interface OAuthCredentials {
  configuration: Record<string, unknown>;
}

/** The default: keep access_token, refresh_token and an absolute expires_at (ms since epoch). */
export function defaultExtractCredentials(response: any): OAuthCredentials {
  if (!response || typeof response !== 'object') throw new Error(`OAuth token exchange answered something that is not an object: ${JSON.stringify(response)}`);
  if (response.ok === false || response.error) throw new Error(`OAuth token exchange failed: ${JSON.stringify(response)}`);
  if (typeof response.access_token !== 'string') throw new Error(`OAuth token exchange answered no access_token: ${JSON.stringify(response)}`);
  const creds: Record<string, unknown> = { access_token: response.access_token };
  if (typeof response.refresh_token === 'string') creds.refresh_token = response.refresh_token;
  const expiresIn = Number(response.expires_in);
  if (Number.isFinite(expiresIn) && expiresIn > 0) creds.expires_at = Date.now() + expiresIn * 1000;
  return { configuration: { oauth_credentials: creds } };
}

const closePage = `<!doctype html><html><head><meta charset="utf-8"><title>Connected</title></head><body><p>Connected. You can close this window.</p><script>window.close()</script></body></html>`;

function installationIdOf(context: any): string | undefined {
  const env = context?.environment ?? {};
  return env.installation?.id ?? env.id;
}

export function createOAuthHandler(config: OAuthConfig): (request: { url: string }, context: any) => Promise<Response> {
  for (const k of ['clientId', 'clientSecret', 'authorizeURL', 'accessTokenURL'] as const) {
    if (typeof config?.[k] !== 'string' || !config[k]) throw new TypeError(`createOAuthHandler(): \`${k}\` is required (a non-empty string)`);
  }
  const extract = config.extractCredentials ?? defaultExtractCredentials;

  return async function oauthHandler(request: { url: string }, context: any): Promise<Response> {
    const url = new URL(request.url);
    const redirectUri = config.redirectURL ?? `${url.origin}${url.pathname}`;
    const providerError = url.searchParams.get('error');
    if (providerError) {
      const desc = url.searchParams.get('error_description');
      throw new ExposableError(`authorization was not granted: ${providerError}${desc ? ` (${desc})` : ''}`, 400);
    }
    const code = url.searchParams.get('code');
    if (!code) {
      const issued = await context.api.request('POST', 'oauth/state', { installationId: installationIdOf(context), redirectUri });
      const target = new URL(config.authorizeURL);
      target.searchParams.set('client_id', config.clientId);
      target.searchParams.set('response_type', 'code');
      target.searchParams.set('redirect_uri', redirectUri);
      if (config.scopes?.length) target.searchParams.set('scope', config.scopes.join(' '));
      target.searchParams.set('state', String(issued?.state ?? ''));
      if (config.prompt) target.searchParams.set('prompt', config.prompt);
      return new Response(null, { status: 302, headers: { location: target.href } });
    }

    const state = url.searchParams.get('state');
    if (!state) throw new ExposableError('the OAuth callback has no state parameter', 400);
    let verified: { installationId?: string } | null;
    try {
      verified = await context.api.request('POST', 'oauth/state/consume', { state });
    } catch (e) {
      throw new ExposableError(`the OAuth state is invalid or expired; start the connection again (${(e as Error).message})`, 400);
    }

    const res = await fetch(config.accessTokenURL, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
      body: new URLSearchParams({
        client_id: config.clientId,
        client_secret: config.clientSecret,
        code,
        redirect_uri: redirectUri,
        grant_type: 'authorization_code',
      }),
    });
    const text = await res.text();
    let body: any;
    try {
      body = JSON.parse(text);
    } catch {
      body = Object.fromEntries(new URLSearchParams(text));
    }
    if (!res.ok) throw new Error(`OAuth token exchange at ${config.accessTokenURL} answered ${res.status}: ${text.slice(0, 1000)}`);
    const credentials = await extract(body);
    if (!credentials || typeof credentials.configuration !== 'object') throw new Error('extractCredentials() must return { configuration: { ... } }');

    const installationId = verified?.installationId ?? installationIdOf(context);
    if (!installationId) throw new Error('the OAuth flow finished but no installation is known to store the credentials in');
    const current = await context.api.installations.get(installationId);
    const configuration = current?.configuration ?? current?.installation?.configuration ?? {};
    await context.api.installations.update(installationId, { configuration: { ...configuration, ...credentials.configuration } });
    return new Response(closePage, { headers: { 'content-type': 'text/html; charset=utf-8' } });
  };
}
