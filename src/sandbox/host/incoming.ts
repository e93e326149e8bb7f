/**
 * Is a fetch event's request already in the form the guest's Request would produce? Then the
 * guest can build it without parsing again (the hot path of every public-endpoint request).
 * Anything unusual takes the guest's full, validating constructor instead.
 */
const token = /^[!#$%&'*+\-.^_`|~0-9a-z]+$/;
const methodToken = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
// Header values as Headers keeps them: Latin-1, no NUL/CR/LF, no surrounding whitespace.
const badValue = /[^\t\x20-\xff]|^[\t ]|[\t ]$/;

export function isCanonicalRequest(request: unknown): boolean {
  const r = request as { method?: unknown; url?: unknown; headers?: unknown } | null;
  if (!r || typeof r !== 'object') return false;
  if (typeof r.method !== 'string' || !methodToken.test(r.method) || r.method !== r.method.toUpperCase()) return false;
  if (typeof r.url !== 'string') return false;
  const url = URL.parse(r.url);
  if (!url || url.href !== r.url || (url.protocol !== 'http:' && url.protocol !== 'https:') || url.username || url.password) return false;
  if (!Array.isArray(r.headers)) return false;
  for (const h of r.headers) {
    if (!Array.isArray(h) || h.length !== 2 || typeof h[0] !== 'string' || typeof h[1] !== 'string') return false;
    if (!token.test(h[0]) || badValue.test(h[1])) return false;
  }
  return true;
}
