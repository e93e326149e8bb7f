/**
 * The runtime library integration scripts import as '@switchyard/runtime' (and JSX from
 * '@switchyard/runtime/jsx-runtime'). Types for authors: src/sandbox/guest/runtime.d.ts.
 */
export { createIntegration, createComponent } from './integration.ts';
export { createOAuthHandler, defaultExtractCredentials, refreshCredentials, getOAuthToken, OAuthError } from './oauth.ts';
export { Logger } from './logger.ts';
export { createContentSource } from './compat.ts';
/** GitBook's name for defaultExtractCredentials. */
export { defaultExtractCredentials as defaultOAuthExtractCredentials } from './oauth.ts';
export { ExposableError } from './errors.ts';
export { APIError } from './api.ts';
export { jsx, jsxs, jsxDEV, Fragment } from './jsx.ts';
