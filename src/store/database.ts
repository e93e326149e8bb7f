/**
 * The store's contract (contract.ts) on SQLite: better-sqlite3, whose statements answer
 * synchronously (PostgreSQL's side is postgres/pool.ts).
 *
 * One connection serves the whole process, so a transaction has it to itself: statements from
 * elsewhere wait until it ends. Its statements answer at once (a microtask each), so a transaction
 * that awaits only the store never gives the event loop to anything else while it is open.
 *
 * SQLite's write lock: BEGIN IMMEDIATE is tried without SQLite's busy handler (which sleeps the
 * whole thread, 1 ms and more per refusal); while another process holds the lock the transaction
 * waits on timers instead, so the event loop keeps serving, up to the connection's busy timeout.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import type Database from 'better-sqlite3';
import { SwitchyardError } from '../errors.ts';
import { isBusy, LOCK_BUSY } from './patience.ts';
import { afterCommit, onRollback, openFrame } from './transactions.ts';
import type { Database as StoreDatabase, Params, Queries, RunResult, Statement, Tx } from './contract.ts';

type Db = Database.Database;
type Prepared = Database.Statement;

/** How long a transaction waits for SQLite's write lock before it fails busy (the connection's busy_timeout). */
const DEFAULT_LOCK_WAIT_MS = 5_000;
/** Refusals in a row, during which transactionUnlessBusy answers LOCK_BUSY, before it waits like transaction. */
const SPIN_MS = 5;

export interface SqliteDatabase extends StoreDatabase {
  /** The connection itself, its usual busy timeout back (for what SQLite alone does: a backup, a copy's reads). */
  connection(): Db;
}

