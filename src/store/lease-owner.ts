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
import type { Store } from './index.ts';
import type { Queries } from './contract.ts';
import { holdSessionLock, type LockHolder, type LockRefused, type SessionLock } from './postgres/session-lock.ts';
import { storageCode } from './health.ts';
import { SwitchyardError } from '../errors.ts';
import type { Logger } from '../log/index.ts';

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

/** A new lease owner for a delivery sender or handler runner of this process. */
export function leaseOwner(): string {
  return `${prefix}${process.pid}.${randomBytes(4).toString('hex')}`;
}

/** The owners of one serving process of this node (the supervisor gives back a dead one's leases). */
export function processLeases(pid: number | undefined): string {
  return `${prefix}${pid}.`;
}

/**
 * At start, the leases left by the last stop: every lease on SQLite, this node's on PostgreSQL.
 * Given the store, or its contract (`Queries`).
 */
export function leftoverLeases(of: Store | Queries): string {
  if (of.engine === 'sqlite') return '';
  // An empty prefix would take back every node's leases.
  if (!prefix) throw new Error('leftoverLeases before useNodeId: the node id is not known yet');
  return prefix;
}

/** This node's hold on its id: given back when the node stops. */
export interface NodeIdClaim {
  release(): Promise<void>;
}

/**
 * On PostgreSQL, no two live nodes may share an id (a data_dir copied from another node's, an
 * image with the file in it): each would take back the other's leases as its own. The node holds
 * an advisory lock on its id, and a second one is refused at its start.
 *
 * The lock lives with a database session, so a database restart or failover ends it, and a copy
 * started then would be let in. The lock therefore has a connection of its own that comes back at
 * once and takes the lock back first (session-lock.ts); should another node hold it by then,
 * `onLost` is told (the id is that node's now): the caller stops serving as this id. Fail closed:
 * of two live nodes with one id, the one that lost the lock stops, whichever it is.
 *
 * The lock's own earlier session is never taken for another node: a check that timed out (a
 * stalled backend) leaves that session holding the lock on the server, and it is ended and the
 * lock taken back. At the start, a holder that does nothing (this node's last process, on a host
 * that went away) is waited for while the server's keepalives end it; one that acts is a live node.
 */
export async function claimNodeId(store: Store, dataDir: string, opts: { log?: Logger; onLost?: (e: SwitchyardError) => void } = {}): Promise<NodeIdClaim> {
  const id = useNodeId(dataDir);
  // The lock's own connection (session-lock.ts) is opened with the store's connection string.
  const url = store.postgres?.url;
  if (!url) return { release: async () => {} };
  const file = join(dataDir, NODE_ID_FILE);
  const log = opts.log;
  let lock: SessionLock | LockRefused;
  try {
    lock = await holdSessionLock({
      url,
      key: NODE_LOCK,
      name: id,
      applicationName: `switchyard ${process.pid} (node id)`,
      dropped: (e) =>
        log?.warn('the node id lock went with its connection to PostgreSQL; taking it back as soon as the server answers', { node: id, reason: e.message }),
      endingOwn: (h) =>
        log?.warn("the node id lock is still held by this node's own earlier session, which stopped answering: ending it and taking the lock back", {
          node: id,
          backend_pid: h.pid,
        }),
      retaken: (ms) => log?.info('node id lock taken back', { node: id, after_ms: ms }),
      lost: (h) => {
        const e = new SwitchyardError(
          'conflict',
          `another node took this node's id ${id} on the store while the connection to PostgreSQL was down (a database restart or failover): two nodes have this id in their data_dir (here ${file}); this node stops serving as ${id} (the id's lock is held by ${session(h)})`,
          {
            hint: `give each node its own data_dir: on the node whose data_dir was copied from another's, delete its node-id file (here ${file}) and start it again (a new id is made)`,
          },
        );
        if (opts.onLost) opts.onLost(e);
        else log?.error(e.message, { code: e.code, hint: e.hint });
      },
    });
  } catch (e) {
    const code = storageCode(e) === 'storage_unavailable' ? 'storage_unavailable' : 'storage_failed';
    throw new SwitchyardError(code, `cannot take the node id lock on the store: ${(e as Error).message}`, { cause: e });
  }
  if ('refused' in lock) {
    const h = lock.holder;
    if (lock.silent && h)
      throw new SwitchyardError(
        'conflict',
        `node id ${id} (${file}) is held on the store by ${session(h)}, which has done nothing since ${h.lastActive?.toISOString()}: a node with this id whose host went away or whose process is frozen`,
        {
          hint: `if it is this node's own earlier process (a crash, a host that went down), PostgreSQL ends that session once its keepalives fail (about 25 s after it went silent for a session this version opened; otherwise after tcp_keepalives_idle, 2 hours by default), or end it now with SELECT pg_terminate_backend(${h.pid}), then start again; if another node runs with this id (a copied data_dir), delete ${file} on this one and start again (a new id is made)`,
        },
      );
    throw new SwitchyardError(
      'conflict',
      `another node on this store already runs as node ${id} (${file})${h ? `; the id's lock is held by ${session(h)}` : ''}`,
      {
        hint: `give each node its own data_dir; if this one was copied from another node's, delete ${file} and start again (a new id is made)`,
      },
    );
  }
  return lock;
}

/** A session as a message names it: its backend's pid, its application_name and where it connects from. */
function session(h: LockHolder): string {
  return `the session of backend pid ${h.pid} ("${h.applicationName}"${h.clientAddr ? ` from ${h.clientAddr}` : ''})`;
}

/** pg_advisory_lock's first key for node ids ("swnd"). */
const NODE_LOCK = 0x73776e64;
