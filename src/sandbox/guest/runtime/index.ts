/**
 * The runtime library integration scripts import as '@switchyard/runtime' (and JSX from
 * '@switchyard/runtime/jsx-runtime'). Types for authors: src/sandbox/guest/runtime.d.ts.
 */
export { createIntegration, createComponent } from './integration.ts';
export { createOAuthHandler, defaultExtractCredentials, refreshCredentials, OAuthError } from './oauth.ts';
export { ExposableError } from './errors.ts';
export { APIError } from './api.ts';
export { jsx, jsxs, jsxDEV, Fragment } from './jsx.ts';
