/**
 * Signing secrets of webhook installations. One current secret per installation; a rotation
 * keeps the previous one signing until `now + secret_rotation_overlap`, so receivers can switch
 * over without losing a delivery (one `v1=` per live secret is sent meanwhile).
 * Secrets are stored as given (they must be: HMAC needs the key); they never reach logs.
 */
import { randomBytes } from 'node:crypto';
import { generationsFor } from '../store/generations.ts';
import { SwitchyardError } from '../errors.ts';
import { statement, type Database, type Queries, type Tx } from '../store/contract.ts';

export interface WebhookSecrets {
  /** Set the current secret (generated when not given), in the caller's transaction, and return it. Replaces any current one at once. */
  createSecret(tx: Tx, installationId: string, given?: string): Promise<string>;
  /** A new current secret; the old one keeps signing until `previousExpiresAt` (ISO). */
  rotateSecret(installationId: string, given?: string): Promise<{ secret: string; previousExpiresAt: string }>;
  /** Secrets that sign now, current first (from a cache, read again when a secret changes or expires). */
  liveSecrets(installationId: string): Promise<string[]>;
  /** The current secret and the still-live previous ones, with their expiry (for the admin); in `q` when given (a caller's transaction). */
  describe(installationId: string, q?: Queries): Promise<SecretsView | undefined>;
  /** Ensure a current secret exists, in the caller's transaction (deliveries enqueued for an installation that never got one). */
  ensureSecrets(tx: Tx, installationIds: Iterable<string>): Promise<void>;
  /** Whether an installation has (had) a webhook endpoint here. */
  has(installationId: string): Promise<boolean>;
  /** Pause or resume its deliveries (the endpoint's flag), in the caller's transaction. */
  setPaused(tx: Queries, installationId: string, paused: boolean): Promise<void>;
  /** Uninstall: its secrets and endpoint go, in the caller's transaction. */
  forget(tx: Tx, installationId: string): Promise<void>;
}

