/**
 * Caches kept in memory over rows that several processes write (installations, webhook secrets):
 * a writer bumps the generation of what it changed, in the store; a reader asks `changed()` before
 * trusting its copy. The question costs one `PRAGMA data_version` (it moves only when another
 * connection committed, and reads no page) and, only then, one indexed read of the generation.
 * Within one process the writers drop their own copies as before; this is what tells the others.
 */
import type { Db } from './index.ts';
import { oncePerTurn } from '../lib/batch.ts';
import { bridgeOf, engineOf } from './postgres/db.ts';

export const generationsMigration = 'CREATE TABLE IF NOT EXISTS store_generations (name TEXT PRIMARY KEY, gen INTEGER NOT NULL)';

export interface Generations {
  /** What `name` covers was changed (call it in the writer's transaction, or right after its write). */
  bump(name: string): void;
  /** A check that answers true once each time another process bumped `name` since the last true. */
  watch(name: string): () => boolean;
}

const byDb = new WeakMap<Db, Generations>();

/** The generations of this store's connection (one set of statements per connection). */
export function generationsOf(db: Db): Generations {
  let g = byDb.get(db);
  if (!g) byDb.set(db, (g = create(db)));
  return g;
}

function create(db: Db): Generations {
  // A read-only connection (the CLI's --offline) has no table to read, and nothing of its own to drop.
  if (db.readonly) return { bump() {}, watch: () => () => false };
  if (engineOf(db) === 'postgres') return createNotified(db);
  db.exec(generationsMigration);
  const pragma = db.prepare('PRAGMA data_version').pluck();
  // Asked once per event-loop turn, however many caches check in it (several per public request):
  // another process's commit is seen from the next turn on, as it would be a moment later anyway.
  let known: number | undefined;
  const forget = oncePerTurn(() => (known = undefined));
  const version = () => {
    if (known === undefined) {
      known = pragma.get() as number;
      forget();
    }
    return known;
  };
  const read = db.prepare<[string], number>('SELECT gen FROM store_generations WHERE name = ?').pluck();
  const bump = db.prepare('INSERT INTO store_generations (name, gen) VALUES (?, 1) ON CONFLICT (name) DO UPDATE SET gen = gen + 1');
  return {
    bump(name) {
      bump.run(name);
    },
    watch(name) {
      let seenVersion = version();
      let seenGen = read.get(name) ?? 0;
      return () => {
        const v = version();
        if (v === seenVersion) return false;
        seenVersion = v;
        const g = read.get(name) ?? 0;
        if (g === seenGen) return false;
        seenGen = g;
        return true;
      };
    },
  };
}

/**
 * On PostgreSQL the other writers are other nodes as well as other processes, and a bump is a
 * NOTIFY (sent at the writer's COMMIT): a check costs nothing until one arrives. When the
 * listening connection was lost and came back, every cache is dropped once (what it missed is unknown).
 */
const CHANNEL = 'switchyard_generations';

function createNotified(db: Db): Generations {
  const bridge = bridgeOf(db)!;
  const notify = db.prepare('SELECT pg_notify(?, ?)');
  const watchers = new Map<string, Set<{ changed: boolean }>>();
  const mark = (name: string | undefined) => {
    for (const [n, set] of watchers) if (name === undefined || n === name) for (const w of set) w.changed = true;
  };
  bridge.listen(CHANNEL, (name) => mark(name));
  bridge.onReconnect(() => mark(undefined));
  return {
    bump(name) {
      notify.get(CHANNEL, name);
    },
    watch(name) {
      const w = { changed: false };
      let set = watchers.get(name);
      if (!set) watchers.set(name, (set = new Set()));
      set.add(w);
      return () => {
        if (!w.changed) return false;
        w.changed = false;
        return true;
      };
    },
  };
}
