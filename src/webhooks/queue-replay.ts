/**
 * Replays: finished deliveries (failed or delivered) back to the queue with a fresh schedule, by
 * filter or one by one, held when their installation is paused, never under an attempt in flight.
 */
import type { Db } from '../store/index.ts';
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

export interface ReplayDeps {
  holdIfPaused: (seq: number, now: number) => boolean;
  noteDue: (origin: string, at: number) => void;
}

export function createReplays(db: Db, { holdIfPaused, noteDue }: ReplayDeps) {
  const q = {
    byId: db.prepare<[string], Row>(`SELECT ${COLUMNS} FROM webhook_deliveries d WHERE d.id = ?`),
    replayable: db.prepare<
      { status: string; since: number; until: number; installation: string | null; type: string | null; origin: string | null },
      { seq: number; id: string; event_type: string; installation_id: string; url: string }
    >(
      `SELECT seq, id, event_type, installation_id, url FROM webhook_deliveries INDEXED BY webhook_deliveries_by_status
       WHERE status = @status AND created_at >= @since AND created_at <= @until
         AND (CAST(@installation AS TEXT) IS NULL OR installation_id = @installation)
         AND (CAST(@type AS TEXT) IS NULL OR event_type = @type) AND (CAST(@origin AS TEXT) IS NULL OR origin = @origin)
         AND installation_id IN (SELECT installation_id FROM webhook_endpoints)
       ORDER BY seq`,
    ),
    hasEndpoint: db.prepare<[string], { n: number }>('SELECT 1 AS n FROM webhook_endpoints WHERE installation_id = ?'),
    // Back to the queue with a fresh schedule (`attempts` counts the schedule's automatic attempts;
    // the attempts made before stay, numbered on). Not under an attempt in flight: its outcome would
    // overwrite this.
    requeue: db.prepare(
      `UPDATE webhook_deliveries SET status = 'pending', attempts = 0, next_attempt_at = @now, completed_at = NULL, updated_at = @now,
         url = @url, origin = @origin
       WHERE seq = @seq AND status IN ('failed', 'delivered') AND (lease_until IS NULL OR lease_until <= @now)`,
    ),
  };

  /** A finished delivery back to the queue (held if its installation is paused); undefined when it is under an attempt. */
  function requeue(
    r: { seq: number; event_type: string; installation_id: string; url: string },
    now: number,
    urlOf: (d: { eventType: string; installationId: string; url: string }) => string,
  ): boolean | undefined {
    const url = urlOf({ eventType: r.event_type, installationId: r.installation_id, url: r.url });
    if (!q.requeue.run({ seq: r.seq, now, url, origin: originOf(url) }).changes) return undefined;
    if (holdIfPaused(r.seq, now)) return true;
    noteDue(originOf(url), now);
    return false;
  }

  return {
    /** The ids a replay with this filter would take now (a dry run: nothing changes). */
    replayable(f: ReplayFilter): string[] {
      return q.replayable.all(replayParams(f)).map((r) => r.id);
    },

    /**
     * Deliveries of `status` (failed or delivered) created in the window go back to the queue with
     * a fresh schedule, in one transaction; `urlOf` may refresh the URL. Those of an uninstalled
     * installation are skipped; those of a paused one are held. Returns the ids, in event order.
     */
    replay: db.transaction(
      (f: ReplayFilter, now: number, urlOf: (d: { eventType: string; installationId: string; url: string }) => string): Array<{ id: string; held: boolean }> => {
        const out: Array<{ id: string; held: boolean }> = [];
        for (const r of q.replayable.all(replayParams(f))) {
          const held = requeue(r, now, urlOf);
          if (held !== undefined) out.push({ id: r.id, held });
        }
        return out;
      },
    ),

    /** One finished delivery back to the queue with a fresh schedule, or why not. */
    replayOne: db.transaction(
      (id: string, now: number, urlOf: (d: { eventType: string; installationId: string; url: string }) => string): { held: boolean } | ReplayRefusal => {
        const r = q.byId.get(id);
        if (!r) return 'not_found';
        if (r.status === 'cancelled') return 'cancelled';
        if (r.status !== 'failed' && r.status !== 'delivered') return 'queued';
        if (!q.hasEndpoint.get(r.installation_id)) return 'uninstalled';
        const held = requeue(r, now, urlOf);
        return held === undefined ? 'busy' : { held };
      },
    ),
  };
}
