/**
 * A fast path in front of whatwg-url's parser for the URLs integrations parse most: absolute
 * http(s) URLs already in the form the parser would produce (lower-case scheme and host, no
 * credentials, no default port, no dot segments, nothing to percent-encode, no IDNA). For those the
 * URL record is built by splitting the string; anything else, or any doubt, goes to the full state
 * machine. The full parser costs ~15-30 us per URL inside the isolate, more than the rest of a hello
 * request; the split costs ~1 us. A differential test (test/sandbox-url-fast.test.ts) holds the two
 * to the same records.
 */
export interface URLRecord {
  scheme: string;
  username: string;
  password: string;
  host: string | number | number[] | null;
  port: number | null;
  path: string[] | string;
  query: string | null;
  fragment: string | null;
}

// scheme://host[:port][/path][?query][#fragment], each part restricted to characters the parser
// keeps as they are. Path: no `%2e` (an encoded dot segment); query: no `'` (encoded for special
// schemes); no spaces, controls, quotes, backslashes, `^`, `|`, braces, backticks or non-ASCII.
const SHAPE =
  /^(https?):\/\/([a-z0-9.-]+)(?::([1-9][0-9]{0,4}))?(\/[A-Za-z0-9\-._~!$&'()*+,;=:@%/]*)?(?:\?([A-Za-z0-9\-._~!$&()*+,;=:@%/?]*))?(?:#([A-Za-z0-9\-._~!$&'()*+,;=:@%/?#]*))?$/;
// A domain whose labels are plain LDH, none starting with xn-- (punycode is validated by the full
// parser), the last one starting with a letter (a numeric last label makes the parser read IPv4).
const DOMAIN = /^(?!xn--)[a-z0-9](?:[a-z0-9-]*[a-z0-9])?(?:\.(?!xn--)[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)*$/;
const LAST_LABEL_LETTER = /(?:^|\.)[a-z][a-z0-9-]*$/;
const IPV4 = /^(0|[1-9][0-9]{0,2})\.(0|[1-9][0-9]{0,2})\.(0|[1-9][0-9]{0,2})\.(0|[1-9][0-9]{0,2})$/;
const DEFAULT_PORT: Record<string, number> = { http: 80, https: 443 };

function hostOf(text: string): string | number | null {
  const v4 = IPV4.exec(text);
  if (v4) {
    const [a, b, c, d] = [Number(v4[1]), Number(v4[2]), Number(v4[3]), Number(v4[4])];
    if (a > 255 || b > 255 || c > 255 || d > 255) return null;
    return ((a * 256 + b) * 256 + c) * 256 + d;
  }
  if (text.length > 253 || !DOMAIN.test(text) || !LAST_LABEL_LETTER.test(text)) return null;
  return text;
}

/** The record the full parser would give `input` (no base), or null to let the full parser decide. */
export function fastParse(input: string): URLRecord | null {
  if (typeof input !== 'string' || input.length > 2048) return null;
  const m = SHAPE.exec(input);
  if (!m) return null;
  const scheme = m[1];
  const host = hostOf(m[2]);
  if (host === null) return null;
  let port: number | null = null;
  if (m[3] !== undefined) {
    port = Number(m[3]);
    if (port > 65535 || port === DEFAULT_PORT[scheme]) return null;
  }
  const rawPath = m[4];
  let path: string[];
  if (rawPath === undefined) path = [''];
  else {
    if (/%2e/i.test(rawPath)) return null;
    path = rawPath.slice(1).split('/');
    for (const segment of path) if (segment === '.' || segment === '..') return null;
  }
  return { scheme, username: '', password: '', host, port, path, query: m[5] ?? null, fragment: m[6] ?? null };
}

/** Put the fast path in front of the state machine's basicURLParse (used by URL and everything built on it). */
export function installFastPath(usm: { basicURLParse(input: string, options?: Record<string, unknown>): URLRecord | null }): void {
  const full = usm.basicURLParse;
  usm.basicURLParse = function basicURLParse(input: string, options?: Record<string, unknown>) {
    // Only a plain parse qualifies: no base, no state override (setters), no record to update.
    if (
      options === undefined ||
      (options.baseURL == null && options.url === undefined && options.stateOverride === undefined && options.encoding === undefined)
    ) {
      const record = fastParse(input);
      if (record) return record;
    }
    return full(input, options);
  };
}
