/**
 * Caches kept in memory over rows that several processes write (installations, webhook secrets,
 * console revocations): a writer bumps the generation of what it changed, in its transaction; a
 * reader asks its watch before trusting its copy. On SQLite the question costs one
 * `PRAGMA data_version` per event-loop turn (it moves only when another connection committed, and
 * reads no page) and, only then, one indexed read of the generation. On PostgreSQL a bump is a
 * NOTIFY sent at the writer's COMMIT (the store's notifications, contract.ts), and a question costs
 * nothing until one arrives; when the listening connection was lost and came back, every cache is
 * dropped once (what it missed is unknown).
 * Within one process the writers drop their own copies as before; this is what tells the others.
 */
import { randomUUID } from 'node:crypto';
import { oncePerTurn } from '../lib/batch.ts';
import { statement, type Database, type Queries } from './contract.ts';

export const generationsMigration = 'CREATE TABLE IF NOT EXISTS store_generations (name TEXT PRIMARY KEY, gen INTEGER NOT NULL)';

/** A watch's check; `quiet()` says, without waiting, that a check this turn found nothing changed. */
export interface Watch {
  (): Promise<boolean>;
  quiet(): boolean;
}

export interface Generations {
  /** What `name` covers was changed: said in the writer's transaction (`tx`), so it counts once that commits. */
  bump(tx: Queries, name: string): Promise<void>;
  /**
   * A check that answers true once each time another process bumped `name` since the last true
   * (callers asking at the same moment share one answer).
   */
  watch(name: string): Watch;
  /**
   * Resolves once bumps by others are heard: a watch made before then counts its opening as a
   * change (what was bumped while the listening connection opened is unknown).
   */
  ready(): Promise<void>;
}

const CHANNEL = 'switchyard_generations';

const q = {
  dataVersion: statement<{ data_version: number }>('PRAGMA data_version'),
  read: statement<{ gen: number }>('SELECT gen FROM store_generations WHERE name = ?'),
  bump: statement('INSERT INTO store_generations (name, gen) VALUES (?, 1) ON CONFLICT (name) DO UPDATE SET gen = gen + 1'),
};

const byDatabase = new WeakMap<Database, Generations>();

/** The generations of a store (one set per store; a read-only store has nothing to tell or hear). */
export function generationsFor(store: { database: Database; readonly?: boolean }): Generations {
  let g = byDatabase.get(store.database);
  if (!g)
    byDatabase.set(
      store.database,
      (g = store.readonly
        ? { bump: async () => {}, watch: () => Object.assign(async () => false, { quiet: () => true }), ready: async () => {} }
        : create(store.database)),
    );
  return g;
}

function create(database: Database): Generations {
  if (database.notifications) return notified(database.notifications);
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
    ready: async () => {},
  };
}

const UNCHANGED = Promise.resolve(false);

/**
 * Callers asking while an answer is on the way get that answer; once one said "unchanged", the
 * rest of the turn is told so at once (data_version is read once a turn: no ask could say else).
 * Every public-endpoint request asks; an ask each made ~3 % of what a request allocates.
 */
function shared(ask: () => Promise<boolean>): Watch {
  let asking: Promise<boolean> | undefined;
  let unchanged = false;
  // This turn, as a token replaced when it ends: an answer that comes in a later turn than its ask
  // read data_version in says nothing of the turn it comes in.
  let turn = {};
  const endTurn = oncePerTurn(() => {
    turn = {};
    unchanged = false;
  });
  const check = () => {
    if (unchanged) return UNCHANGED;
    if (asking) return asking;
    const asked = turn;
    endTurn();
    const p = ask()
      .then((changed) => {
        if (!changed && turn === asked) unchanged = true;
        return changed;
      })
      .finally(() => {
        if (asking === p) asking = undefined;
      });
    asking = p;
    return p;
  };
  return Object.assign(check, { quiet: () => unchanged });
}

/**
 * Between nodes: a bump is a notification `<name> <origin>` (which store sent it: a store's own
 * bumps are not news to it); a watch is a flag its notifications set.
 */
function notified(notifications: NonNullable<Database['notifications']>): Generations {
  const origin = randomUUID();
  const watchers = new Map<string, Set<{ changed: boolean }>>();
  const mark = (name: string | undefined) => {
    for (const [n, set] of watchers) if (name === undefined || n === name) for (const w of set) w.changed = true;
  };
  let listening: (() => void) | undefined;
  const listen = () =>
    (listening ??= notifications.listen(CHANNEL, (payload) => {
      if (payload === undefined) return mark(undefined);
      const [name, from] = payload.split(' ');
      if (from !== origin) mark(name);
    }));
  return {
    bump: (tx, name) => notifications.notify(tx, CHANNEL, `${name} ${origin}`),
    watch(name) {
      listen();
      const w = { changed: false };
      let set = watchers.get(name);
      if (!set) watchers.set(name, (set = new Set()));
      set.add(w);
      return shared(async () => {
        if (!w.changed) return false;
        w.changed = false;
        return true;
      });
    },
    ready() {
      listen();
      return notifications.ready(CHANNEL);
    },
  };
}
