/**
 * OAuth `state` that cannot be forged, replayed or carried to another installation: the server
 * signs {installation, nonce, expiry} with its own key, remembers the nonce, and accepts it once,
 * for the same installation, before it expires. (The leading implementation's state is unsigned JSON
 * holding the installation id: login CSRF and installation confusion. Not here.)
 */
import { createHmac, randomBytes } from 'node:crypto';
import { safeEqual } from '../http/auth.ts';
import { signingKey } from '../installations/tokens.ts';
import type { Db } from '../store/index.ts';

export const STATE_TTL_MS = 10 * 60_000;

export type ConsumeResult = { ok: true; installationId: string; data: Record<string, unknown> } | { ok: false; reason: 'malformed' | 'forged' | 'expired' | 'reused' | 'wrong_installation' };

export function createStateStore(db: Db, now: () => number = Date.now) {
  const key = signingKey(db, 'oauth-state');
  const sign = (payload: string) => createHmac('sha256', key).update(payload).digest('base64url');
  const insert = db.prepare('INSERT INTO oauth_states (nonce, installation_id, expires_at) VALUES (?, ?, ?)');
  const use = db.prepare('UPDATE oauth_states SET used_at = ? WHERE nonce = ? AND used_at IS NULL');
  const purge = db.prepare('DELETE FROM oauth_states WHERE expires_at < ?');

  return {
    /** A fresh state for `installationId`, carrying small extra data (e.g. a return path). */
    issue(installationId: string, data: Record<string, unknown> = {}): { state: string; expiresAt: string } {
      purge.run(now() - STATE_TTL_MS);
      const nonce = randomBytes(16).toString('base64url');
      const expires = now() + STATE_TTL_MS;
      const payload = Buffer.from(JSON.stringify({ i: installationId, n: nonce, e: expires, d: data })).toString('base64url');
      insert.run(nonce, installationId, expires);
      return { state: `${payload}.${sign(payload)}`, expiresAt: new Date(expires).toISOString() };
    },

    /** Verify and burn a state; `installationId` is the caller's (a state is good for one only). */
    consume(state: string, installationId: string): ConsumeResult {
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
      if (body.i !== installationId) return { ok: false, reason: 'wrong_installation' };
      if (body.e < now()) return { ok: false, reason: 'expired' };
      if (use.run(now(), body.n).changes !== 1) return { ok: false, reason: 'reused' };
      return { ok: true, installationId: body.i, data: body.d ?? {} };
    },
  };
}

export type StateStore = ReturnType<typeof createStateStore>;
