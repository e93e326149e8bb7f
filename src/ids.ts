/**
 * Identifiers that sort by creation time, like Svix's KSUID-based ids: `<prefix>_` + 12 hex digits
 * of the time in ms + 12 random hex digits. Unique, and their index inserts land at the end of the
 * b-tree (a random key would dirty a random page of a large index on every insert).
 */
import { randomBytes } from 'node:crypto';

// Random bytes drawn from a pool: one system call per 512 ids instead of one per id.
let pool = Buffer.alloc(0);
let poolAt = 0;

export function timeOrderedId(prefix: string, now = Date.now()): string {
  if (poolAt + 6 > pool.length) {
    pool = randomBytes(3072);
    poolAt = 0;
  }
  poolAt += 6;
  return `${prefix}_${now.toString(16).padStart(12, '0')}${pool.toString('hex', poolAt - 6, poolAt)}`;
}
