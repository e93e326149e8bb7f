/**
 * Replays: finished deliveries (failed or delivered) back to the queue with a fresh schedule, by
 * filter or one by one, held when their installation is paused, never under an attempt in flight.
 */
import { statement, type Database, type Queries } from '../store/contract.ts';
import { holdIfPaused } from './queue-outcomes.ts';
import { COLUMNS, originOf, type Row } from './queue-rows.ts';

/** Which deliveries a replay takes: of a finished status, created in the window, optionally narrowed. */
export interface ReplayFilter {
  status: 'failed' | 'delivered';
  since: number;
  until: number;
  installation?: string;
  type?: string;
  origin?: string;
}

/** Why one delivery cannot be replayed (replayOne). */
export type ReplayRefusal = 'not_found' | 'queued' | 'cancelled' | 'uninstalled' | 'busy';

const replayParams = (f: ReplayFilter) => ({
  status: f.status,
  since: f.since,
  until: f.until,
  installation: f.installation ?? null,
  type: f.type ?? null,
  origin: f.origin ?? null,
});

const q = {
  byId: statement<Row>(`SELECT ${COLUMNS} FROM webhook_deliveries d WHERE d.id = ?`),
  replayable: statement<{ seq: number; id: string; event_type: string; installation_id: string; url: string }>(
    `SELECT seq, id, event_type, installation_id, url FROM webhook_deliveries INDEXED BY webhook_deliveries_by_status
       WHERE status = @status AND created_at >= @since AND created_at <= @until
         AND (CAST(@installation AS TEXT) IS NULL OR installation_id = @installation)
         AND (CAST(@type AS TEXT) IS NULL OR event_type = @type) AND (CAST(@origin AS TEXT) IS NULL OR origin = @origin)
         AND installation_id IN (SELECT installation_id FROM webhook_endpoints)
       ORDER BY seq`,
  ),
  hasEndpoint: statement<{ n: number }>('SELECT 1 AS n FROM webhook_endpoints WHERE installation_id = ?'),
  // Back to the queue with a fresh schedule (`attempts` counts the schedule's automatic attempts;
  // the attempts made before stay, numbered on). Not under an attempt in flight: its outcome would
  // overwrite this.
  requeue: statement(
    `UPDATE webhook_deliveries SET status = 'pending', attempts = 0, next_attempt_at = @now, completed_at = NULL, updated_at = @now,
         url = @url, origin = @origin
       WHERE seq = @seq AND status IN ('failed', 'delivered') AND (lease_until IS NULL OR lease_until <= @now)`,
  ),
};

export interface ReplayDeps {
  noteDue: (origin: string, at: number) => void;
}

export function createReplays(database: Database, { noteDue }: ReplayDeps) {
  /** A finished delivery back to the queue (held if its installation is paused); undefined when it is under an attempt. */
  async function requeue(
    tx: Queries,
    r: { seq: number; event_type: string; installation_id: string; url: string },
    now: number,
    urlOf: (d: { eventType: string; installationId: string; url: string }) => string,
  ): Promise<boolean | undefined> {
    const url = urlOf({ eventType: r.event_type, installationId: r.installation_id, url: r.url });
    if (!(await tx.run(q.requeue, { seq: r.seq, now, url, origin: originOf(url) })).changes) return undefined;
    if (await holdIfPaused(tx, [r.seq], now)) return true;
    noteDue(originOf(url), now);
    return false;
  }

  return {
    /** The ids a replay with this filter would take now (a dry run: nothing changes). */
    async replayable(f: ReplayFilter): Promise<string[]> {
      return (await database.all(q.replayable, replayParams(f))).map((r) => r.id);
    },

    /**
     * Deliveries of `status` (failed or delivered) created in the window go back to the queue with
     * a fresh schedule, in one transaction; `urlOf` may refresh the URL. Those of an uninstalled
     * installation are skipped; those of a paused one are held. Returns the ids, in event order.
     */
    replay: (
      f: ReplayFilter,
      now: number,
      urlOf: (d: { eventType: string; installationId: string; url: string }) => string,
    ): Promise<Array<{ id: string; held: boolean }>> =>
      database.transaction(async (tx) => {
        const out: Array<{ id: string; held: boolean }> = [];
        for (const r of await tx.all(q.replayable, replayParams(f))) {
          const held = await requeue(tx, r, now, urlOf);
          if (held !== undefined) out.push({ id: r.id, held });
        }
        return out;
      }),

    /** One finished delivery back to the queue with a fresh schedule, or why not. */
    replayOne: (
      id: string,
      now: number,
      urlOf: (d: { eventType: string; installationId: string; url: string }) => string,
    ): Promise<{ held: boolean } | ReplayRefusal> =>
      database.transaction(async (tx) => {
        const r = await tx.get(q.byId, [id]);
        if (!r) return 'not_found';
        if (r.status === 'cancelled') return 'cancelled';
        if (r.status !== 'failed' && r.status !== 'delivered') return 'queued';
        if (!(await tx.get(q.hasEndpoint, [r.installation_id]))) return 'uninstalled';
        const held = await requeue(tx, r, now, urlOf);
        return held === undefined ? 'busy' : { held };
      }),
  };
}
