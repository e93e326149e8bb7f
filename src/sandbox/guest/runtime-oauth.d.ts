// Types of the OAuth part of '@switchyard/runtime' for integration authors (runtime/oauth.ts).
// An ambient module declaration: it merges with the other .d.ts files of this folder, which
// `switchyard new` concatenates into types/switchyard-runtime.d.ts.
declare module '@switchyard/runtime' {
  /** Argument of createOAuthHandler() (spec 2.3). */
  export interface OAuthConfig {
    /** Client application id at the provider (usually from context.environment.secrets). */
    clientId: string;
    /** Client secret at the provider (usually from context.environment.secrets). Never shown nor logged. */
    clientSecret: string;
    /**
     * Where the user's browser is sent to authorize; or (GitBook's form) a function of the
     * installation returning it, for providers whose host each installation configures.
     */
    authorizeURL: string | ((installation: any) => string);
    /** Where the code (and later a refresh token) is exchanged for credentials; a string or a function of the installation. */
    accessTokenURL: string | ((installation: any) => string);
    /** A static redirect URL; default: the installation's public endpoint plus the handler's path. */
    redirectURL?: string;
    /** Scopes requested, sent space-joined as `scope`. */
    scopes?: string[];
    /** Sent as `prompt` when set (e.g. "consent"). */
    prompt?: string;
    /**
     * PKCE (RFC 7636, S256), on by default: the authorize URL carries a code_challenge and the token
     * exchange its code_verifier (kept by the server until the callback). Set false for a provider
     * that rejects the extra parameters.
     */
    pkce?: boolean;
    /**
     * Turns the token endpoint's answer into what is stored, `{ configuration: { oauth_credentials:
     * { access_token } } }`. Throw (ideally an OAuthError) when the answer is not a success, e.g.
     * `ok: false`. Default: defaultExtractCredentials.
     */
    extractCredentials?: (response: any) => OAuthCredentials | Promise<OAuthCredentials>;
  }

  /**
   * What extractCredentials returns: configuration keys to store (PATCH semantics: null removes a
   * key) and, optionally, the installation's new `externalIds` (GitBook's form).
   */
  export interface OAuthCredentials {
    configuration: { oauth_credentials?: Record<string, any>; [key: string]: unknown };
    externalIds?: string[];
  }

  export interface RefreshOptions {
    /** Renew when the access token expires within this many seconds (default 60). */
    withinSeconds?: number;
    /** Renew even when the token is not about to expire. */
    force?: boolean;
  }

  /** The fetch handler made by createOAuthHandler(), with the refresh helper bound to its config. */
  export interface OAuthHandler {
    (request: Request, context: any): Promise<Response>;
    /** refreshCredentials(context, config, options) with this handler's config. */
    refreshCredentials(context: any, options?: RefreshOptions): Promise<Record<string, any>>;
  }

  /** A failed OAuth step; `response` is what the provider answered. */
  export class OAuthError extends Error {
    constructor(message: string, opts?: { response?: unknown; error?: string; status?: number });
    /** The provider's answer: parsed JSON or form, else its text. */
    readonly response: unknown;
    /** The OAuth error code the provider gave (`invalid_grant`, `access_denied`, ...). */
    readonly error?: string;
    /** The HTTP status of the provider's answer. */
    readonly status?: number;
  }

  /**
   * Mount on a path of the installation's public endpoint (the callback_url of a `button`
   * property, e.g. /oauth). Without `code`: redirects to authorizeURL with a server-signed state.
   * With `code`: checks the state, exchanges the code, stores the credentials under
   * configuration.oauth_credentials and answers a page that closes the window. Failures are
   * answered as a page saying what happened; nothing is stored.
   */
  export function createOAuthHandler(config: OAuthConfig, options?: { replace?: boolean }): OAuthHandler;

  /**
   * Keeps access_token, refresh_token and expires_at (milliseconds since the epoch, from
   * expires_in). Throws an OAuthError when the answer has `ok: false`, an `error` or no access_token.
   */
  export function defaultExtractCredentials(response: any): OAuthCredentials & { configuration: { oauth_credentials: Record<string, any> } };

  /**
   * Renew the installation's oauth_credentials when the access token expires within
   * `withinSeconds` (default 60) with grant_type=refresh_token, and store them. Resolves with the
   * credentials in force (renewed or not); throws an OAuthError when renewal is needed and fails.
   * One invocation of an installation renews at a time; the others wait for it and use what it stored.
   */
  export function refreshCredentials(context: any, config: OAuthConfig, options?: RefreshOptions): Promise<Record<string, any>>;
}
