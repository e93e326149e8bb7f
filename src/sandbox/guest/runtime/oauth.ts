/**
 * createOAuthHandler (spec 2.3, 5.1): the fetch handler an integration mounts on a path of its
 * public endpoint (usually /oauth, the callback_url of a `button` property).
 *
 * - No `code` in the query: ask the server for a signed, single-use, expiring state bound to this
 *   installation (`POST oauth/state`, with a PKCE challenge unless `pkce: false`), then redirect to
 *   authorizeURL with client_id, response_type=code, redirect_uri, scope (space-joined), state,
 *   prompt, code_challenge and code_challenge_method=S256.
 * - `code` in the query: burn the state (`POST oauth/state/consume`, which hands back the PKCE
 *   code_verifier once), POST the code and the verifier to
 *   accessTokenURL (x-www-form-urlencoded, Accept: application/json) through the sandbox's fetch,
 *   run extractCredentials, write the result into the installation's configuration with the
 *   installation's own token (PATCH installations/<id>) and answer a page that closes the window.
 * - Anything that goes wrong (provider error, `ok: false`, forged/reused/expired state, a failed
 *   exchange) is answered as an HTML page saying what happened, because a person's browser lands
 *   there; nothing is stored. Secrets (client secret, tokens) are never shown nor logged.
 *
 * handler.refreshCredentials(context) / refreshCredentials(context, config) renew stored
 * credentials that are about to expire (grant_type=refresh_token) and store them, one invocation
 * per installation at a time (a server-side claim; the others wait and use what it stored).
 */
import { console } from '../web/console.ts';
import { fetch } from '../web/fetch.ts';
import { Response } from '../web/response.ts';
import { setTimeout } from '../web/timers.ts';
import { URL, URLSearchParams } from '../web/url.ts';
// The option types are those of the public declarations (runtime-oauth.d.ts), written once.
import type { OAuthConfig, RefreshOptions } from '@switchyard/runtime';

export type { OAuthConfig, RefreshOptions };

export interface OAuthCredentials {
  configuration: Record<string, unknown>;
}

/** A handler made by createOAuthHandler: a fetch handler with the refresh helper bound to its config. */
export interface OAuthHandler {
  (request: { url: string; method?: string }, context: any): Promise<Response>;
  refreshCredentials(context: any, options?: RefreshOptions): Promise<Record<string, any>>;
}

/**
 * A failed OAuth step. `response` is what the provider answered (parsed JSON or form, else text);
 * `error` its OAuth error code when it gave one; `status` its HTTP status.
 */
export class OAuthError extends Error {
  readonly response: unknown;
  readonly error?: string;
  readonly status?: number;
  constructor(message: string, opts: { response?: unknown; error?: string; status?: number } = {}) {
    super(message);
    this.name = 'OAuthError';
    this.response = opts.response;
    if (opts.error !== undefined) this.error = opts.error;
    if (opts.status !== undefined) this.status = opts.status;
  }
}

const SECRET_KEY = /token|secret|password|code_verifier|assertion/i;

/** A copy of a provider's answer that is safe to show and log: secret-looking values hidden. */
function redactResponse(value: unknown, depth = 0): unknown {
  if (depth > 4 || value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) return value.slice(0, 20).map((v) => redactResponse(v, depth + 1));
  // No prototype: a provider's `__proto__` key is a key like any other, not the copy's prototype.
  const out: Record<string, unknown> = Object.create(null);
  for (const [k, v] of Object.entries(value))
    out[k] = SECRET_KEY.test(k) && v !== undefined && v !== null && v !== '' ? '[redacted]' : redactResponse(v, depth + 1);
  return out;
}

/** The provider's answer as a short text for messages: secret-looking values hidden, at most 500 characters. */
export function describeResponse(response: unknown): string {
  let text: string;
  try {
    text = typeof response === 'string' ? response : (JSON.stringify(redactResponse(response)) ?? String(response));
  } catch {
    text = String(response);
  }
  return text.length > 500 ? `${text.slice(0, 500)}...` : text;
}

function oauthErrorOf(response: any): string | undefined {
  return response && typeof response === 'object' && typeof response.error === 'string' && response.error ? response.error : undefined;
}

