/**
 * Installation tokens. Two kinds resolve to the same principal:
 * - the long-lived token minted at install (`sy_inst_...`), shown once and stored only as a hash;
 * - short-lived invocation tokens (`sy_inv_...`) the server signs for each sandbox invocation and
 *   hands to the guest in `environment.apiTokens`, so no long-lived secret ever enters an isolate.
 * And one more, GitBook's integration-wide token (`sy_int_...`, `environment.apiTokens.integration`):
 * short-lived too, signed with a key of its own, naming an integration instead of an installation.
 */
import { createHmac, randomBytes } from 'node:crypto';
import { safeEqual } from '../http/auth.ts';
import { statement, type Queries } from '../store/contract.ts';

export function newInstallationToken(): string {
  return `sy_inst_${randomBytes(24).toString('base64url')}`;
}

const q = {
  key: statement<{ key: Buffer }>('SELECT key FROM signing_keys WHERE name = ?'),
  insert: statement('INSERT OR IGNORE INTO signing_keys (name, key, created_at) VALUES (?, ?, ?)'),
};

/**
 * A named 32-byte server key, created on first use and kept in the database (read once, at start,
 * by those that use it: the first of several processes or nodes to insert it gives it to all).
 */
export async function signingKey(db: Queries, name: string): Promise<Buffer> {
  const row = await db.get(q.key, [name]);
  if (row) return Buffer.from(row.key);
  await db.run(q.insert, [name, randomBytes(32), new Date().toISOString()]);
  return Buffer.from((await db.get(q.key, [name]))!.key);
}

/** `<prefix><base64url(subject.expiry)>.<HMAC>`: a subject (installation id, integration name) until an expiry. */
function mint(prefix: string, key: Buffer, subject: string, ttlMs: number, now: number): string {
  const payload = `${subject}.${Math.ceil((now + ttlMs) / 1000)}`;
  const mac = createHmac('sha256', key).update(payload).digest('base64url');
  return `${prefix}${Buffer.from(payload).toString('base64url')}.${mac}`;
}

/** The subject of a valid, unexpired token minted with `prefix` and `key`. */
function read(prefix: string, key: Buffer, token: string, now: number): string | undefined {
  if (!token.startsWith(prefix)) return undefined;
  const [encoded, mac] = token.slice(prefix.length).split('.');
  if (!encoded || !mac) return undefined;
  const payload = Buffer.from(encoded, 'base64url').toString();
  const expected = createHmac('sha256', key).update(payload).digest('base64url');
  if (!safeEqual(mac, expected)) return undefined;
  const dot = payload.lastIndexOf('.');
  const expires = Number(payload.slice(dot + 1));
  if (!Number.isFinite(expires) || expires * 1000 < now) return undefined;
  return payload.slice(0, dot);
}

export function mintInvocationToken(key: Buffer, installationId: string, ttlMs: number, now = Date.now()): string {
  return mint('sy_inv_', key, installationId, ttlMs, now);
}

/** The installation id of a valid, unexpired invocation token. */
export function readInvocationToken(key: Buffer, token: string, now = Date.now()): string | undefined {
  return read('sy_inv_', key, token, now);
}

/** An integration-wide token for one invocation (GitBook's `apiTokens.integration`); use its own key. */
export function mintIntegrationToken(key: Buffer, integration: string, ttlMs: number, now = Date.now()): string {
  return mint('sy_int_', key, integration, ttlMs, now);
}

/** The integration name of a valid, unexpired integration token. */
export function readIntegrationToken(key: Buffer, token: string, now = Date.now()): string | undefined {
  return read('sy_int_', key, token, now);
}

/**
 * How long a token handed to one invocation lives: the invocation's wall time, its waitUntil work,
 * and a margin. Installation tokens minted for an invocation at its request live as long.
 */
export function invocationTokenTtl(sandbox: { wall_time: number; wait_until: number }): number {
  return sandbox.wall_time + sandbox.wait_until + 60_000;
}
