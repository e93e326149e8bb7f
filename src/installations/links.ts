/**
 * Install links (spec 2.5: an `unlisted` integration installs "only via the shared install link").
 * A link is a bearer credential for one integration until an expiry:
 *
 *   sy_link_<base64url("<integration>.<generation>.<expiry, unix s>.<link id>")>.<HMAC-SHA256, base64url>
 *
 * signed with a server key kept in the store beside the invocation-token key (tokens.ts), so every
 * serving process and every node on one database reads the same links, and nothing of a link is
 * stored. Revoking bumps the integration's generation: every link made before it stops working at
 * once (each use reads the generation, a single-row lookup; installs are rare).
 */
import { createHmac, randomBytes } from 'node:crypto';
import { SwitchyardError } from '../errors.ts';
import { INSTALL_LINK_PREFIX, safeEqual } from '../http/auth.ts';
import { statement, type Database } from '../store/contract.ts';
import { signingKey } from './tokens.ts';

/** What a link says, once its signature is checked. */
export interface InstallLink {
  id: string;
  integration: string;
  generation: number;
  /** Milliseconds since the epoch. */
  expiresAt: number;
}

export type LinkReading = { ok: true; link: InstallLink } | { ok: false; reason: 'invalid' | 'expired' | 'revoked'; link?: InstallLink };

const q = {
  generation: statement<{ generation: number }>('SELECT generation FROM install_links WHERE integration = ?'),
  bump: statement(
    `INSERT INTO install_links (integration, generation, revoked_at) VALUES (?, 1, ?)
     ON CONFLICT (integration) DO UPDATE SET generation = install_links.generation + 1, revoked_at = excluded.revoked_at`,
  ),
};

/** The links of this server (reads its signing key: awaited at start). */
export async function createInstallLinks(database: Database, now: () => number = Date.now) {
  const key = await signingKey(database, 'install-link');
  const mac = (payload: string) => createHmac('sha256', key).update(payload).digest('base64url');
  const generationOf = async (integration: string) => Number((await database.get(q.generation, [integration]))?.generation ?? 0);

  /** The link's fields when its signature holds (fail closed: anything else is no link). */
  function verify(token: string): InstallLink | undefined {
    if (!token.startsWith(INSTALL_LINK_PREFIX)) return undefined;
    const [encoded, sig, extra] = token.slice(INSTALL_LINK_PREFIX.length).split('.');
    if (!encoded || !sig || extra !== undefined) return undefined;
    const payload = Buffer.from(encoded, 'base64url').toString();
    if (!safeEqual(sig, mac(payload))) return undefined;
    const [integration, generation, expires, id, more] = payload.split('.');
    if (!integration || !id || more !== undefined || !/^\d+$/.test(generation ?? '') || !/^\d+$/.test(expires ?? '')) return undefined;
    return { id, integration, generation: Number(generation), expiresAt: Number(expires) * 1000 };
  }

  return {
    /** A new link for `integration`, valid `ttlMs` from `at` (now). */
    async mint(integration: string, ttlMs: number, at = now()): Promise<{ token: string; link: InstallLink }> {
      const link: InstallLink = {
        id: `lnk_${randomBytes(8).toString('hex')}`,
        integration,
        generation: await generationOf(integration),
        expiresAt: Math.ceil((at + ttlMs) / 1000) * 1000,
      };
      const payload = `${integration}.${link.generation}.${link.expiresAt / 1000}.${link.id}`;
      return { token: `${INSTALL_LINK_PREFIX}${Buffer.from(payload).toString('base64url')}.${mac(payload)}`, link };
    },

    /** Whether `token` is a link of this server that still works, and if not, why. */
    async read(token: string): Promise<LinkReading> {
      const link = verify(token);
      if (!link) return { ok: false, reason: 'invalid' };
      if (link.expiresAt <= now()) return { ok: false, reason: 'expired', link };
      if (link.generation !== (await generationOf(link.integration))) return { ok: false, reason: 'revoked', link };
      return { ok: true, link };
    },

    /** End every link of `integration` made so far; links made afterwards work. */
    async revoke(integration: string): Promise<{ revokedAt: string }> {
      const revokedAt = new Date(now()).toISOString();
      await database.run(q.bump, [integration, revokedAt]);
      return { revokedAt };
    },
  };
}

export type InstallLinks = Awaited<ReturnType<typeof createInstallLinks>>;

/**
 * The error for a link that is authentic but no longer works (an altered or foreign one is not
 * told apart from any wrong token: the /api/v1 guard answers install_link_invalid after the
 * admin-token throttle has counted it).
 */
export function linkRefusal(reading: Extract<LinkReading, { ok: false }>): SwitchyardError | undefined {
  const l = reading.link;
  if (!l) return undefined;
  const ask = { hint: `ask whoever gave it for a new one (\`switchyard integrations link ${l.integration}\`)` };
  if (reading.reason === 'expired')
    return new SwitchyardError('install_link_expired', `this install link of "${l.integration}" expired at ${new Date(l.expiresAt).toISOString()}`, ask);
  return new SwitchyardError(
    'install_link_revoked',
    `this install link of "${l.integration}" was revoked: every link of it made before the last revocation stopped working`,
    ask,
  );
}
