/**
 * Is a fetch event's request already in the form the guest's Request would produce? Then the
 * guest can build it without parsing again (the hot path of every public-endpoint request).
 * Anything unusual takes the guest's full, validating constructor instead.
 */
import { BoundedMap } from '../../lib/bounded-map.ts';
const token = /^[!#$%&'*+\-.^_`|~0-9a-z]+$/;
const methodToken = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
// Header values as Headers keeps them: Latin-1, no NUL/CR/LF, no surrounding whitespace.
const badValue = /[^\t\x20-\xff]|^[\t ]|[\t ]$/;

/**
 * URLs found canonical lately: a public endpoint's requests repeat theirs, and parsing one was
 * most of this check (~2 us of a hello request). Only what parsed to itself is kept; long ones not.
 */
const canonicalUrls = new BoundedMap<string, true>(1024);
const KEPT_URL_LENGTH = 1024;

function canonicalUrl(href: string): boolean {
  if (canonicalUrls.has(href)) return true;
  const url = URL.parse(href);
  if (!url || url.href !== href || (url.protocol !== 'http:' && url.protocol !== 'https:') || url.username || url.password) return false;
  if (href.length <= KEPT_URL_LENGTH) canonicalUrls.set(href, true);
  return true;
}

export function isCanonicalRequest(request: unknown): boolean {
  const r = request as { method?: unknown; url?: unknown; headers?: unknown } | null;
  if (!r || typeof r !== 'object') return false;
  if (typeof r.method !== 'string' || !methodToken.test(r.method) || r.method !== r.method.toUpperCase()) return false;
  if (typeof r.url !== 'string' || !canonicalUrl(r.url)) return false;
  if (!Array.isArray(r.headers)) return false;
  for (const h of r.headers) {
    if (!Array.isArray(h) || h.length !== 2 || typeof h[0] !== 'string' || typeof h[1] !== 'string') return false;
    if (!token.test(h[0]) || badValue.test(h[1])) return false;
  }
  return true;
}
