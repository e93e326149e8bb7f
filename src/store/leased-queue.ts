/**
 * A leased queue, written once for every queue table the store has (webhook deliveries, handler
 * runs): rows become due at a time, a consumer (the delivery sender, the handler runner) takes due
 * rows by setting their lease (owner and expiry) in one statement, gives back what it never used,
 * and after a crash the leases of a process that is gone are released; a lease that runs out makes
 * its row due again by itself.
 * Recording an outcome stays the module's own statement (its columns differ), but it must release
 * the lease the same way: `lease_until = NULL, lease_owner = NULL ... WHERE <seq> = ? AND
 * lease_owner = ?` (a consumer whose lease ran out and was taken since records nothing over it).
 *
 * What a queue table must have (names given to leasedQueue):
 *   - `seq`: an integer row number (the order of ties, what claims and give-backs name);
 *   - `nextAt`: when the row is next due (ms), NULL when it is not queued (finished, held); with an
 *     index on it WHERE it IS NOT NULL (and one per `group` column leading it, when claims take a
 *     group: see claimDue), so finding due work never reads the history;
 *   - `leaseOwner` (text) and `leaseUntil` (ms): both NULL when nobody holds the row; a row with a
 *     lease that has not run out is nobody else's; the owner names its process (lease-owner.ts:
 *     `<node>.<pid>.<random>`), so a prefix names a dead process's leases;
 *   - optionally `updatedAt` (ms), set by a give-back and a release;
 *   - optionally `id` (a public id) and `byIdWhen` (a condition a row taken by id must meet).
 * Due means `nextAt <= now` and no live lease. Claiming by id takes the row whatever its schedule.
 *
 * Per engine: on PostgreSQL several nodes claim from one table, and the rows are locked
 * FOR UPDATE SKIP LOCKED: a row another node is claiming this instant is left to it, never waited
 * for (its lease condition is evaluated again on the row's latest version, so a row just leased
 * elsewhere is never taken twice). On SQLite the write lock already serialises claims. The
 * statements are built once per table (call leasedQueue at module load) as `statement({ sqlite,
 * postgres })`; lists of row numbers travel as one JSON array parameter.
 */
import { statement, type Queries } from './contract.ts';
import { storableText } from './text.ts';

/**
 * Rows as one JSON array parameter (a turn's writes in one statement). Each string is stored as a
 * text parameter would be (store/text.ts): PostgreSQL's json refuses the `\u0000` and lone
 * surrogate escapes JSON.stringify writes for a NUL and a lone surrogate, and SQLite's json
 * functions would turn a lone surrogate into bytes that are not UTF-8.
 */
export function jsonRows(rows: readonly unknown[]): string {
  // Written without a replacer first (one per value costs more than the rest: measured 2 % of a
  // serving process's CPU at full speed); JSON.stringify writes a NUL as `\u0000` and a lone
  // surrogate as `\udXXX`, so where neither escape appears every string was storable as it was.
  const json = JSON.stringify(rows);
  return UNSTORABLE_ESCAPE.test(json) ? JSON.stringify(rows, (_key, value) => (typeof value === 'string' ? storableText(value) : value)) : json;
}
const UNSTORABLE_ESCAPE = /\\u0000|\\ud[89a-f]/;

export interface QueueTable {
  table: string;
  seq: string;
  nextAt: string;
  leaseOwner: string;
  leaseUntil: string;
  updatedAt?: string;
  /** The public id column, for claimById. */
  id?: string;
  /** What a row claimed by id must also satisfy (e.g. `status != 'cancelled'`). */
  byIdWhen?: string;
  /** A column due rows may be taken per value of (claimDue's `group`), e.g. the endpoint's origin. */
  group?: string;
  /** SQLite's index for due rows (of a group when `group` is set): named, so a backlog is never scanned. */
  dueIndex?: string;
  /** The columns a claim returns (the row the consumer needs). */
  returning: string;
}