function providerRefusal(what: string, response: any, status?: number): OAuthError {
  const code = oauthErrorOf(response);
  const desc = typeof response?.error_description === 'string' ? response.error_description : typeof response?.message === 'string' ? response.message : '';
  const reason = code
    ? `${code}${desc ? ` (${desc})` : ''}`
    : response && typeof response === 'object' && response.ok === false
      ? 'ok: false'
      : `HTTP ${status}`;
  return new OAuthError(`${what} failed: ${reason}; the provider answered ${status !== undefined ? `${status} ` : ''}${describeResponse(response)}`, {
    response,
    error: code,
    status,
  });
}

/**
 * The default extractCredentials: keep access_token, refresh_token and expires_at (milliseconds
 * since the epoch, computed from expires_in). Raises an OAuthError carrying the response when the
 * answer has `ok: false`, an `error`, or no access_token.
 */
export function defaultExtractCredentials(response: any): OAuthCredentials {
  if (!response || typeof response !== 'object')
    throw new OAuthError(`the token endpoint answered something that is not an object: ${describeResponse(response)}`, { response });
  if (response.ok === false || oauthErrorOf(response)) throw providerRefusal('the token exchange', response);
  if (typeof response.access_token !== 'string' || !response.access_token)
    throw new OAuthError(`the token endpoint answered no access_token: ${describeResponse(response)}`, { response });
  const creds: Record<string, unknown> = { access_token: response.access_token };
  if (typeof response.refresh_token === 'string' && response.refresh_token) creds.refresh_token = response.refresh_token;
  const expiresIn = Number(response.expires_in);
  if (response.expires_in !== undefined && response.expires_in !== null && Number.isFinite(expiresIn) && expiresIn > 0)
    creds.expires_at = Date.now() + expiresIn * 1000;
  return { configuration: { oauth_credentials: creds } };
}

type UrlKey = 'authorizeURL' | 'accessTokenURL' | 'redirectURL';

/** Throws unless `v` is an absolute http(s) URL. */
function checkUrl(where: string, k: UrlKey, v: unknown): string {
  let u: URL | undefined;
  try {
    u = new URL(String(v));
  } catch {
    /* reported below */
  }
  if (typeof v !== 'string' || !u || (u.protocol !== 'https:' && u.protocol !== 'http:'))
    throw new TypeError(`${where}: \`${k}\` must be an absolute http(s) URL, got ${JSON.stringify(v)}`);
  return v;
}

/**
 * authorizeURL and accessTokenURL as strings: GitBook lets them be functions of the installation
 * (a provider whose host each installation configures); they are called with it here, and what
 * they return is held to the same rules as a string.
 */
function resolveUrls(config: OAuthConfig, installation: unknown, where: string): ResolvedConfig {
  const resolve = (k: 'authorizeURL' | 'accessTokenURL'): string => {
    const v = config[k];
    if (typeof v !== 'function') return v;
    let got: unknown;
    try {
      got = v(installation);
    } catch (e) {
      throw new OAuthError(`${where}: \`${k}\`(installation) threw: ${(e as Error)?.message ?? e}`);
    }
    return checkUrl(`${where}: the function`, k, got);
  };
  return { ...config, authorizeURL: resolve('authorizeURL'), accessTokenURL: resolve('accessTokenURL') };
}

/** A configuration whose URLs are strings: what resolveUrls returns. */
type ResolvedConfig = Omit<OAuthConfig, 'authorizeURL' | 'accessTokenURL'> & { authorizeURL: string; accessTokenURL: string };

