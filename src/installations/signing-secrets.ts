/**
 * GitBook's `environment.signingSecrets`: a stable secret per integration and per installation
 * that their code signs its own data with (e.g. a state it hands to a third party). Derived from a
 * server key kept in the database (tokens.ts, signingKey `gitbook-signing-secrets`), so they survive
 * restarts and differ per server.
 */
import { createHmac } from 'node:crypto';

/** How many secrets are kept in memory before the cache starts over. */
const CACHED_SECRETS = 10_000;

export type SigningSecrets = (kind: 'integration' | 'installation', subject: string) => string;

export function signingSecrets(serverKey: Buffer): SigningSecrets {
  const cache = new Map<string, string>();
  return (kind, subject) => {
    const key = `${kind}:${subject}`;
    let secret = cache.get(key);
    if (!secret) {
      secret = createHmac('sha256', serverKey).update(key).digest('base64url');
      if (cache.size > CACHED_SECRETS) cache.clear();
      cache.set(key, secret);
    }
    return secret;
  };
}