export interface LeasedQueue<R> {
  readonly table: QueueTable;
  /**
   * Take up to `limit` due rows (of one `group` value when given), earliest first, ties in row
   * order, leasing them to `owner` until `until`: one statement. Rows come back in that order.
   */
  claimDue(q: Queries, o: { now: number; limit: number; owner: string; until: number; group?: string }): Promise<R[]>;
  /** Take these rows if they are still due and unleased (in the order given): one statement. */
  claim(q: Queries, seqs: readonly number[], o: { now: number; owner: string; until: number }): Promise<R[]>;
  /** Take one row by its public id, whatever its schedule, unless another holds a live lease. */
  claimById(q: Queries, id: string, o: { now: number; owner: string; until: number }): Promise<R | undefined>;
  /**
   * Give back leases never used: due again at once for anyone. Only `owner`'s: a lease that ran out
   * and was taken since stays. Returns the rows given back, with their `group` value as stored now
   * (a row may have moved to another group while it was leased).
   */
  giveBack(q: Queries, seqs: readonly number[], owner: string, now: number): Promise<Array<{ seq: number; group?: string }>>;
  /**
   * Release every lease whose owner starts with `ownerPrefix` ('' for all: at start, before any
   * consumer of the store runs), returning the rows released; with `dueNow`, those still queued are
   * due at once (instead of at their schedule).
   */
  releaseOwnedBy(q: Queries, ownerPrefix: string, now: number, opts?: { dueNow?: boolean }): Promise<R[]>;
  /** The next time something becomes due after `now`: a scheduled row, or a lease running out. */
  nextWake(q: Queries, now: number): Promise<number | undefined>;
}

const seqsOf = {
  sqlite: (p: string) => `SELECT value FROM json_each(${p})`,
  postgres: (p: string) => `SELECT value::bigint FROM json_array_elements_text(CAST(${p} AS json))`,
};

