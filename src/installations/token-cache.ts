/**
 * The short-lived tokens handed to each invocation (tokens.ts: an installation's invocation token,
 * GitBook's integration-wide token), reused rather than minted per request. Minting is an HMAC; a
 * token is reused while it has at least half its life left, so every invocation still holds one
 * valid for at least ttlMs / 2.
 */

/** How many subjects a cache keeps before it starts over. */
const CACHED_TOKENS = 10_000;

/** A token for `subject` valid for at least ttlMs / 2 from now. */
export type TokenSource = (subject: string, ttlMs: number) => string;

/** `mint` signs a token for a subject, valid ttlMs from `now`; the answer reuses one while it may. */
export function cachedTokens(mint: (subject: string, ttlMs: number, now: number) => string): TokenSource {
  const cache = new Map<string, { token: string; ttlMs: number; renewAt: number }>();
  return (subject, ttlMs) => {
    const now = Date.now();
    const cached = cache.get(subject);
    if (cached && cached.ttlMs === ttlMs && cached.renewAt > now) return cached.token;
    const token = mint(subject, ttlMs, now);
    if (cache.size > CACHED_TOKENS) cache.clear();
    cache.set(subject, { token, ttlMs, renewAt: now + ttlMs / 2 });
    return token;
  };
}
