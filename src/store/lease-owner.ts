/**
 * Who holds a lease: `<node>.<pid>.<random>`. The node is this data directory's id (a file in it,
 * made once), so on PostgreSQL, where several nodes share one queue and their pids may be the same
 * (containers), a node takes back only its own leases: at its start (left by its last stop) and
 * when one of its serving processes dies. Another node's leases are never taken early; they run
 * out and are claimed again. On SQLite one node owns the file, so a start takes back all.
 */
import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Db } from './index.ts';
import { engineOf } from './postgres/db.ts';
import { SwitchyardError } from '../errors.ts';

export const NODE_ID_FILE = 'node-id';

let prefix = '';

/** This node's id, made on first use (the data directory exists: the store opened it). */
export function useNodeId(dataDir: string): string {
  const file = join(dataDir, NODE_ID_FILE);
  let id = '';
  try {
    id = readFileSync(file, 'utf8').trim();
  } catch {
    /* made below */
  }
  if (!/^[0-9a-f]{12}$/.test(id)) {
    id = randomBytes(6).toString('hex');
    try {
      writeFileSync(file, `${id}\n`, { mode: 0o600, flag: 'wx' });
    } catch {
      // Another process of this node made it first: its id is the node's.
      const other = readFileSync(file, 'utf8').trim();
      if (/^[0-9a-f]{12}$/.test(other)) id = other;
    }
  }
  prefix = `${id}.`;
  return id;
}

/** A new lease owner for a worker of this process. */
export function leaseOwner(): string {
  return `${prefix}${process.pid}.${randomBytes(4).toString('hex')}`;
}

/** The owners of one serving process of this node (the supervisor gives back a dead one's leases). */
export function processLeases(pid: number | undefined): string {
  return `${prefix}${pid}.`;
}

/** At start, the leases left by the last stop: every lease on SQLite, this node's on PostgreSQL. */
export function leftoverLeases(db: Db): string {
  if (engineOf(db) === 'sqlite') return '';
  // An empty prefix would take back every node's leases.
  if (!prefix) throw new Error('leftoverLeases before useNodeId: the node id is not known yet');
  return prefix;
}

/**
 * On PostgreSQL, no two live nodes may share an id (a data_dir copied from another node's, an
 * image with the file in it): each would take back the other's leases as its own. The node holds
 * an advisory lock on its id for as long as its connection lives, and a second one is refused.
 */
export function claimNodeId(db: Db, dataDir: string): void {
  const id = useNodeId(dataDir);
  if (engineOf(db) !== 'postgres') return;
  const got = db.prepare('SELECT pg_try_advisory_lock(CAST(? AS INTEGER), hashtext(?)) AS got').pluck().get(NODE_LOCK, id);
  if (got !== true)
    throw new SwitchyardError('conflict', `another node on this store already runs as node ${id} (${join(dataDir, NODE_ID_FILE)})`, {
      hint: `give each node its own data_dir; if this one was copied from another node's, delete ${join(dataDir, NODE_ID_FILE)} and start again (a new id is made)`,
    });
}

/** pg_advisory_lock's first key for node ids ("swnd"). */
const NODE_LOCK = 0x73776e64;