function checkConfig(config: OAuthConfig, where: string): void {
  if (!config || typeof config !== 'object') throw new TypeError(`${where}: expects an object { clientId, clientSecret, authorizeURL, accessTokenURL, ... }`);
  for (const k of ['clientId', 'clientSecret', 'authorizeURL', 'accessTokenURL'] as const) {
    const v = config[k] as unknown;
    if (typeof v === 'function' && (k === 'authorizeURL' || k === 'accessTokenURL')) continue;
    if (typeof v !== 'string' || !v)
      throw new TypeError(
        `${where}: \`${k}\` is required (a non-empty string${k.endsWith('URL') ? ', or a function (installation) => URL' : ''})${k.startsWith('client') ? '; it usually comes from environment.secrets: is the secret set?' : ''}`,
      );
  }
  for (const k of ['authorizeURL', 'accessTokenURL', 'redirectURL'] as const) {
    const v = config[k] as unknown;
    if (v === undefined || typeof v === 'function') continue;
    checkUrl(where, k, v);
  }
  if (config.scopes !== undefined && (!Array.isArray(config.scopes) || config.scopes.some((s) => typeof s !== 'string')))
    throw new TypeError(`${where}: \`scopes\` must be a list of strings`);
  if (config.prompt !== undefined && typeof config.prompt !== 'string') throw new TypeError(`${where}: \`prompt\` must be a string`);
  if (config.extractCredentials !== undefined && typeof config.extractCredentials !== 'function')
    throw new TypeError(`${where}: \`extractCredentials\` must be a function (response) => { configuration: { oauth_credentials: {...} } }`);
}

/** Hide every known secret value in a text that is about to be shown or logged. */
function scrub(text: string, secrets: unknown[]): string {
  let out = text;
  for (const s of secrets) if (typeof s === 'string' && s.length >= 4) out = out.split(s).join('[redacted]');
  return out;
}

const escapeHtml = (s: string) => s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

// The script reads only data-* attributes (escaped text): no value is ever spliced into code.
// It tells the window that opened the flow (same origin only), then closes on success.
const PAGE_SCRIPT =
  "(function(){var d=document.body.dataset,m={type:'switchyard:oauth',status:d.status,installationId:d.installation||null,message:d.message||null};" +
  'try{if(window.opener&&window.opener!==window)window.opener.postMessage(m,window.location.origin)}catch(e){}' +
  "if(d.status==='connected')setTimeout(function(){window.close()},50)})()";

const PAGE_HEADERS = {
  'content-type': 'text/html; charset=utf-8',
  'cache-control': 'no-store',
  'referrer-policy': 'no-referrer',
  'x-content-type-options': 'nosniff',
  'content-security-policy':
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
};

function page(opts: { status: number; title: string; message: string; state: 'connected' | 'error'; installationId?: string; retryHref?: string }): Response {
  const retry = opts.retryHref ? `<p><a href="${escapeHtml(opts.retryHref)}">Start the connection again</a></p>` : '';
  const close =
    opts.state === 'connected'
      ? '<p class="muted">This window closes by itself; if it does not, close it now.</p>'
      : '<p class="muted">Nothing was stored. You can close this window.</p>';
  const html =
    '<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">' +
    `<title>${escapeHtml(opts.title)}</title>` +
    '<style>body{font-family:system-ui,sans-serif;max-width:36rem;margin:3rem auto;padding:0 1rem;line-height:1.5;color:#222}h1{font-size:1.4rem}.muted{color:#666}p.message{white-space:pre-wrap;word-break:break-word}</style>' +
    `</head><body data-status="${opts.state}" data-installation="${escapeHtml(opts.installationId ?? '')}" data-message="${escapeHtml(opts.state === 'error' ? opts.message : '')}">` +
    `<main><h1>${escapeHtml(opts.title)}</h1><p class="message">${escapeHtml(opts.message)}</p>${retry}${close}</main>` +
    `<script>${PAGE_SCRIPT}</script></body></html>`;
  return new Response(html, { status: opts.status, headers: PAGE_HEADERS });
}

interface Env {
  installation?: { id?: string; urls?: { publicEndpoint?: string }; configuration?: Record<string, any> };
  [k: string]: any;
}

function envOf(context: any): Env {
  return (context?.environment ?? {}) as Env;
}

/** The installation's public endpoint plus the path this handler answers on. */
function defaultRedirectUri(requestUrl: URL, env: Env): string {
  const endpoint = env.installation?.urls?.publicEndpoint;
  if (typeof endpoint === 'string') {
    try {
      const base = new URL(endpoint);
      const basePath = base.pathname.replace(/\/+$/, '');
      const path = requestUrl.pathname;
      if (path === basePath || path.startsWith(`${basePath}/`)) return `${base.origin}${basePath}${path.slice(basePath.length)}`;
    } catch {
      /* fall back to the request's own URL */
    }
  }
  return `${requestUrl.origin}${requestUrl.pathname}`;
}

