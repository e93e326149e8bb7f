/**
 * Single-flight renewal of an installation's OAuth credentials: one claim per installation at a
 * time, held in the store so that every serving process sees it (two isolates renewing the same
 * credentials would both spend the refresh token; a provider that rotates refresh tokens refuses
 * the second, some then revoke the whole grant).
 */
import { randomBytes } from 'node:crypto';
import { safeEqual } from '../http/auth.ts';
import type { Db } from '../store/index.ts';

export interface RefreshClaims {
  /** The claim when none is held (or the held one ran out), else when the held one runs out. */
  take(installationId: string, now: number, forMs: number): { granted: true; claim: string; until: number } | { granted: false; until: number };
  /** Give a claim back; false when it is not the one held. */
  release(installationId: string, claim: string): boolean;
}

export function createRefreshClaims(db: Db): RefreshClaims {
  // The claim is taken in one statement: of two processes asking at once, one row wins.
  const take = db.prepare<{ id: string; claim: string; until: number; now: number }, { claim: string }>(
    `INSERT INTO oauth_refresh_claims (installation_id, claim, until) VALUES (@id, @claim, @until)
     ON CONFLICT (installation_id) DO UPDATE SET claim = excluded.claim, until = excluded.until WHERE oauth_refresh_claims.until <= @now
     RETURNING claim`,
  );
  const held = db.prepare<[string], { claim: string; until: number }>('SELECT claim, until FROM oauth_refresh_claims WHERE installation_id = ?');
  const drop = db.prepare('DELETE FROM oauth_refresh_claims WHERE installation_id = ? AND claim = ?');
  return {
    take(installationId, now, forMs) {
      const claim = randomBytes(12).toString('base64url');
      const until = now + forMs;
      if (take.get({ id: installationId, claim, until, now })?.claim === claim) return { granted: true, claim, until };
      return { granted: false, until: held.get(installationId)?.until ?? now };
    },
    release(installationId, claim) {
      const h = held.get(installationId);
      // Compared in constant time: the claim is a bearer secret of the isolate holding it.
      if (!h || !safeEqual(claim, h.claim)) return false;
      return drop.run(installationId, h.claim).changes > 0;
    },
  };
}