/** The statements of one queue table, built once. */
export function leasedQueue<R extends Record<string, unknown>>(t: QueueTable): LeasedQueue<R> {
  const { table, seq, nextAt, leaseOwner, leaseUntil } = t;
  const unleased = `(${leaseUntil} IS NULL OR ${leaseUntil} <= @now)`;
  const due = `${nextAt} IS NOT NULL AND ${nextAt} <= @now AND ${unleased}`;
  const lease = `${leaseUntil} = @until, ${leaseOwner} = @owner`;
  const touch = t.updatedAt ? `, ${t.updatedAt} = @now` : '';
  const perEngine = <T = R>(build: (engine: 'sqlite' | 'postgres') => string) => statement<T>({ sqlite: build('sqlite'), postgres: build('postgres') });
  const skipLocked = (engine: 'sqlite' | 'postgres') => (engine === 'postgres' ? ' FOR UPDATE SKIP LOCKED' : '');
  const indexed = t.dueIndex ? ` INDEXED BY ${t.dueIndex}` : '';

  const dueStatement = (grouped: boolean) =>
    perEngine(
      (e) => `UPDATE ${table} SET ${lease}
       WHERE ${seq} IN (SELECT ${seq} FROM ${table}${grouped ? indexed : ''}
         WHERE ${grouped ? `${t.group} = @group AND ` : ''}${due}
         ORDER BY ${nextAt}, ${seq} LIMIT @limit${skipLocked(e)})
       RETURNING ${t.returning}, ${nextAt} AS "__next", ${seq} AS "__seq"`,
    );
  const s = {
    claimDue: dueStatement(false),
    claimDueIn: t.group ? dueStatement(true) : undefined,
    claim: perEngine(
      (e) => `UPDATE ${table} SET ${lease}
       WHERE ${seq} IN (SELECT ${seq} FROM ${table} WHERE ${seq} IN (${seqsOf[e]('@seqs')}) AND ${due}${skipLocked(e)})
       RETURNING ${t.returning}, ${seq} AS "__seq"`,
    ),
    claimById: t.id
      ? statement<R>(
          `UPDATE ${table} SET ${lease}
           WHERE ${t.id} = @id${t.byIdWhen ? ` AND (${t.byIdWhen})` : ''} AND ${unleased}
           RETURNING ${t.returning}`,
        )
      : undefined,
    giveBack: perEngine<{ seq: number; group?: string }>(
      (e) => `UPDATE ${table} SET ${leaseUntil} = NULL, ${leaseOwner} = NULL${touch}
       WHERE ${seq} IN (${seqsOf[e]('@seqs')}) AND ${leaseOwner} = @owner
       RETURNING ${seq} AS seq${t.group ? `, ${t.group} AS "group"` : ''}`,
    ),
    release: statement<R>(
      `UPDATE ${table} SET ${leaseUntil} = NULL, ${leaseOwner} = NULL${touch}
       WHERE ${leaseUntil} IS NOT NULL AND substr(${leaseOwner}, 1, length(@owner)) = @owner
       RETURNING ${t.returning}`,
    ),
    releaseDueNow: statement<R>(
      `UPDATE ${table} SET ${leaseUntil} = NULL, ${leaseOwner} = NULL${touch},
         ${nextAt} = CASE WHEN ${nextAt} IS NULL THEN NULL ELSE CAST(@now AS BIGINT) END
       WHERE ${leaseUntil} IS NOT NULL AND substr(${leaseOwner}, 1, length(@owner)) = @owner
       RETURNING ${t.returning}`,
    ),
    // A scheduled row under a lease wakes nobody: its lease's end does.
    nextWake: statement<{ at: number | null }>(
      `SELECT MIN(at) AS at FROM (
         SELECT MIN(${nextAt}) AS at FROM ${table} WHERE ${nextAt} > @now AND ${leaseUntil} IS NULL
         UNION ALL SELECT MIN(${leaseUntil}) FROM ${table} WHERE ${leaseUntil} > @now) AS soonest`,
    ),
  };

  /** Rows as claimed, without the ordering columns, in the order of `rank`. */
  const ordered = (rows: R[], rank: (r: R) => number[]): R[] => {
    const keyed = rows.map((r) => ({ r, k: rank(r) }));
    keyed.sort((a, b) => a.k[0] - b.k[0] || a.k[1] - b.k[1]);
    return keyed.map(({ r }) => {
      const { __next: _n, __seq: _s, ...rest } = r as Record<string, unknown>;
      return rest as R;
    });
  };

  return {
    table: t,
    async claimDue(q, o) {
      if (o.limit <= 0) return [];
      const grouped = o.group !== undefined;
      if (grouped && !s.claimDueIn) throw new Error(`the queue ${table} has no group column`);
      const params = { now: o.now, limit: o.limit, owner: o.owner, until: o.until, ...(grouped ? { group: o.group } : {}) };
      const rows = await q.all(grouped ? s.claimDueIn! : s.claimDue, params);
      return ordered(rows, (r) => [Number(r.__next), Number(r.__seq)]);
    },
    async claim(q, seqs, o) {
      if (!seqs.length) return [];
      const rows = await q.all(s.claim, { seqs: JSON.stringify(seqs), now: o.now, owner: o.owner, until: o.until });
      const order = new Map(seqs.map((n, i) => [n, i]));
      return ordered(rows, (r) => [order.get(Number(r.__seq)) ?? 0, 0]);
    },
    async claimById(q, id, o) {
      if (!s.claimById) throw new Error(`the queue ${table} has no id column`);
      return q.get(s.claimById, { id, now: o.now, owner: o.owner, until: o.until });
    },
    async giveBack(q, seqs, owner, now) {
      if (!seqs.length) return [];
      const rows = await q.all(s.giveBack, t.updatedAt ? { seqs: JSON.stringify(seqs), owner, now } : { seqs: JSON.stringify(seqs), owner });
      return rows.map((r) => ({ ...r, seq: Number(r.seq) }));
    },
    releaseOwnedBy(q, ownerPrefix, now, opts = {}) {
      const params = opts.dueNow || t.updatedAt ? { owner: ownerPrefix, now } : { owner: ownerPrefix };
      return q.all(opts.dueNow ? s.releaseDueNow : s.release, params);
    },
    async nextWake(q, now) {
      const at = (await q.get(s.nextWake, { now }))?.at;
      return at === null || at === undefined ? undefined : Number(at);
    },
  };
}
