/**
 * The console's origin and the integrations' origin are kept apart. A page an integration serves on
 * its public endpoint is a stranger's: if it shared the console's origin it could read the session's
 * CSRF value, call the API with the admin's cookie and replace that cookie. So:
 * - the console (and its session cookie) answers only on the console's host (consoleUrlOf), and
 *   public endpoints never answer there;
 * - integration answers cannot set our cookies, and run as sandboxed documents (an opaque origin
 *   that no cookie, storage or same-origin read reaches);
 * - the session answers only requests the browser marks as coming from the console's own origin.
 */
import { consoleUrlOf, type LoadedConfig } from '../config/index.ts';
import { SwitchyardError } from '../errors.ts';

/** Our cookies start with this; an integration's answer may never set one. */
export const COOKIE_PREFIX = 'sy_';

/**
 * Integration documents run sandboxed: scripts, forms, popups and downloads work, but without
 * `allow-same-origin` the document's origin is opaque, so it reads no cookie or storage of the host
 * and every request it makes is cross-origin.
 */
export const INTEGRATION_CSP = 'sandbox allow-scripts allow-forms allow-popups allow-popups-to-escape-sandbox allow-modals allow-downloads';

/** Whatever carries the running config (the server's services object). */
type Configured = { config: LoadedConfig };

interface ConsoleOrigin {
  url: string;
  /** `host:port` as a Host header carries it, lower case. */
  host: string;
  origin: string;
}

// Computed once per config object (the server swaps the object when port 0 learns its port): the
// public endpoint checks the host on every request.
const origins = new WeakMap<object, ConsoleOrigin>();

function consoleOriginOf(services: Configured): ConsoleOrigin {
  let o = origins.get(services.config);
  if (!o) {
    const url = consoleUrlOf(services.config);
    const u = new URL(url);
    o = { url, host: u.host.toLowerCase(), origin: u.origin };
    origins.set(services.config, o);
  }
  return o;
}

export function consoleUrl(services: Configured): string {
  return consoleOriginOf(services).url;
}

export function onConsoleHost(req: Request, services: Configured): boolean {
  return isConsoleHost(req.headers.get('host'), services);
}

function isConsoleHost(host: string | null, services: Configured): boolean {
  return (host ?? '').toLowerCase() === consoleOriginOf(services).host;
}

/** Public endpoints refuse the console's host: integration content never runs on the console's origin. */
export function refuseOnConsoleHost(host: string | null, pathname: string, services: Configured): void {
  if (isConsoleHost(host, services))
    throw new SwitchyardError('not_found', "integration endpoints are not served on the console's origin", {
      hint: `use ${services.config.publicUrl}${pathname}`,
    });
}

/**
 * Requests that carry the console's cookie must come from the console's own pages: a browser marks
 * every request with Sec-Fetch-Site, and a page on any other origin (an integration's among them)
 * gets `same-site` or `cross-site`. Clients that send no such header (curl, scripts) are not browsers
 * and hold no cookie of ours unless they were given one.
 */
export function requireConsolePage(req: Request): void {
  const site = req.headers.get('sec-fetch-site');
  if (site && site !== 'same-origin' && site !== 'none')
    throw new SwitchyardError('forbidden', `the console session answers only the console's own pages (this request came from a ${site} page)`, {
      hint: 'scripts should use Authorization: Bearer <admin token>',
    });
}

/**
 * Headers of an integration's public-endpoint answer as they leave: our cookies dropped, the sandbox
 * policy added, and the console's origin allowed to read it (the console loads option lists from
 * completion_url across origins, without credentials). Other CORS headers are the integration's own.
 */
export function integrationAnswerHeaders(headers: Array<[string, string]>, origin: string | null, services: Configured): Array<[string, string]> {
  const fromConsole = origin !== null && origin === consoleOriginOf(services).origin;
  const out: Array<[string, string]> = [];
  for (const h of headers) {
    const name = h[0].toLowerCase();
    if (name === 'set-cookie' && setsOurCookie(h[1])) continue;
    if (fromConsole && name === 'access-control-allow-origin') continue;
    out.push(h);
  }
  out.push(['content-security-policy', INTEGRATION_CSP]);
  if (fromConsole) out.push(['access-control-allow-origin', origin], ['vary', 'Origin']);
  return out;
}

function setsOurCookie(setCookie: string): boolean {
  const pair = setCookie.split(';')[0];
  const eq = pair.indexOf('=');
  let name = (eq < 0 ? '' : pair.slice(0, eq)).trim();
  // A nameless cookie (`=sy_console=x`, or no `=` at all) is sent back by browsers as its value
  // alone, which reads as `sy_console=x`: its name is what comes first in that value.
  if (!name)
    name = pair
      .slice(eq + 1)
      .trim()
      .split('=')[0]
      .trim();
  name = name.toLowerCase();
  return name.startsWith(COOKIE_PREFIX) || name.startsWith(`__host-${COOKIE_PREFIX}`) || name.startsWith(`__secure-${COOKIE_PREFIX}`);
}