/** Parse a token endpoint's body: JSON, else form-encoded (e.g. GitHub without Accept), else the text. */
function parseTokenBody(text: string, contentType: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    /* not JSON */
  }
  if (/x-www-form-urlencoded/i.test(contentType) || (/^[\w.%-]+=/.test(text) && !/[<\s]/.test(text))) return Object.fromEntries(new URLSearchParams(text));
  return text;
}

/** POST a form to the token endpoint through the sandbox's fetch; throws OAuthError on an HTTP or OAuth error. */
async function tokenRequest(accessTokenURL: string, form: Record<string, string>, what: string): Promise<any> {
  let res: Response;
  try {
    res = await fetch(accessTokenURL, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
      body: new URLSearchParams(form),
      redirect: 'error',
    });
  } catch (e) {
    throw new OAuthError(`${what} could not reach ${accessTokenURL}: ${(e as Error)?.message ?? e}`);
  }
  const text = await res.text();
  const body = parseTokenBody(text, res.headers.get('content-type') ?? '');
  if (!res.ok) throw providerRefusal(what, body, res.status);
  return body;
}

/** Run extractCredentials and hold it to its contract; `ok: false` or `error` never get stored. */
async function extract(config: OAuthConfig, response: any): Promise<OAuthCredentials> {
  const credentials = await (config.extractCredentials ?? defaultExtractCredentials)(response);
  if (response && typeof response === 'object' && (response.ok === false || oauthErrorOf(response))) throw providerRefusal('the token exchange', response);
  if (
    !credentials ||
    typeof credentials !== 'object' ||
    !credentials.configuration ||
    typeof credentials.configuration !== 'object' ||
    Array.isArray(credentials.configuration)
  )
    throw new OAuthError('extractCredentials() must return { configuration: { oauth_credentials: { access_token } } }', { response });
  return credentials;
}

/** The reason the server gave for refusing a state (its message), from an APIError. */
function stateRefusal(e: any): { status: number; message: string } {
  const err = e?.body?.error;
  if (e?.status === 400 && err && typeof err.message === 'string')
    return { status: 400, message: `${err.message.charAt(0).toUpperCase()}${err.message.slice(1)}.` };
  return { status: 502, message: `The OAuth state could not be checked: ${String(e?.message ?? e)}` };
}

/**
 * Write what extractCredentials returned: its configuration keys (merged into the stored
 * configuration) and, as GitBook's handler does, its `externalIds`. With the installation's own
 * token, or the integration's when the callback came to the integration-wide endpoint.
 */
async function store(context: any, installationId: string, credentials: OAuthCredentials): Promise<void> {
  const { configuration } = credentials;
  const externalIds = (credentials as { externalIds?: unknown }).externalIds;
  const update: Record<string, unknown> = { configuration };
  if (externalIds !== undefined) {
    if (!Array.isArray(externalIds) || externalIds.some((x) => typeof x !== 'string'))
      throw new OAuthError('extractCredentials(): `externalIds` must be a list of strings');
    update.externalIds = externalIds;
  }
  await context.api.installations.update(installationId, update);
  // Later code of this invocation sees what was stored.
  const inst = envOf(context).installation;
  if (inst && typeof inst === 'object' && inst.id === installationId) {
    inst.configuration = { ...(inst.configuration ?? {}), ...configuration };
    if (update.externalIds) (inst as { externalIds?: unknown }).externalIds = update.externalIds;
  }
}

/**
 * Renew the installation's oauth_credentials when the access token expires within
 * `withinSeconds` (default 60), with grant_type=refresh_token, and store the result. Returns the
 * credentials in force (renewed or not). A refresh answer without a refresh_token keeps the old one.
 */
