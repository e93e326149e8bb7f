/**
 * The installations table: an Installation as the store keeps it (its row and how it is read), the
 * statements the service runs on it, and the locked read a lifecycle step starts with.
 */
import { statement, type Queries } from '../store/contract.ts';

export type InstallationStatus = 'pending' | 'active' | 'paused' | 'uninstalled';
export type InstallationTarget = 'organization' | 'space' | 'site';

export interface Installation {
  id: string;
  integration: string;
  target: InstallationTarget;
  space?: string;
  site?: string;
  status: InstallationStatus;
  configuration: Record<string, unknown>;
  externalIds: string[];
  createdAt: string;
  updatedAt: string;
  uninstalledAt?: string;
}

export interface Row {
  id: string;
  integration: string;
  target: InstallationTarget;
  space_id: string | null;
  site_id: string | null;
  status: InstallationStatus;
  configuration: string;
  external_ids: string;
  created_at: string;
  updated_at: string;
  uninstalled_at: string | null;
}

export function fromRow(r: Row): Installation {
  return {
    id: r.id,
    integration: r.integration,
    target: r.target,
    ...(r.space_id ? { space: r.space_id } : {}),
    ...(r.site_id ? { site: r.site_id } : {}),
    status: r.status,
    configuration: JSON.parse(r.configuration),
    externalIds: JSON.parse(r.external_ids),
    createdAt: r.created_at,
    updatedAt: r.updated_at,
    ...(r.uninstalled_at ? { uninstalledAt: r.uninstalled_at } : {}),
  };
}

export const q = {
  byId: statement<Row>('SELECT * FROM installations WHERE id = ?'),
  byTokenHash: statement<Row>("SELECT * FROM installations WHERE token_hash = ? AND status != 'uninstalled'"),
  insert: statement(
    `INSERT INTO installations (id, integration, target, space_id, site_id, status, configuration, external_ids, token_hash, created_at, updated_at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
  ),
  configure: statement('UPDATE installations SET configuration = ?, status = ?, updated_at = ? WHERE id = ?'),
  externalIds: statement('UPDATE installations SET external_ids = ?, updated_at = ? WHERE id = ?'),
  status: statement('UPDATE installations SET status = ?, updated_at = ?, uninstalled_at = ? WHERE id = ?'),
  token: statement('UPDATE installations SET token_hash = ?, updated_at = ? WHERE id = ?'),
};

/** The listings `list` answers, one statement per filter. */
const listing = (where: string) => statement<Row>(`SELECT * FROM installations ${where} ORDER BY created_at, id`);
export const lists = {
  all: listing(''),
  live: listing("WHERE status != 'uninstalled'"),
  status: listing('WHERE status = ?'),
  integrationAll: listing('WHERE integration = ?'),
  integrationLive: listing("WHERE integration = ? AND status != 'uninstalled'"),
  integrationStatus: listing('WHERE integration = ? AND status = ?'),
};

// A lifecycle step reads its row locked on PostgreSQL (nodes write at once: read then write must
// not lose another node's change); SQLite's one writer at a time needs no lock.
const byIdLocked = statement<Row>({ sqlite: 'SELECT * FROM installations WHERE id = ?', postgres: 'SELECT * FROM installations WHERE id = ? FOR UPDATE' });

/** The row as `tx` sees it, locked for the rest of `tx` on PostgreSQL (undefined: no such installation). */
export async function lockedRow(tx: Queries, id: string): Promise<Row | undefined> {
  return tx.get(byIdLocked, [id]);
}
