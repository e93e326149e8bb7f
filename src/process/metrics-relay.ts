/**
 * The supervisor's metrics relay: the serving process answering GET /metrics asks (`collect`) for
 * every process's snapshot; the supervisor asks each listening process (`collect`), gathers their
 * `snapshot`s and answers the asker (`collected`). A process that does not answer within
 * COLLECT_TIMEOUT_MS is left out rather than holding the scrape.
 */
import { send, type ServingProcess } from './slots.ts';

const COLLECT_TIMEOUT_MS = 2_000;

export interface MetricsRelay {
  /** `from` asked (its request `replyId`) for the snapshots of `live`, the processes listening now. */
  collect(from: ServingProcess, replyId: number, live: ServingProcess[]): void;
  /** A process's answer to the relay's request `id`. */
  snapshot(id: number, snapshot: unknown): void;
}

export function createMetricsRelay(): MetricsRelay {
  type Collecting = { from: ServingProcess; replyId: number; want: number; snapshots: unknown[]; timer: NodeJS.Timeout };
  const collecting = new Map<number, Collecting>();
  let collectSeq = 0;

  function collected(key: number): void {
    const c = collecting.get(key);
    if (!c) return;
    collecting.delete(key);
    clearTimeout(c.timer);
    send(c.from, { t: 'collected', id: c.replyId, snapshots: c.snapshots });
  }

  return {
    collect(from, replyId, live) {
      const key = ++collectSeq;
      const c: Collecting = { from, replyId, want: live.length, snapshots: [], timer: setTimeout(() => collected(key), COLLECT_TIMEOUT_MS) };
      collecting.set(key, c);
      for (const w of live) send(w, { t: 'collect', id: key });
      if (!live.length) collected(key);
    },
    snapshot(id, snapshot) {
      const c = collecting.get(id);
      if (!c) return;
      c.snapshots.push(snapshot);
      if (c.snapshots.length >= c.want) collected(id);
    },
  };
}
