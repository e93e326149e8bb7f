/**
 * Caches kept in memory over rows that several processes write (installations, webhook secrets,
 * console revocations): a writer bumps the generation of what it changed, in its transaction; a
 * reader asks its watch before trusting its copy. On SQLite the question costs one
 * `PRAGMA data_version` per event-loop turn (it moves only when another connection committed, and
 * reads no page) and, only then, one indexed read of the generation. On PostgreSQL a bump is a
 * NOTIFY sent at the writer's COMMIT, and a question costs nothing until one arrives.
 * Within one process the writers drop their own copies as before; this is what tells the others.
 *
 * `generationsFor(store)` answers through the store's contract (asynchronously);
 * `generationsOf(db)` over the synchronous connection, for the modules not on it yet.
 */
import type { Db } from './index.ts';
import { randomUUID } from 'node:crypto';
import { oncePerTurn } from '../lib/batch.ts';
import { bridgeOf, engineOf } from './postgres/db.ts';
import { statement, type Database, type Queries } from './contract.ts';

export const generationsMigration = 'CREATE TABLE IF NOT EXISTS store_generations (name TEXT PRIMARY KEY, gen INTEGER NOT NULL)';

/** The generations through the store's contract (contract.ts): see generationsFor. */
export interface Generations {
  /** What `name` covers was changed: said in the writer's transaction (`tx`), so it counts once that commits. */
  bump(tx: Queries, name: string): Promise<void>;
  /**
   * A check that answers true once each time another process bumped `name` since the last true
   * (callers asking at the same moment share one answer).
   */
  watch(name: string): () => Promise<boolean>;
}

/** The same over the synchronous connection, for the modules not on the contract yet. */
export interface SyncGenerations {
  bump(name: string): void;
  watch(name: string): () => boolean;
}

const byDb = new WeakMap<Db, SyncGenerations>();

/** The generations of this store's connection, synchronously (one set of statements per connection). */
export function generationsOf(db: Db): SyncGenerations {
  let g = byDb.get(db);
  if (!g) byDb.set(db, (g = create(db)));
  return g;
}

const q = {
  dataVersion: statement<{ data_version: number }>('PRAGMA data_version'),
  read: statement<{ gen: number }>('SELECT gen FROM store_generations WHERE name = ?'),
  // On PostgreSQL a NOTIFY, sent when the writer's transaction commits (see createNotified).
  bump: statement({
    sqlite: 'INSERT INTO store_generations (name, gen) VALUES (?, 1) ON CONFLICT (name) DO UPDATE SET gen = gen + 1',
    postgres: `SELECT pg_notify('switchyard_generations', CAST(? AS text) || ' ' || CAST(? AS text))`,
  }),
};

const byDatabase = new WeakMap<Database, Generations>();

/**
 * The generations of a store, through its contract. `db` is the store's synchronous connection,
 * used here only to listen for PostgreSQL's notifications (and to make SQLite's table at once),
 * until the pool listens itself.
 */
export function generationsFor(store: { db: Db; database: Database }): Generations {
  let g = byDatabase.get(store.database);
  if (!g) byDatabase.set(store.database, (g = createAsync(store.db, store.database)));
  return g;
}

function createAsync(db: Db, database: Database): Generations {
  const core = generationsOf(db);
  if (db.readonly) return { bump: async () => {}, watch: () => async () => false };
  if (database.engine === 'postgres')
    return {
      bump: async (tx, name) => void (await tx.get(q.bump, [name, origins.get(db)])),
      watch(name) {
        const changed = core.watch(name);
        return shared(async () => changed());
      },
    };
  // SQLite: `PRAGMA data_version` once per event-loop turn, however many caches ask in it.
  let known: Promise<number> | undefined;
  const forget = oncePerTurn(() => (known = undefined));
  const version = () => {
    if (!known) {
      known = database.value<number>(q.dataVersion).then((v) => v ?? 0);
      forget();
    }
    return known;
  };
  const gen = async (name: string) => (await database.value<number>(q.read, [name])) ?? 0;
  return {
    bump: async (tx, name) => void (await tx.run(q.bump, [name])),
    watch(name) {
      let seen: { version: number; gen: number } | undefined;
      // Read now: what changes from here on is what the first check reports. data_version first, so
      // a bump between the two reads moves it past what is seen.
      const start = (async () => {
        const v = await version();
        seen = { version: v, gen: await gen(name) };
      })().catch(() => {});
      return shared(async (): Promise<boolean> => {
        await start;
        const v = await version();
        if (seen && v === seen.version) return false;
        const g = await gen(name);
        // (No first reading, when it failed: nothing is known, so the caller looks again.)
        const moved = !seen || g !== seen.gen;
        seen = { version: v, gen: g };
        return moved;
      });
    },
  };
}

/** Callers asking while an answer is on the way get that answer. */
function shared(ask: () => Promise<boolean>): () => Promise<boolean> {
  let asking: Promise<boolean> | undefined;
  return () => (asking ??= ask().finally(() => (asking = undefined)));
}

function create(db: Db): SyncGenerations {
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

/** Which store sent a notification (`<name> <origin>`): a store's own bumps are not news to it. */
const origins = new WeakMap<Db, string>();

function createNotified(db: Db): SyncGenerations {
  const bridge = bridgeOf(db)!;
  const notify = db.prepare('SELECT pg_notify(?, ?)');
  const origin = randomUUID();
  origins.set(db, origin);
  const watchers = new Map<string, Set<{ changed: boolean }>>();
  const mark = (name: string | undefined) => {
    for (const [n, set] of watchers) if (name === undefined || n === name) for (const w of set) w.changed = true;
  };
  bridge.listen(CHANNEL, (payload) => {
    const [name, from] = payload.split(' ');
    if (from !== origin) mark(name);
  });
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
