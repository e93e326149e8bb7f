/**
 * Signing secrets of webhook installations. One current secret per installation; a rotation
 * keeps the previous one signing until `now + secret_rotation_overlap`, so receivers can switch
 * over without losing a delivery (one `v1=` per live secret is sent meanwhile).
 * Secrets are stored as given (they must be: HMAC needs the key); they never reach logs.
 */
import { oncePerTurn } from '../lib/batch.ts';
import { generationsOf } from '../store/generations.ts';
import { randomBytes } from 'node:crypto';
import { SwitchyardError } from '../errors.ts';
import type { Db } from '../store/index.ts';

export interface WebhookSecrets {
  /** Set the current secret (generated when not given) and return it. Replaces any current one at once. */
  createSecret(installationId: string, given?: string): string;
  /** A new current secret; the old one keeps signing until `previousExpiresAt` (ISO). */
  rotateSecret(installationId: string, given?: string): { secret: string; previousExpiresAt: string };
  /** Secrets that sign now, current first. */
  liveSecrets(installationId: string): string[];
  /** The current secret and the still-live previous ones, with their expiry (for the admin). */
  describe(installationId: string): { secret: string; createdAt: string; previous: Array<{ secret: string; expiresAt: string }> } | undefined;
  /** Ensure a current secret exists (deliveries enqueued for an installation that never got one). */
  ensureSecret(installationId: string): void;
  /** Whether an installation has (had) a webhook endpoint here. */
  has(installationId: string): boolean;
  setPaused(installationId: string, paused: boolean): void;
  /** Whether deliveries to this installation are held (answered from memory: never less paused than the store). */
  isPaused(installationId: string): boolean;
  /** Whether any installation is paused (false means none is, in the database too). */
  anyPaused(): boolean;
  forget(installationId: string): void;
}

export const MIN_SECRET_LENGTH = 16;
/** An HMAC key longer than SHA-256's block (64 bytes) is hashed first anyway: 256 leaves room for any real one. */
export const MAX_SECRET_LENGTH = 256;

/**
 * `whsec_` and 24 random bytes in base64 (standard alphabet: 32 characters, no padding): the form
 * Standard Webhooks receivers read, so a generated secret serves either signature scheme.
 */
export function newSecret(): string {
  return `whsec_${randomBytes(24).toString('base64')}`;
}

function checkGiven(given: string | undefined): string {
  if (given === undefined) return newSecret();
  if (typeof given !== 'string' || given.length < MIN_SECRET_LENGTH || given.length > MAX_SECRET_LENGTH || /\s/.test(given))
    throw new SwitchyardError('bad_request', `a webhook secret must be ${MIN_SECRET_LENGTH} to ${MAX_SECRET_LENGTH} characters, without whitespace`, {
      where: 'secret',
    });
  return given;
}

