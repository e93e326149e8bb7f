/**
 * Single-flight renewal of an installation's OAuth credentials: one claim per installation at a
 * time, held in the store so that every serving process sees it (two isolates renewing the same
 * credentials would both spend the refresh token; a provider that rotates refresh tokens refuses
 * the second, some then revoke the whole grant).
 */
import { randomBytes } from 'node:crypto';
import { safeEqual } from '../http/auth.ts';
import { statement, type Database } from '../store/contract.ts';

export interface RefreshClaims {
  /** The claim when none is held (or the held one ran out), else when the held one runs out. */
  take(installationId: string, now: number, forMs: number): Promise<{ granted: true; claim: string; until: number } | { granted: false; until: number }>;
  /** Give a claim back; false when it is not the one held. */
  release(installationId: string, claim: string): Promise<boolean>;
}

const q = {
  // The claim is taken in one statement: of two processes asking at once, one row wins.
  take: statement<{ claim: string }>(
    `INSERT INTO oauth_refresh_claims (installation_id, claim, until) VALUES (@id, @claim, @until)
     ON CONFLICT (installation_id) DO UPDATE SET claim = excluded.claim, until = excluded.until WHERE oauth_refresh_claims.until <= @now
     RETURNING claim`,
  ),
  held: statement<{ claim: string; until: number }>('SELECT claim, until FROM oauth_refresh_claims WHERE installation_id = ?'),
  drop: statement('DELETE FROM oauth_refresh_claims WHERE installation_id = ? AND claim = ?'),
};

export function createRefreshClaims(database: Database): RefreshClaims {
  return {
    async take(installationId, now, forMs) {
      const claim = randomBytes(12).toString('base64url');
      const until = now + forMs;
      if ((await database.get(q.take, { id: installationId, claim, until, now }))?.claim === claim) return { granted: true, claim, until };
      return { granted: false, until: (await database.get(q.held, [installationId]))?.until ?? now };
    },
    async release(installationId, claim) {
      const h = await database.get(q.held, [installationId]);
      // Compared in constant time: the claim is a bearer secret of the isolate holding it.
      if (!h || !safeEqual(claim, h.claim)) return false;
      return (await database.run(q.drop, [installationId, h.claim])).changes > 0;
    },
  };
}