export function createDatabase(db: Db, opts: { lockWaitMs?: number } = {}): SqliteDatabase {
  const prepared = new WeakMap<Statement, Prepared>();
  const lockWaitMs = opts.lockWaitMs ?? DEFAULT_LOCK_WAIT_MS;
  /** While a transaction has the connection: a promise that settles when it ends. */
  let holder: { ended: Promise<void> } | undefined;
  const inside = new AsyncLocalStorage<Tx>();
  /**
   * Transactions that have ended. Work scheduled inside one (a timer, setImmediate, a hook's
   * oncePerTurn) carries it in its async context: once it has ended, that work is not inside it.
   */
  const finished = new WeakSet<Tx>();
  const insideOpen = (): boolean => {
    const tx = inside.getStore();
    return tx !== undefined && !finished.has(tx);
  };
  let refusedSince: number | undefined;

  const prepare = (s: Statement): Prepared => {
    let p = prepared.get(s);
    if (!p) {
      p = db.prepare(typeof s.sql === 'string' ? s.sql : s.sql.sqlite);
      prepared.set(s, p);
    }
    return p;
  };
  const args = (params: Params | undefined): unknown[] => (params === undefined ? [] : Array.isArray(params) ? params : [params]);

  // The statements themselves, synchronous; `direct` runs them on the connection as it is.
  const direct = {
    all: <R>(s: Statement<R>, params?: Params) => prepare(s).all(...args(params)) as R[],
    get: <R>(s: Statement<R>, params?: Params) => prepare(s).get(...args(params)) as R | undefined,
    value: <V>(s: Statement, params?: Params) => {
      const row = prepare(s).get(...args(params)) as Record<string, unknown> | undefined;
      return (row === undefined ? undefined : Object.values(row)[0]) as V | undefined;
    },
    run: (s: Statement, params?: Params): RunResult => {
      const r = prepare(s).run(...args(params));
      return { changes: r.changes, lastId: Number(r.lastInsertRowid) };
    },
  };

  /** Outside a transaction: now, or once the transaction that has the connection ends. */
  function outside<T>(work: () => T): Promise<T> {
    if (!holder) return unlessBusy(work);
    if (insideOpen())
      return Promise.reject(new Error('a statement on the database inside one of its transactions: use the transaction (tx) given to the callback'));
    return (async () => {
      while (holder) await holder.ended;
      return unlessBusy(work);
    })();
  }

  /**
   * The store's own statements never let SQLite's busy handler sleep the thread: the connection's
   * busy timeout is 0 while they use it (switching it costs a statement compiled each time, ~9 us,
   * more than a commit, so it is not switched per transaction). A statement refused by
   * another process's write lock is tried again on timers, as a transaction's BEGIN is, up to
   * the lock wait. Who takes the connection itself (a backup, a copy) gets the usual timeout back.
   */
  let usualBusyTimeout: number | undefined;
  let busyWaitOff = false;
  function noBusyWait(): void {
    if (busyWaitOff) return;
    usualBusyTimeout ??= Number(db.pragma('busy_timeout', { simple: true }));
    db.pragma('busy_timeout = 0');
    busyWaitOff = true;
  }
  function usualBusyWait(): Db {
    if (busyWaitOff) {
      db.pragma(`busy_timeout = ${usualBusyTimeout}`);
      busyWaitOff = false;
    }
    return db;
  }
  noBusyWait();

  function unlessBusy<T>(work: () => T): Promise<T> {
    try {
      return Promise.resolve(work());
    } catch (e) {
      return isBusy(e) ? whenFree(work) : Promise.reject(e);
    }
  }
  async function whenFree<T>(work: () => T): Promise<T> {
    const started = performance.now();
    for (let wait = 0; ; ) {
      wait = await lockWait(started, wait);
      while (holder) await holder.ended;
      try {
        return work();
      } catch (e) {
        if (!isBusy(e)) throw e;
      }
    }
  }

  /**
   * One wait for another process's write lock, on timers (the next turn, then 1, 2, 4 ... 20 ms);
   * past the lock wait since `started`, storage_busy. Returns the next wait.
   */
  async function lockWait(started: number, wait: number): Promise<number> {
    if (performance.now() - started > lockWaitMs)
      throw new SwitchyardError('storage_busy', `the store's write lock stayed taken for ${lockWaitMs} ms`, {
        hint: 'another process holds a long write transaction on the database',
      });
    await new Promise((r) => (wait ? setTimeout(r, wait) : setImmediate(r)));
    return Math.min(Math.max(wait * 2, 1), 20);
  }

  const queries = (run: <T>(work: () => T) => Promise<T>): Queries => ({
    engine: 'sqlite',
    all: (s, p) => run(() => direct.all(s, p)),
    get: (s, p) => run(() => direct.get(s, p)),
    value: (s, p) => run(() => direct.value(s, p)),
    run: (s, p) => run(() => direct.run(s, p)),
  });

  /**
   * Some errors make SQLite roll the whole transaction back by itself (a trigger's RAISE(ROLLBACK),
   * and it may on a full disk or an I/O error) while the callback goes on: a savepoint begun then, or
   * a statement, would run in a transaction of its own and commit at once, and the commit that
   * follows would fail after it. Past that point the transaction's statements and savepoints fail
   * with this error, and so does its commit: nothing of it was stored.
   */
  const stillOpen = (): void => {
    if (!db.inTransaction)
      throw new SwitchyardError(
        'storage_failed',
        'the transaction is no longer open: SQLite rolled it back after an error of one of its statements, nothing of it was stored',
        {
          hint: 'the error of that statement was reported to whoever ran it; the work can be tried again',
          headers: { 'retry-after': '5' },
        },
      );
  };
  /** A transaction's statement: a promise of its value or of its error, refused once SQLite rolled the transaction back. */
  function settleOpen<T>(work: () => T): Promise<T> {
    try {
      stillOpen();
      return Promise.resolve(work());
    } catch (e) {
      return Promise.reject(e);
    }
  }
  const begin = (depth: number): void => {
    if (depth > 0) stillOpen();
    db.exec(depth === 0 ? 'BEGIN IMMEDIATE' : `SAVEPOINT s${depth}`);
  };
  const end = (depth: number, commit: boolean): void => {
    if (commit) stillOpen();
    if (depth === 0) db.exec(commit ? 'COMMIT' : 'ROLLBACK');
    else if (commit) db.exec(`RELEASE SAVEPOINT s${depth}`);
    else db.exec(`ROLLBACK TO SAVEPOINT s${depth}; RELEASE SAVEPOINT s${depth}`);
  };

  /** Runs `fn` in a transaction (depth 0) or a savepoint, with its hooks' frame. */
  async function within<T>(depth: number, fn: (tx: Tx) => Promise<T>): Promise<T> {
    if (depth > 0) begin(depth);
    const close = openFrame(db);
    const tx: Tx = {
      ...queries(settleOpen),
      afterCommit: (f) => afterCommit(db, f),
      onRollback: (f) => onRollback(db, f),
      transaction: (inner) => within(depth + 1, inner),
    };
    let value: T;
    try {
      value = await inside.run(tx, () => fn(tx)).finally(() => finished.add(tx));
      end(depth, true);
    } catch (e) {
      // `fn` threw, or the commit (a savepoint's release) failed: undo what is still open.
      try {
        if (db.inTransaction) end(depth, false);
      } catch {
        /* the connection is gone: the server rolled back */
      }
      close(false);
      throw e;
    }
    close(true);
    return value;
  }

  /** Take the connection and the write lock (waiting as the header says), then run `fn`. */
  async function transaction<T>(fn: (tx: Tx) => Promise<T>, unlessBusy: boolean): Promise<T | typeof LOCK_BUSY> {
    if (insideOpen()) throw new Error('a transaction on the database inside one of its transactions: use tx.transaction for a savepoint');
    while (holder) await holder.ended;
    let release!: () => void;
    const ended = new Promise<void>((r) => (release = r));
    holder = { ended };
    try {
      const started = performance.now();
      for (let wait = 0; ; ) {
        if (tryBegin()) break;
        if (unlessBusy) {
          // From the first refusal itself, not the call's start: a process held up before its try
          // (a loaded machine: GC, preemption) still answers its first refusal LOCK_BUSY.
          const at = performance.now();
          refusedSince ??= at;
          if (at - refusedSince <= SPIN_MS) return LOCK_BUSY;
        }
        try {
          wait = await lockWait(started, wait);
        } catch (e) {
          refusedSince = undefined; // waited its full time: the next call spins afresh
          throw e;
        }
      }
      refusedSince = undefined;
      return await within(0, fn);
    } finally {
      holder = undefined;
      release();
    }
  }

  /**
   * BEGIN IMMEDIATE without SQLite's sleeping busy handler: false when another process has the lock.
   * With several serving processes most tries under load are refused (measured in a delivery burst:
   * 24,000 of 41,000), so a refusal is kept cheap: no busy timeout to switch, and its error built
   * without a stack trace (nobody reads it).
   */
  function tryBegin(): boolean {
    noBusyWait();
    const stackTraceLimit = Error.stackTraceLimit;
    Error.stackTraceLimit = 0;
    try {
      begin(0);
      return true;
    } catch (e) {
      if (isBusy(e)) return false;
      throw e;
    } finally {
      Error.stackTraceLimit = stackTraceLimit;
    }
  }

  /**
   * The transactions asked for with transactionUnlessBusy in one turn of the event loop (ingest's
   * group commit, the sender's record turn, invocation records) share one transaction, each in a
   * savepoint of its own (alone, none): one write lock taken and one commit where each took its
   * own. With several serving processes on one file, every lock taken is one more try another
   * process may find refused, and a commit costs more than a savepoint (measured at the default
   * settings: ~70 us a commit, ~8 us a refused try, two to three transactions a delivery).
   */
  type Joiner = { fn: (tx: Tx) => Promise<unknown>; resolve: (v: unknown) => void; reject: (e: unknown) => void };
  let joiners: Joiner[] = [];
  function joinTurn<T>(fn: (tx: Tx) => Promise<T>): Promise<T | typeof LOCK_BUSY> {
    if (insideOpen()) return Promise.reject(new Error('a transaction on the database inside one of its transactions: use tx.transaction for a savepoint'));
    return new Promise((resolve, reject) => join([{ fn, resolve: resolve as (v: unknown) => void, reject }], 'last'));
  }
  /** Joins the next turn; a turn's joiners put back (see runTurn) come first, as they asked first. */
  function join(these: Joiner[], where: 'first' | 'last'): void {
    if (these.length === 0) return;
    if (joiners.length === 0) setImmediate(runTurn);
    joiners = where === 'first' ? [...these, ...joiners] : [...joiners, ...these];
  }
  async function runTurn(): Promise<void> {
    const turn = joiners;
    joiners = [];
    const outcomes: Array<{ value: unknown } | { error: unknown }> = [];
    /** Those not run yet when one before them made SQLite roll the whole transaction back. */
    let notRun: Joiner[] = [];
    let r: unknown;
    try {
      r = await transaction(async (tx) => {
        // Alone, it is the transaction (its failure rolls it back); together, each its savepoint.
        if (turn.length === 1) outcomes.push({ value: await turn[0].fn(tx) });
        else
          for (const [i, j] of turn.entries()) {
            if (!db.inTransaction) {
              notRun = turn.slice(i);
              break;
            }
            try {
              outcomes.push({ value: await tx.transaction(j.fn) });
            } catch (error) {
              outcomes.push({ error });
            }
          }
      }, true);
    } catch (error) {
      // The commit failed (or the lone one threw): nothing was stored. Who did not run joins the next turn.
      for (const j of turn) if (!notRun.includes(j)) j.reject(error);
      join(notRun, 'first');
      return;
    }
    turn.forEach((j, i) => {
      const o = outcomes[i];
      if (r === LOCK_BUSY) j.resolve(LOCK_BUSY);
      else if ('error' in o) j.reject(o.error);
      else j.resolve(o.value);
    });
  }

  return {
    ...queries(outside),
    connection: usualBusyWait,
    transaction: <T>(fn: (tx: Tx) => Promise<T>) => transaction(fn, false) as Promise<T>,
    transactionUnlessBusy: joinTurn,
  };
}
