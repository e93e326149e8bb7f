/**
 * The one HTML page of the console and the headers it is served with. The page holds no data: the
 * app asks GET /console/session whether to show the login form.
 */
import type { ConsoleAssets } from './assets.ts';

export const ASSET_PREFIX = '/console/assets/';

export function shellHtml(assets: Pick<ConsoleAssets, 'hash'>): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>Switchyard console</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="${ASSET_PREFIX}app.${assets.hash}.css">
<script defer src="${ASSET_PREFIX}app.${assets.hash}.js"></script>
</head>
<body>
<div id="app"><noscript>The Switchyard console needs JavaScript.</noscript></div>
</body>
</html>
`;
}

/**
 * No inline script or style, nothing from other origins except images that components point at
 * (ContentKit `image` elements carry their own URLs) and the public endpoint's origin for option
 * lists when public_url names another host.
 */
export function securityHeaders(publicUrl: string): Record<string, string> {
  let publicOrigin = '';
  try {
    publicOrigin = new URL(publicUrl).origin;
  } catch {
    publicOrigin = '';
  }
  const connect = ["'self'", ...(publicOrigin ? [publicOrigin] : [])].join(' ');
  return {
    'content-security-policy': [
      "default-src 'self'",
      "script-src 'self'",
      "style-src 'self'",
      "img-src 'self' data: https: http:",
      `connect-src ${connect}`,
      "font-src 'none'",
      "object-src 'none'",
      "base-uri 'none'",
      "form-action 'self'",
      "frame-ancestors 'none'",
    ].join('; '),
    'x-content-type-options': 'nosniff',
    'x-frame-options': 'DENY',
    'referrer-policy': 'no-referrer',
    'cache-control': 'no-store',
  };
}
