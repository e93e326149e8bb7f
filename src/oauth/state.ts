/**
 * OAuth `state` that cannot be forged, replayed or carried to another installation: the server
 * signs {installation, nonce, expiry} with its own key, remembers the nonce, and accepts it once,
 * for the same installation, before it expires. (The leading implementation's state is unsigned JSON
 * holding the installation id: login CSRF and installation confusion. Not here.)
 *
 * PKCE (RFC 7636, S256): a state can carry a code_verifier that never leaves the server until the
 * state is consumed; only its challenge goes into the authorize URL. A stolen authorization code is
 * then useless without the verifier, which only the installation's own callback receives, once.
 */
import { createHash, createHmac, randomBytes } from 'node:crypto';
import { safeEqual } from '../http/auth.ts';
import { signingKey } from '../installations/tokens.ts';
import { statement, type Database } from '../store/contract.ts';

export const STATE_TTL_MS = 10 * 60_000;

export type ConsumeResult =
  | { ok: true; installationId: string; data: Record<string, unknown>; codeVerifier?: string }
  | { ok: false; reason: 'malformed' | 'forged' | 'expired' | 'reused' | 'wrong_installation' };

/** The S256 code_challenge of a verifier: base64url(SHA-256(verifier)). */
export function codeChallengeOf(verifier: string): string {
  return createHash('sha256').update(verifier).digest('base64url');
}

const q = {
  insert: statement('INSERT INTO oauth_states (nonce, installation_id, expires_at, verifier) VALUES (?, ?, ?, ?)'),
  unused: statement<{ verifier: string | null }>('SELECT verifier FROM oauth_states WHERE nonce = ? AND used_at IS NULL'),
  markUsed: statement('UPDATE oauth_states SET used_at = ?, verifier = NULL WHERE nonce = ? AND used_at IS NULL'),
  purge: statement('DELETE FROM oauth_states WHERE expires_at < ?'),
};

/** The states of this server (reads its signing key: awaited at start). */
export async function createStateStore(database: Database, now: () => number = Date.now) {
  const key = await signingKey(database, 'oauth-state');
  const sign = (payload: string) => createHmac('sha256', key).update(payload).digest('base64url');
  // Burn a nonce and take its verifier, atomically: a second consume finds nothing.
  const use = (nonce: string, at: number) =>
    database.transaction(async (tx): Promise<{ verifier: string | null } | undefined> => {
      const row = await tx.get(q.unused, [nonce]);
      if (!row || (await tx.run(q.markUsed, [at, nonce])).changes !== 1) return undefined;
      return row;
    });

  return {
    /**
     * A fresh state for `installationId`, carrying small extra data (e.g. a return path). With
     * `pkce`, a code_verifier is made and kept; the answer carries its S256 challenge.
     */
    async issue(
      installationId: string,
      data: Record<string, unknown> = {},
      opts: { pkce?: boolean } = {},
    ): Promise<{ state: string; expiresAt: string; codeChallenge?: string; codeChallengeMethod?: 'S256' }> {
      await database.run(q.purge, [now() - STATE_TTL_MS]);
      const nonce = randomBytes(16).toString('base64url');
      const expires = now() + STATE_TTL_MS;
      const payload = Buffer.from(JSON.stringify({ i: installationId, n: nonce, e: expires, d: data })).toString('base64url');
      // 32 random bytes: a 43-character verifier, the shortest RFC 7636 allows, 256 bits of entropy.
      const verifier = opts.pkce ? randomBytes(32).toString('base64url') : null;
      await database.run(q.insert, [nonce, installationId, expires, verifier]);
      return {
        state: `${payload}.${sign(payload)}`,
        expiresAt: new Date(expires).toISOString(),
        ...(verifier ? { codeChallenge: codeChallengeOf(verifier), codeChallengeMethod: 'S256' as const } : {}),
      };
    },

    /**
     * Verify and burn a state. `caller` is the caller's installation id (a state is good for that
     * one only), or, for an integration-wide caller, a test of the installation the state names
     * (one of its own integration).
     */
    async consume(state: string, caller: string | ((installationId: string) => boolean | Promise<boolean>)): Promise<ConsumeResult> {
      const parts = typeof state === 'string' ? state.split('.') : [];
      const [payload, mac] = parts;
      if (parts.length !== 2 || !payload || !mac) return { ok: false, reason: 'malformed' };
      if (!safeEqual(mac, sign(payload))) return { ok: false, reason: 'forged' };
      let body: { i: string; n: string; e: number; d?: Record<string, unknown> };
      try {
        body = JSON.parse(Buffer.from(payload, 'base64url').toString());
      } catch {
        return { ok: false, reason: 'malformed' };
      }
      if (typeof body.i !== 'string' || !(typeof caller === 'string' ? body.i === caller : await caller(body.i)))
        return { ok: false, reason: 'wrong_installation' };
      if (body.e < now()) return { ok: false, reason: 'expired' };
      const used = await use(body.n, now());
      if (!used) return { ok: false, reason: 'reused' };
      return { ok: true, installationId: body.i, data: body.d ?? {}, ...(used.verifier ? { codeVerifier: used.verifier } : {}) };
    },
  };
}

export type StateStore = Awaited<ReturnType<typeof createStateStore>>;
