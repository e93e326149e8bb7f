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
import { statement, type Database, type Queries } from '../store/contract.ts';

export interface WebhookSecrets {
  /**
   * Set the current secret (generated when not given) and return it. Replaces any current one at
   * once. Synchronous: told inside the installations module's transaction (the lifecycle).
   */
  createSecret(installationId: string, given?: string): string;
  /** A new current secret; the old one keeps signing until `previousExpiresAt` (ISO). */
  rotateSecret(installationId: string, given?: string): Promise<{ secret: string; previousExpiresAt: string }>;
  /** Secrets that sign now, current first (from a cache, read again when a secret changes or expires). */
  liveSecrets(installationId: string): Promise<string[]>;
  /** The current secret and the still-live previous ones, with their expiry (for the admin). */
  describe(installationId: string): Promise<SecretsView | undefined>;
  /** As describe, on the synchronous connection, inside the installations module's transaction (the lifecycle). */
  describeNow(installationId: string): SecretsView | undefined;
  /** Ensure a current secret exists, in the caller's transaction (deliveries enqueued for an installation that never got one). */
  ensureSecrets(tx: Queries, installationIds: Iterable<string>): Promise<void>;
  /** Whether an installation has (had) a webhook endpoint here. */
  has(installationId: string): Promise<boolean>;
  /** Synchronous: the lifecycle (see createSecret). */
  setPaused(installationId: string, paused: boolean): void;
  /** Whether deliveries to this installation are held (answered from memory: never less paused than the store). */
  isPaused(installationId: string): boolean;
  /** Whether any installation is paused (false means none is, in the database too). */
  anyPaused(): boolean;
  /** Synchronous: the lifecycle (see createSecret). */
  forget(installationId: string): void;
  /** Read the paused installations (a start step: await it before serving). */
  load(): Promise<void>;
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

const sql = {
  endpoint: 'INSERT INTO webhook_endpoints (installation_id, created_at) VALUES (?, ?) ON CONFLICT DO NOTHING',
  current: 'SELECT id, secret, created_at FROM webhook_secrets WHERE installation_id = ? AND expires_at IS NULL ORDER BY id DESC LIMIT 1',
  expire: 'UPDATE webhook_secrets SET expires_at = ? WHERE installation_id = ? AND expires_at IS NULL',
  insert: 'INSERT INTO webhook_secrets (installation_id, secret, created_at) VALUES (?, ?, ?)',
  live: `SELECT secret, expires_at FROM webhook_secrets WHERE installation_id = ? AND (expires_at IS NULL OR expires_at > ?)
       ORDER BY expires_at IS NOT NULL, id DESC`,
  purge: 'DELETE FROM webhook_secrets WHERE installation_id = ? AND expires_at IS NOT NULL AND expires_at <= ?',
};
type CurrentRow = { id: number; secret: string; created_at: number };
type LiveRow = { secret: string; expires_at: number | null };

const q = {
  endpoint: statement(sql.endpoint),
  hasEndpoint: statement<{ n: number }>('SELECT 1 AS n FROM webhook_endpoints WHERE installation_id = ?'),
  current: statement<CurrentRow>(sql.current),
  expire: statement(sql.expire),
  insert: statement(sql.insert),
  live: statement<LiveRow>(sql.live),
  purge: statement(sql.purge),
  pausedAll: statement<{ installation_id: string }>('SELECT installation_id FROM webhook_endpoints WHERE paused = 1'),
};

function view(current: CurrentRow | undefined, live: LiveRow[]): SecretsView | undefined {
  if (!current) return undefined;
  return {
    secret: current.secret,
    createdAt: new Date(Number(current.created_at)).toISOString(),
    previous: live.filter((r) => r.expires_at !== null).map((r) => ({ secret: r.secret, expiresAt: new Date(Number(r.expires_at)).toISOString() })),
  };
}

/**
 * `db` (the synchronous connection) serves the installation's lifecycle alone (createSecret,
 * setPaused, forget, describeNow), told inside the installations module's transactions, and the
 * store's generations (store/generations.ts).
 */
export function createSecrets(
  database: Database,
  db: Db,
  opts: {
    overlapMs: () => number;
    now?: () => number;
  },
): WebhookSecrets {
  const now = opts.now ?? Date.now;
  // The lifecycle's statements, on the synchronous connection (prepared on first use).
  let sync: ReturnType<typeof prepareSync> | undefined;
  const prepareSync = () => ({
    endpoint: db.prepare(sql.endpoint),
    current: db.prepare<[string], CurrentRow>(sql.current),
    expire: db.prepare(sql.expire),
    insert: db.prepare(sql.insert),
    live: db.prepare<[string, number], LiveRow>(sql.live),
    purge: db.prepare(sql.purge),
    pause: db.prepare('UPDATE webhook_endpoints SET paused = ? WHERE installation_id = ?'),
    forgetSecrets: db.prepare('DELETE FROM webhook_secrets WHERE installation_id = ?'),
    forgetEndpoint: db.prepare('DELETE FROM webhook_endpoints WHERE installation_id = ?'),
  });
  const lifecycle = () => (sync ??= prepareSync());

  // Secrets change only through this object (here or in another serving process, which bumps the
  // generation: see store/generations.ts), so a cache is exact: dropped on every change, and
  // refreshed when the first previous secret expires. It keeps a query off every attempt.
  const cache = new Map<string, { secrets: string[]; until: number }>();
  // Installations seen with a current secret: ensureSecrets (on every enqueue) skips its query.
  const known = new Set<string>();
  // Paused installations, for deciding in memory whether a new delivery may start at once. They
  // change only through setPaused/forget below, which may run inside a caller's transaction that
  // could still roll back: a pause counts at once, and the copy is reloaded after the caller's
  // synchronous work is over, so it is never less paused than the database.
  let paused = new Set<string>();
  // While a reload is due (another process changed something), anyPaused answers true: a retry is
  // then checked against the store rather than let go on a stale copy.
  let reloading = false;
  const reloadPaused = async () => {
    if (!db.open) return;
    paused = new Set((await database.all(q.pausedAll)).map((r) => r.installation_id));
    reloading = false;
  };
  const reloadSoon = oncePerTurn(() => void reloadPaused().catch(() => {}));
  const generations = generationsOf(db);
  const othersChanged = generations.watch('webhook_secrets');
  const freshen = () => {
    if (!othersChanged()) return;
    cache.clear();
    known.clear();
    reloading = true;
    reloadSoon();
  };
  const changed = (installationId: string) => {
    generations.bump('webhook_secrets');
    cache.delete(installationId);
    known.delete(installationId);
  };

  /** The installation's current secret becomes `secret`; the previous one expires at `expireAt`. */
  const setCurrent = async (tx: Queries, installationId: string, secret: string, expireAt: number) => {
    changed(installationId);
    const t = now();
    await tx.run(q.endpoint, [installationId, t]);
    await tx.run(q.purge, [installationId, t]);
    await tx.run(q.expire, [expireAt, installationId]);
    await tx.run(q.insert, [installationId, secret, t]);
  };
  const setCurrentNow = (installationId: string, secret: string, expireAt: number) => {
    const s = lifecycle();
    changed(installationId);
    db.transaction(() => {
      s.endpoint.run(installationId, now());
      s.purge.run(installationId, now());
      s.expire.run(expireAt, installationId);
      s.insert.run(installationId, secret, now());
    })();
  };

  return {
    createSecret(installationId, given) {
      const secret = checkGiven(given);
      setCurrentNow(installationId, secret, now());
      return secret;
    },
    async rotateSecret(installationId, given) {
      const secret = checkGiven(given);
      const previousExpiresAt = now() + opts.overlapMs();
      await database.transaction((tx) => setCurrent(tx, installationId, secret, previousExpiresAt));
      return { secret, previousExpiresAt: new Date(previousExpiresAt).toISOString() };
    },
    async liveSecrets(installationId) {
      freshen();
      const t = now();
      const hit = cache.get(installationId);
      if (hit && t < hit.until) return hit.secrets;
      const rows = await database.all(q.live, [installationId, t]);
      const until = Math.min(Infinity, ...rows.filter((r) => r.expires_at !== null).map((r) => Number(r.expires_at)));
      const secrets = rows.map((r) => r.secret);
      cache.set(installationId, { secrets, until });
      return secrets;
    },
    async describe(installationId) {
      const live = await database.all(q.live, [installationId, now()]);
      return view(await database.get(q.current, [installationId]), live);
    },
    describeNow(installationId) {
      const s = lifecycle();
      return view(s.current.get(installationId), s.live.all(installationId, now()));
    },
    async ensureSecrets(tx, installationIds) {
      freshen();
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
    setPaused(installationId, pause) {
      const s = lifecycle();
      s.endpoint.run(installationId, now());
      s.pause.run(pause ? 1 : 0, installationId);
      generations.bump('webhook_secrets');
      if (pause) paused.add(installationId);
      reloadSoon();
    },
    isPaused: (installationId) => (freshen(), paused.has(installationId)),
    anyPaused: () => (freshen(), reloading || paused.size > 0),
    forget(installationId) {
      const s = lifecycle();
      cache.delete(installationId);
      known.delete(installationId);
      s.forgetSecrets.run(installationId);
      s.forgetEndpoint.run(installationId);
      generations.bump('webhook_secrets');
      reloadSoon();
    },
    load: reloadPaused,
  };
}