export async function refreshCredentials(context: any, config: OAuthConfig, options: RefreshOptions = {}): Promise<Record<string, any>> {
  checkConfig(config, 'refreshCredentials()');
  const env = envOf(context);
  const installationId = env.installation?.id;
  if (!installationId) throw new OAuthError('refreshCredentials() needs an installation: context.environment.installation is not set');
  const resolved = resolveUrls(config, env.installation, 'refreshCredentials()');
  let current = env.installation?.configuration?.oauth_credentials;
  if (!current || typeof current !== 'object')
    throw new OAuthError(`installation ${installationId} is not connected yet (no oauth_credentials): connect it first`);
  const within = (options.withinSeconds ?? 60) * 1000;
  const dueSoon = (c: any) => Number.isFinite(expiresAtMs(c?.expires_at)) && expiresAtMs(c.expires_at) - Date.now() <= within;
  if (!options.force && !dueSoon(current)) return current;

  // One renewal per installation at a time (a server-side claim): other invocations wait for it and
  // use what it stored, so a refresh token is spent once even when several invocations find the
  // credentials about to expire together (rotating providers refuse a refresh token used twice).
  const seen = current.expires_at;
  const renewedMeanwhile = (c: any) => c && typeof c === 'object' && c.expires_at !== seen && !dueSoon(c);
  // While another invocation holds the claim, look at what is stored (100 ms, doubling, at most
  // 3.2 s apart: about a dozen reads in 30 s) and ask for the claim again only once it has run out.
  let claimedUntil = 0;
  for (let round = 0; ; round++) {
    if (Date.now() >= claimedUntil) {
      const claim = (await context.api.request('POST', 'oauth/refresh/claim', {})) as { granted: boolean; claim?: string; until: string };
      if (claim?.granted) {
        try {
          const latest = await storedCredentials(context, installationId);
          if (renewedMeanwhile(latest)) return adopt(context, latest);
          if (latest && typeof latest === 'object') current = latest;
          return await renew(context, resolved, installationId, current);
        } finally {
          await context.api.request('POST', 'oauth/refresh/release', { claim: claim.claim }).catch(() => undefined);
        }
      }
      claimedUntil = Date.parse(claim?.until) || Date.now() + 1000;
    }
    if (round >= 20) throw new OAuthError(`another invocation has been renewing the credentials of installation ${installationId} for too long; try again`);
    await sleep(Math.max(20, Math.min(100 * 2 ** round, 3200, claimedUntil - Date.now())));
    const latest = await storedCredentials(context, installationId);
    if (renewedMeanwhile(latest)) return adopt(context, latest);
  }
}

/** The credentials stored now (another invocation may have renewed them since this one started). */
async function storedCredentials(context: any, installationId: string): Promise<any> {
  const r = await context.api.request('GET', `installations/${encodeURIComponent(installationId)}?reveal=true`);
  return r?.installation?.configuration?.oauth_credentials;
}

/** Use credentials another invocation stored: the rest of this invocation sees them too. */
function adopt(context: any, credentials: Record<string, any>): Record<string, any> {
  const inst = envOf(context).installation;
  if (inst) inst.configuration = { ...(inst.configuration ?? {}), oauth_credentials: credentials };
  return credentials;
}