export interface SecretsView {
  secret: string;
  createdAt: string;
  previous: Array<{ secret: string; expiresAt: string }>;
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

const q = {
  endpoint: statement('INSERT INTO webhook_endpoints (installation_id, created_at) VALUES (?, ?) ON CONFLICT DO NOTHING'),
  hasEndpoint: statement<{ n: number }>('SELECT 1 AS n FROM webhook_endpoints WHERE installation_id = ?'),
  current: statement<CurrentRow>(
    'SELECT id, secret, created_at FROM webhook_secrets WHERE installation_id = ? AND expires_at IS NULL ORDER BY id DESC LIMIT 1',
  ),
  expire: statement('UPDATE webhook_secrets SET expires_at = ? WHERE installation_id = ? AND expires_at IS NULL'),
  insert: statement('INSERT INTO webhook_secrets (installation_id, secret, created_at) VALUES (?, ?, ?)'),
  live: statement<LiveRow>(
    `SELECT secret, expires_at FROM webhook_secrets WHERE installation_id = ? AND (expires_at IS NULL OR expires_at > ?)
     ORDER BY expires_at IS NOT NULL, id DESC`,
  ),
  purge: statement('DELETE FROM webhook_secrets WHERE installation_id = ? AND expires_at IS NOT NULL AND expires_at <= ?'),
  pause: statement('UPDATE webhook_endpoints SET paused = ? WHERE installation_id = ?'),
  forgetSecrets: statement('DELETE FROM webhook_secrets WHERE installation_id = ?'),
  forgetEndpoint: statement('DELETE FROM webhook_endpoints WHERE installation_id = ?'),
};
type CurrentRow = { id: number; secret: string; created_at: number };
type LiveRow = { secret: string; expires_at: number | null };

function view(current: CurrentRow | undefined, live: LiveRow[]): SecretsView | undefined {
  if (!current) return undefined;
  return {
    secret: current.secret,
    createdAt: new Date(Number(current.created_at)).toISOString(),
    previous: live.filter((r) => r.expires_at !== null).map((r) => ({ secret: r.secret, expiresAt: new Date(Number(r.expires_at)).toISOString() })),
  };
}

export function createSecrets(
  store: { database: Database },
  opts: {
    overlapMs: () => number;
    now?: () => number;
  },
): WebhookSecrets {
  const { database } = store;
  const now = opts.now ?? Date.now;
  // Secrets change only through this object (here or in another serving process, which bumps the
  // generation: see store/generations.ts), so a cache is exact: dropped on every change, and
  // refreshed when the first previous secret expires. It keeps a query off every attempt.
  const cache = new Map<string, { secrets: string[]; until: number }>();
  // Installations seen with a current secret: ensureSecrets (on every enqueue) skips its query.
  const known = new Set<string>();
  const generations = generationsFor(store);
  const othersChanged = generations.watch('webhook_secrets');
  const freshen = async () => {
    if (!(await othersChanged())) return;
    cache.clear();
    known.clear();
  };
  /** A change here, in `tx`: the caches forget the installation now, and again once `tx` ends (a read meanwhile may have cached the old). */
  const changed = async (tx: Tx, installationId: string) => {
    await generations.bump(tx, 'webhook_secrets');
    const forget = () => {
      cache.delete(installationId);
      known.delete(installationId);
    };
    forget();
    tx.afterCommit(forget);
    tx.onRollback(forget);
  };

  /** The installation's current secret becomes `secret`; the previous one expires at `expireAt`. */
  const setCurrent = async (tx: Tx, installationId: string, secret: string, expireAt: number) => {
    await changed(tx, installationId);
    const t = now();
    await tx.run(q.endpoint, [installationId, t]);
    await tx.run(q.purge, [installationId, t]);
    await tx.run(q.expire, [expireAt, installationId]);
    await tx.run(q.insert, [installationId, secret, t]);
  };

  return {
    async createSecret(tx, installationId, given) {
      const secret = checkGiven(given);
      await setCurrent(tx, installationId, secret, now());
      return secret;
    },
    async rotateSecret(installationId, given) {
      const secret = checkGiven(given);
      const previousExpiresAt = now() + opts.overlapMs();
      await database.transaction((tx) => setCurrent(tx, installationId, secret, previousExpiresAt));
      return { secret, previousExpiresAt: new Date(previousExpiresAt).toISOString() };
    },
    async liveSecrets(installationId) {
      await freshen();
      const t = now();
      const hit = cache.get(installationId);
      if (hit && t < hit.until) return hit.secrets;
      const rows = await database.all(q.live, [installationId, t]);
      const until = Math.min(Infinity, ...rows.filter((r) => r.expires_at !== null).map((r) => Number(r.expires_at)));
      const secrets = rows.map((r) => r.secret);
      cache.set(installationId, { secrets, until });
      return secrets;
    },
    async describe(installationId, on = database) {
      const live = await on.all(q.live, [installationId, now()]);
      return view(await on.get(q.current, [installationId]), live);
    },
    async ensureSecrets(tx, installationIds) {
      // Not freshened here (the generations are read outside transactions): liveSecrets does, at
      // the next attempt. A secret another process deleted since means its installation was
      // uninstalled, and nothing is enqueued for it then.
      for (const id of new Set(installationIds)) {
        if (known.has(id)) continue;
        // Only a secret found already stored is remembered: one created here belongs to the
        // caller's transaction, which may still roll back.
        if (await tx.get(q.current, [id])) known.add(id);
        else await setCurrent(tx, id, newSecret(), now());
      }
    },
    async has(installationId) {
      return (await database.get(q.hasEndpoint, [installationId])) !== undefined;
    },
    async setPaused(tx, installationId, pause) {
      await tx.run(q.endpoint, [installationId, now()]);
      await tx.run(q.pause, [pause ? 1 : 0, installationId]);
    },
    async forget(tx, installationId) {
      await changed(tx, installationId);
      await tx.run(q.forgetSecrets, [installationId]);
      await tx.run(q.forgetEndpoint, [installationId]);
    },
  };
}