export function createSecrets(
  db: Db,
  opts: {
    overlapMs: () => number;
    now?: () => number;
  },
): WebhookSecrets {
  const now = opts.now ?? Date.now;
  const q = {
    endpoint: db.prepare('INSERT INTO webhook_endpoints (installation_id, created_at) VALUES (?, ?) ON CONFLICT DO NOTHING'),
    hasEndpoint: db.prepare<[string], { n: number }>('SELECT 1 AS n FROM webhook_endpoints WHERE installation_id = ?'),
    current: db.prepare<[string], { id: number; secret: string; created_at: number }>(
      'SELECT id, secret, created_at FROM webhook_secrets WHERE installation_id = ? AND expires_at IS NULL ORDER BY id DESC LIMIT 1',
    ),
    expire: db.prepare('UPDATE webhook_secrets SET expires_at = ? WHERE installation_id = ? AND expires_at IS NULL'),
    insert: db.prepare('INSERT INTO webhook_secrets (installation_id, secret, created_at) VALUES (?, ?, ?)'),
    live: db.prepare<[string, number], { secret: string; expires_at: number | null }>(
      `SELECT secret, expires_at FROM webhook_secrets WHERE installation_id = ? AND (expires_at IS NULL OR expires_at > ?)
       ORDER BY expires_at IS NOT NULL, id DESC`,
    ),
    purge: db.prepare('DELETE FROM webhook_secrets WHERE installation_id = ? AND expires_at IS NOT NULL AND expires_at <= ?'),
    pause: db.prepare('UPDATE webhook_endpoints SET paused = ? WHERE installation_id = ?'),
    forgetSecrets: db.prepare('DELETE FROM webhook_secrets WHERE installation_id = ?'),
    forgetEndpoint: db.prepare('DELETE FROM webhook_endpoints WHERE installation_id = ?'),
    pausedAll: db.prepare<[], { installation_id: string }>('SELECT installation_id FROM webhook_endpoints WHERE paused = 1'),
  };

  // Secrets change only through this object (here or in another serving process, which bumps the
  // generation: see store/generations.ts), so a cache is exact: dropped on every change, and
  // refreshed when the first previous secret expires. It keeps a query off every attempt.
  const cache = new Map<string, { secrets: string[]; until: number }>();
  // Installations seen with a current secret: ensureSecret (on every enqueue) skips its query.
  const known = new Set<string>();
  // Paused installations, for deciding in memory whether a new delivery may start at once. They
  // change only through setPaused/forget below, which may run inside a caller's transaction that
  // could still roll back: a pause counts at once, and the copy is reloaded after the caller's
  // synchronous work is over, so it is never less paused than the database.
  let paused = new Set<string>();
  const reloadPaused = () => {
    if (!db.open) return;
    paused = new Set(q.pausedAll.all().map((r) => r.installation_id));
  };
  const reloadSoon = oncePerTurn(reloadPaused);
  reloadPaused();
  const generations = generationsOf(db);
  const othersChanged = generations.watch('webhook_secrets');
  const freshen = () => {
    if (!othersChanged()) return;
    cache.clear();
    known.clear();
    reloadPaused();
  };

  const setCurrent = db.transaction((installationId: string, secret: string, expireAt: number) => {
    generations.bump('webhook_secrets');
    cache.delete(installationId);
    known.delete(installationId);
    q.endpoint.run(installationId, now());
    q.purge.run(installationId, now());
    q.expire.run(expireAt, installationId);
    q.insert.run(installationId, secret, now());
  });

  return {
    createSecret(installationId, given) {
      const secret = checkGiven(given);
      setCurrent(installationId, secret, now());
      return secret;
    },
    rotateSecret(installationId, given) {
      const secret = checkGiven(given);
      const previousExpiresAt = now() + opts.overlapMs();
      setCurrent(installationId, secret, previousExpiresAt);
      return { secret, previousExpiresAt: new Date(previousExpiresAt).toISOString() };
    },
    liveSecrets(installationId) {
      freshen();
      const t = now();
      const hit = cache.get(installationId);
      if (hit && t < hit.until) return hit.secrets;
      const rows = q.live.all(installationId, t);
      const until = Math.min(Infinity, ...rows.filter((r) => r.expires_at !== null).map((r) => r.expires_at!));
      const secrets = rows.map((r) => r.secret);
      cache.set(installationId, { secrets, until });
      return secrets;
    },
    describe(installationId) {
      const rows = q.live.all(installationId, now());
      const current = q.current.get(installationId);
      if (!current) return undefined;
      return {
        secret: current.secret,
        createdAt: new Date(current.created_at).toISOString(),
        previous: rows.filter((r) => r.expires_at !== null).map((r) => ({ secret: r.secret, expiresAt: new Date(r.expires_at!).toISOString() })),
      };
    },
    ensureSecret(installationId) {
      freshen();
      if (known.has(installationId)) return;
      // Only a secret found already stored is remembered: one created here belongs to the caller's
      // transaction, which may still roll back.
      if (q.current.get(installationId)) known.add(installationId);
      else setCurrent(installationId, newSecret(), now());
    },
    has(installationId) {
      return q.hasEndpoint.get(installationId) !== undefined;
    },
    setPaused(installationId, pause) {
      q.endpoint.run(installationId, now());
      q.pause.run(pause ? 1 : 0, installationId);
      generations.bump('webhook_secrets');
      if (pause) paused.add(installationId);
      reloadSoon();
    },
    isPaused: (installationId) => (freshen(), paused.has(installationId)),
    anyPaused: () => (freshen(), paused.size > 0),
    forget(installationId) {
      cache.delete(installationId);
      known.delete(installationId);
      q.forgetSecrets.run(installationId);
      q.forgetEndpoint.run(installationId);
      generations.bump('webhook_secrets');
      reloadSoon();
    },
  };
}