/** `expires_at` in milliseconds: a number (ours, GitBook's default) or a date string. NaN when neither. */
function expiresAtMs(v: unknown): number {
  if (typeof v === 'number') return v;
  if (typeof v === 'string' && v.trim()) return Number.isFinite(Number(v)) ? Number(v) : Date.parse(v);
  return Number.NaN;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** grant_type=refresh_token with the stored refresh token; the answer is extracted and stored. */
async function renew(context: any, config: ResolvedConfig, installationId: string, current: Record<string, any>): Promise<Record<string, any>> {
  const expiresAt = expiresAtMs(current.expires_at);
  if (typeof current.refresh_token !== 'string' || !current.refresh_token)
    throw new OAuthError(
      `the access token of installation ${installationId} expires at ${new Date(expiresAt).toISOString()} and no refresh_token is stored: connect again`,
    );
  const secrets = [config.clientSecret, current.refresh_token, current.access_token];
  try {
    const response = await tokenRequest(
      config.accessTokenURL,
      { grant_type: 'refresh_token', refresh_token: current.refresh_token, client_id: config.clientId, client_secret: config.clientSecret },
      'the token refresh',
    );
    const credentials = await extract(config, response);
    const next = credentials.configuration.oauth_credentials as Record<string, any> | undefined;
    if (next && typeof next === 'object' && !next.refresh_token) next.refresh_token = current.refresh_token;
    await store(context, installationId, credentials);
    console.log(`OAuth: credentials of installation ${installationId} renewed`);
    return next ?? (envOf(context).installation?.configuration?.oauth_credentials as Record<string, any>);
  } catch (e) {
    const err = e as OAuthError;
    const message = scrub(String(err?.message ?? err), secrets);
    console.error(`OAuth: refreshing the credentials of installation ${installationId} failed: ${message}`);
    if (err instanceof OAuthError && message === err.message) throw err;
    throw new OAuthError(message, { response: err?.response, error: err?.error, status: err?.status });
  }
}

/**
 * GitBook's second argument. `replace` (GitBook's default: the whole configuration replaced by the
 * credentials) is accepted; here the credentials are merged into the configuration either way, so
 * properties set before connecting are kept.
 */
export interface OAuthHandlerOptions {
  replace?: boolean;
}

/** Make the fetch handler of an OAuth connection (see the top of this file). */
export function createOAuthHandler(config: OAuthConfig, options: OAuthHandlerOptions = {}): OAuthHandler {
  checkConfig(config, 'createOAuthHandler()');
  if (options === null || typeof options !== 'object' || (options.replace !== undefined && typeof options.replace !== 'boolean'))
    throw new TypeError('createOAuthHandler(config, options): options must be an object { replace?: boolean }');
  const cfg: OAuthConfig = { ...config, scopes: config.scopes ? [...config.scopes] : undefined };

  async function handle(request: { url: string }, context: any): Promise<Response> {
    const url = new URL(request.url);
    const env = envOf(context);
    // No installation: the integration-wide endpoint (GitBook's redirect URLs). The callback finds
    // its installation in the state it consumes; starting a connection needs an installation.
    let installationId: string | undefined = env.installation?.id;
    const retryHref = url.pathname;
    const fail = (status: number, message: string, secrets: unknown[] = []) => {
      const text = scrub(message, [cfg.clientSecret, ...secrets]);
      console.error(`OAuth: ${text}`);
      return page({ status, title: 'Could not connect', message: text, state: 'error', installationId, retryHref });
    };

    const q = url.searchParams;
    const state = q.get('state');
    const providerError = q.get('error');
    const code = q.get('code');

    if (providerError) {
      // Burn the state so the same callback cannot be replayed, whatever its outcome.
      if (state) await context.api.request('POST', 'oauth/state/consume', { state }).catch(() => undefined);
      const desc = q.get('error_description');
      return fail(400, `The provider did not grant access: ${providerError}${desc ? ` (${desc})` : ''}.`);
    }

    if (!code) {
      if (!installationId)
        return fail(400, 'This address belongs to no installation: open the connect link of an installation (`switchyard installations show <id>`).');
      let authorizeURL: string;
      try {
        authorizeURL = resolveUrls(cfg, env.installation, 'createOAuthHandler()').authorizeURL;
      } catch (e) {
        return fail(500, `Could not start the connection: ${String((e as Error)?.message ?? e)}`);
      }
      const redirectUri = cfg.redirectURL ?? defaultRedirectUri(url, env);
      let issued: { state?: string; codeChallenge?: string; codeChallengeMethod?: string };
      try {
        issued = await context.api.request('POST', 'oauth/state', { data: { redirectUri }, pkce: cfg.pkce !== false });
      } catch (e) {
        return fail(502, `Could not start the connection: ${String((e as Error)?.message ?? e)}`);
      }
      const target = new URL(authorizeURL);
      target.searchParams.set('client_id', cfg.clientId);
      target.searchParams.set('response_type', 'code');
      target.searchParams.set('redirect_uri', redirectUri);
      if (cfg.scopes?.length) target.searchParams.set('scope', cfg.scopes.join(' '));
      target.searchParams.set('state', String(issued?.state ?? ''));
      if (cfg.prompt) target.searchParams.set('prompt', cfg.prompt);
      if (issued?.codeChallenge) {
        target.searchParams.set('code_challenge', issued.codeChallenge);
        target.searchParams.set('code_challenge_method', String(issued.codeChallengeMethod ?? 'S256'));
      }
      return new Response(null, { status: 302, headers: { location: target.href, 'cache-control': 'no-store', 'referrer-policy': 'no-referrer' } });
    }

    if (!state) return fail(400, 'The provider sent back no state: start the connection again from its connect link.');
    let data: Record<string, unknown>;
    let codeVerifier: string | undefined;
    try {
      const r = await context.api.request('POST', 'oauth/state/consume', { state });
      data = (r?.data ?? {}) as Record<string, unknown>;
      if (typeof r?.codeVerifier === 'string') codeVerifier = r.codeVerifier;
      if (typeof r?.installationId === 'string') installationId = r.installationId;
    } catch (e) {
      const refusal = stateRefusal(e);
      return fail(refusal.status, refusal.message);
    }
    if (!installationId) return fail(400, 'The OAuth state names no installation: start the connection again from its connect link.');
    // RFC 6749 4.1.3: the same redirect_uri as in the authorization request (kept in the state).
    const redirectUri = typeof data.redirectUri === 'string' ? data.redirectUri : (cfg.redirectURL ?? defaultRedirectUri(url, env));

    let response: any;
    let credentials: OAuthCredentials;
    try {
      const form: Record<string, string> = {
        client_id: cfg.clientId,
        client_secret: cfg.clientSecret,
        code,
        redirect_uri: redirectUri,
        grant_type: 'authorization_code',
      };
      if (codeVerifier) form.code_verifier = codeVerifier;
      // accessTokenURL as a function: of the installation the state names, as GitBook's API shows it.
      const accessTokenURL =
        typeof cfg.accessTokenURL === 'function'
          ? resolveUrls(cfg, await installationOf(context, installationId), 'createOAuthHandler()').accessTokenURL
          : cfg.accessTokenURL;
      response = await tokenRequest(accessTokenURL, form, 'the token exchange');
      credentials = await extract(cfg, response);
    } catch (e) {
      const err = e as Error;
      const tokens = response && typeof response === 'object' ? [response.access_token, response.refresh_token, response.id_token] : [];
      return fail(502, `The token exchange with the provider failed. ${String(err?.message ?? err)}`, [code, codeVerifier, ...tokens]);
    }
    const tokens = [response?.access_token, response?.refresh_token, response?.id_token, code];
    try {
      await store(context, installationId, credentials);
    } catch (e) {
      return fail(500, `The credentials could not be stored in installation ${installationId}: ${String((e as Error)?.message ?? e)}`, tokens);
    }
    console.log(`OAuth: installation ${installationId} connected; stored ${Object.keys(credentials.configuration).join(', ')}`);
    return page({
      status: 200,
      title: 'Connected',
      message: 'The account is connected and its credentials are stored in the installation.',
      state: 'connected',
      installationId,
    });
  }

  const handler = handle as OAuthHandler;
  handler.refreshCredentials = (context: any, options?: RefreshOptions) => refreshCredentials(context, cfg, options);
  return handler;
}

/** The installation `id` as GitBook's API answers it (what GitBook hands to URL functions). */
async function installationOf(context: any, id: string): Promise<unknown> {
  const env = envOf(context);
  if (env.installation?.id === id) return env.installation;
  const name = env.integration?.name;
  const r = await context.api.request('GET', `integrations/${encodeURIComponent(String(name))}/installations/${encodeURIComponent(id)}`);
  return r;
}

/**
 * GitBook's getOAuthToken(credentials, config, context): the access token of `credentials`,
 * renewed first (and stored) when it expires within 10 seconds.
 */
export async function getOAuthToken(
  credentials: any,
  config: Omit<OAuthConfig, 'authorizeURL'> & { authorizeURL?: OAuthConfig['authorizeURL'] },
  context: any,
): Promise<string> {
  const expiresAt = expiresAtMs(credentials?.expires_at);
  if (!Number.isFinite(expiresAt) || expiresAt - Date.now() > 10_000) {
    if (typeof credentials?.access_token !== 'string' || !credentials.access_token)
      throw new OAuthError('getOAuthToken(): the credentials have no access_token: connect the installation first');
    return credentials.access_token;
  }
  // A renewal needs no authorize URL; refreshCredentials checks one is a URL, so lend it the token URL.
  const renewed = await refreshCredentials(context, { authorizeURL: config.accessTokenURL, ...config } as OAuthConfig, { withinSeconds: 10 });
  return renewed.access_token;
}
