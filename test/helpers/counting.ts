/**
 * A store's Database that counts the commits and statements going through it (the statements'
 * SQL kept too, for a failing assertion to show), for tests that hold a path to a budget.
 */
import type { Database, Engine, Params, Statement, Tx } from '../../src/store/contract.ts';

/** A statement's SQL on `engine` as the counter keeps it: one line, its first 80 characters. */
export function shownSql(s: Statement, engine: Engine): string {
  return (typeof s.sql === 'string' ? s.sql : (s.sql[engine] ?? s.sql.sqlite)).replace(/\s+/g, ' ').slice(0, 80);
}

export function counting(db: Database) {
  const n = { commits: 0, statements: 0, sql: [] as string[] };
  const count = <T>(s: Statement, p: Promise<T>) => {
    n.statements++;
    n.sql.push(shownSql(s, db.engine));
    return p;
  };
  const queries = (q: Pick<Database, 'all' | 'get' | 'value' | 'run'>) => ({
    all: <R>(s: Statement<R>, p?: Params) => count(s, q.all(s, p)),
    get: <R>(s: Statement<R>, p?: Params) => count(s, q.get(s, p)),
    value: <V>(s: Statement, p?: Params) => count(s, q.value<V>(s, p)),
    run: (s: Statement, p?: Params) => count(s, q.run(s, p)),
  });
  const inTx = (tx: Tx): Tx => ({
    ...queries(tx),
    engine: tx.engine,
    afterCommit: (f) => tx.afterCommit(f),
    onRollback: (f) => tx.onRollback(f),
    transaction: (f) => tx.transaction((inner) => f(inTx(inner))),
  });
  const database: Database = {
    ...queries(db),
    engine: db.engine,
    notifications: db.notifications,
    transaction: (fn) => (n.commits++, db.transaction((tx) => fn(inTx(tx)))),
    transactionUnlessBusy: (fn) => (n.commits++, db.transactionUnlessBusy((tx) => fn(inTx(tx)))),
  };
  return { n, database, reset: () => Object.assign(n, { commits: 0, statements: 0, sql: [] }) };
}
