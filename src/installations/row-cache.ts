/**
 * Installation rows read outside any transaction, by id: every request to a public endpoint looks
 * its installation up. A step drops its row when it writes it and again once it commits; a read
 * inside a transaction is not kept (it may still roll back), nor one that began before a write here
 * or a change seen from elsewhere (the epoch moved: it may hold the row as it was).
 */
import type { Database } from '../store/contract.ts';
import { q, type Row } from './rows.ts';
import { BoundedMap } from '../lib/bounded-map.ts';

/** How many rows the cache keeps at least (the oldest go first, by generations: lib/bounded-map.ts). */
const CACHED_ROWS = 10_000;

export interface RowCache {
  /** The row from memory, else read from the store (and kept unless a write was seen meanwhile). */
  read(id: string): Promise<Row | undefined>;
  /** The row if it is in memory. */
  peek(id: string): Row | undefined;
  /** `id` is written: its copy goes, and a read begun before is not kept. */
  forget(id: string): void;
  /** Another process changed some: every copy goes. */
  clear(): void;
}

export function createRowCache(database: Database): RowCache {
  const rows = new BoundedMap<string, Row>(CACHED_ROWS);
  let epoch = 0;
  return {
    async read(id) {
      const hit = rows.get(id);
      if (hit) return hit;
      const at = epoch;
      const r = await database.get(q.byId, [id]);
      if (r && at === epoch) rows.set(id, r);
      return r;
    },
    peek: (id) => rows.get(id),
    forget(id) {
      rows.delete(id);
      epoch++;
    },
    clear() {
      rows.clear();
      epoch++;
    },
  };
}
