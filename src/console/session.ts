/**
 * Console sessions: after the admin token is checked once at login, the browser holds a signed,
 * expiring session in an HttpOnly cookie instead of the token itself. The signing key is derived
 * from the admin token, so changing the token ends every session; logout revokes one session
 * (stored until it would have expired anyway, so every serving process and node refuses it: each
 * keeps the revocations in memory and reads them again when another one revokes, as
 * store/generations.ts tells it).
 *
 * State-changing requests made with the cookie must also carry the session's CSRF value in a custom
 * header: a page on another origin can neither read it nor send a custom header without a CORS
 * preflight that this server never grants.
 */
import { statement, type Database } from '../store/contract.ts';
import type { Generations } from '../store/generations.ts';
import { createHmac, randomBytes } from 'node:crypto';
import { SwitchyardError } from '../errors.ts';
import { safeEqual } from '../http/auth.ts';
import { requireConsolePage } from '../http/origins.ts';

export const SESSION_COOKIE = 'sy_console';
export const CSRF_HEADER = 'x-switchyard-csrf';
/** Sent by the login page: a custom header a cross-site form cannot add. */
export const LOGIN_HEADER = 'x-switchyard-console';
export const SESSION_TTL_MS = 12 * 3_600_000;

const VERSION = 'v1';
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

export interface Session {
  id: string;
  /** Expiry, ms since the epoch. */
  expiresAt: number;
  /** The value the CSRF header must carry for this session. */
  csrf: string;
}

export interface Sessions {
  /** A new session and the cookie value that carries it. */
  issue(): { session: Session; value: string };
  /** The session a cookie value carries, when it is authentic, unexpired and not revoked (another process's logout included). */
  verify(value: string | undefined): Promise<Session | undefined>;
  revoke(session: Session): Promise<void>;
  ttlMs: number;
}

/** The sessions of this server; with a store, reads the revocations kept there (awaited at start). */
export async function createSessions(opts: {
  adminToken: string;
  ttlMs?: number;
  now?: () => number;
  /**
   * Where revocations are kept, and how other processes' are seen: without a store they live in
   * this process only (a logout would not reach the other serving processes, nor outlive a restart).
   */
  store?: { database: Database; generations: Generations };
}): Promise<Sessions> {
  const ttlMs = opts.ttlMs ?? SESSION_TTL_MS;
  const now = opts.now ?? Date.now;
  // Derived, never the token itself: a leaked signature reveals nothing about the token.
  const key = createHmac('sha256', opts.adminToken).update('switchyard console session key').digest();
  const mac = (text: string) => createHmac('sha256', key).update(text).digest('base64url');
  const revoked = new Map<string, number>();
  const stored = opts.store && revocationStore(opts.store.database, opts.store.generations);
  await stored?.load(revoked);

  const sessionOf = (id: string, expiresAt: number): Session => ({ id, expiresAt, csrf: mac(`csrf.${id}`) });

  function prune(): void {
    const t = now();
    for (const [id, exp] of revoked) if (exp <= t) revoked.delete(id);
  }

  return {
    ttlMs,
    issue() {
      const id = randomBytes(18).toString('base64url');
      const expiresAt = now() + ttlMs;
      const body = `${VERSION}.${id}.${expiresAt}`;
      return { session: sessionOf(id, expiresAt), value: `${body}.${mac(body)}` };
    },
    async verify(value) {
      if (!value) return undefined;
      const parts = value.split('.');
      if (parts.length !== 4 || parts[0] !== VERSION) return undefined;
      const [, id, exp, sig] = parts;
      // Fail closed: anything that does not verify is no session at all.
      if (!safeEqual(sig, mac(`${VERSION}.${id}.${exp}`))) return undefined;
      const expiresAt = Number(exp);
      if (await stored?.othersChanged()) await stored!.load(revoked);
      if (!Number.isSafeInteger(expiresAt) || expiresAt <= now() || revoked.has(id)) return undefined;
      return sessionOf(id, expiresAt);
    },
    async revoke(session) {
      prune();
      revoked.set(session.id, session.expiresAt);
      await stored?.add(session.id, session.expiresAt, now());
    },
  };
}

/** One cookie's value from a Cookie header. */
export function cookieValue(header: string | null | undefined, name: string): string | undefined {
  for (const part of (header ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}

/** The Cookie header without one cookie (undefined when nothing is left). */
export function withoutCookie(header: string, name: string): string | undefined {
  const kept = header
    .split(';')
    .map((p) => p.trim())
    .filter((p) => p && p.slice(0, Math.max(0, p.indexOf('='))).trim() !== name);
  return kept.length ? kept.join('; ') : undefined;
}

export function sessionCookie(value: string, opts: { maxAgeMs: number; secure: boolean }): string {
  return [
    `${SESSION_COOKIE}=${value}`,
    'Path=/',
    'HttpOnly',
    'SameSite=Strict',
    `Max-Age=${Math.max(0, Math.floor(opts.maxAgeMs / 1000))}`,
    ...(opts.secure ? ['Secure'] : []),
  ].join('; ');
}

export function clearedCookie(secure: boolean): string {
  return sessionCookie('', { maxAgeMs: 0, secure });
}

/**
 * The session of a request that carries the console cookie, with the CSRF check for state-changing
 * methods. Undefined when there is no cookie; throws when there is one that is not acceptable, so
 * the caller says why instead of "missing token".
 */
export async function requestSession(req: Request, sessions: Sessions): Promise<Session | undefined> {
  const value = cookieValue(req.headers.get('cookie'), SESSION_COOKIE);
  if (value === undefined || value === '') return undefined;
  requireConsolePage(req);
  const session = await sessions.verify(value);
  if (!session)
    throw new SwitchyardError('unauthorized', 'the console session has expired or was ended', {
      hint: 'log in again at /console/ with the admin token',
    });
  if (!SAFE_METHODS.has(req.method.toUpperCase())) {
    const sent = req.headers.get(CSRF_HEADER) ?? '';
    if (!sent || !safeEqual(sent, session.csrf))
      throw new SwitchyardError('forbidden', `a ${req.method} made with the console session needs the ${CSRF_HEADER} header`, {
        hint: 'the console sends it for you; scripts should use Authorization: Bearer <admin token> instead',
      });
  }
  return session;
}

const q = {
  all: statement<{ id: string; expires_at: number }>('SELECT id, expires_at FROM console_revocations WHERE expires_at > ?'),
  insert: statement('INSERT INTO console_revocations (id, expires_at) VALUES (?, ?) ON CONFLICT (id) DO UPDATE SET expires_at = excluded.expires_at'),
  purge: statement('DELETE FROM console_revocations WHERE expires_at <= ?'),
};

/** Revocations in the store, read again when another process revoked one (store/generations.ts). */
function revocationStore(database: Database, generations: Generations) {
  return {
    othersChanged: generations.watch('console_revocations'),
    async load(into: Map<string, number>) {
      for (const r of await database.all(q.all, [Date.now()])) into.set(r.id, Number(r.expires_at));
    },
    add: (id: string, expiresAt: number, at: number) =>
      database.transaction(async (tx) => {
        await tx.run(q.purge, [at]);
        await tx.run(q.insert, [id, expiresAt]);
        await generations.bump(tx, 'console_revocations');
      }),
  };
}
