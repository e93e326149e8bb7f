/**
 * The admin token: from config.yaml, else generated once into <data_dir>/admin-token (mode 0600),
 * where the CLI on the same machine finds it. Compared in constant time.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Config } from '../config/index.ts';

export const ADMIN_TOKEN_FILE = 'admin-token';

export function adminTokenFile(dataDir: string): string {
  return join(dataDir, ADMIN_TOKEN_FILE);
}

/** The configured token, or the generated one (created when `create` and missing). */
export function resolveAdminToken(config: Pick<Config, 'admin_token' | 'data_dir'>, create = false): string | undefined {
  if (config.admin_token) return config.admin_token;
  const file = adminTokenFile(config.data_dir);
  try {
    return readFileSync(file, 'utf8').trim();
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT' || !create) return undefined;
  }
  const token = `sy_admin_${randomBytes(24).toString('base64url')}`;
  mkdirSync(config.data_dir, { recursive: true });
  try {
    writeFileSync(file, `${token}\n`, { mode: 0o600, flag: 'wx' });
  } catch (e) {
    // Made but not written (a full disk): an empty file would be read as the token at every start.
    if ((e as NodeJS.ErrnoException).code !== 'EEXIST') rmSync(file, { force: true });
    throw e;
  }
  return token;
}

/** Constant-time equality of two secrets of any length (hash first so lengths do not leak). */
export function safeEqual(a: string, b: string): boolean {
  return equalsDigest(a, createHash('sha256').update(b).digest(), b.length);
}

function equalsDigest(presented: string, digest: Buffer, length: number): boolean {
  return timingSafeEqual(createHash('sha256').update(presented).digest(), digest) && presented.length === length;
}

/**
 * safeEqual against a secret that stays the same from call to call (the admin token, compared on
 * every API request): its digest is made once per value, not per request.
 */
export function knownSecretEqual(): (presented: string, secret: string) => boolean {
  let known: { secret: string; digest: Buffer } | undefined;
  return (presented, secret) => {
    if (known?.secret !== secret) known = { secret, digest: createHash('sha256').update(secret).digest() };
    return equalsDigest(presented, known.digest, secret.length);
  };
}

/** How an install link begins (src/installations/links.ts makes them; the guard tells a broken one apart to say so). */
export const INSTALL_LINK_PREFIX = 'sy_link_';

/** The token of an `Authorization: Bearer <token>` header, if any. */
export function bearerToken(header: string | null | undefined): string | undefined {
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header ?? '');
  return m?.[1];
}

/** sha256 hex, how installation tokens are stored. */
export function hashToken(token: string): string {
  return createHash('sha256').update(token).digest('hex');
}
