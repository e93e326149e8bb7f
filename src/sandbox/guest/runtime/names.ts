/**
 * The names '@switchyard/runtime' exports (and '@gitbook/runtime', the same library under GitBook's
 * name): the host builds the importable module from this list, and a test holds it equal to
 * runtime/index.ts. Plain data, so host code can import it.
 */
export const RUNTIME_EXPORTS = [
  'createIntegration',
  'createComponent',
  'createOAuthHandler',
  'defaultExtractCredentials',
  'defaultOAuthExtractCredentials',
  'refreshCredentials',
  'getOAuthToken',
  'OAuthError',
  'ExposableError',
  'APIError',
  'Logger',
  'createContentSource',
] as const;
