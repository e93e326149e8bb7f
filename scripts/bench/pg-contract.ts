/**
 * The store's contract on PostgreSQL (store/postgres/pool.ts) against the driver under it used
 * directly (a `pg.Pool` running the same named prepared statement), on a throwaway PostgreSQL 15
 * (Debian's package) on this machine: what the contract's layer costs.
 * Run: PATH=node_modules/.bin:$PATH node --no-node-snapshot scripts/bench/pg-contract.ts
 *
 * For each: BENCH_N (5,000) single-row INSERTs one after another, then the same number 16 at a
 * time (what a serving process with requests in flight asks), and how long the event loop was held
 * meanwhile: the longest gap between two ticks of a 1 ms timer. Prints statements per second, this
 * process's CPU per statement, and the ratio contract / driver. Medians of BENCH_ROUNDS (3).
 * (Until 2026-11 the modules reached PostgreSQL through a synchronous connection, a thread behind
 * Atomics.wait: the pool did 5.14x its statements at 16 in flight for 0.29x the CPU each, and the
 * synchronous path held the event loop for the whole run; docs/benchmarks.md keeps those figures.)
 */
import { statement, type Database } from '../../src/store/contract.ts';
import pg from 'pg';
import { createPostgresDatabase } from '../../src/store/postgres/pool.ts';
import { startPostgres } from '../../test/helpers/postgres.ts';
import { median, setting } from './common.ts';

const N = setting('BENCH_N', 5000);
const ROUNDS = setting('BENCH_ROUNDS', 3);
const PARALLEL = 16;

const create = statement('CREATE TABLE IF NOT EXISTS bench (id BIGSERIAL PRIMARY KEY, v TEXT NOT NULL, at BIGINT NOT NULL)');
const insert = statement('INSERT INTO bench (v, at) VALUES (?, ?)');

async function measure(db: Database, parallel: number) {
  let last = performance.now();
  let longest = 0;
  const ticker = setInterval(() => {
    const now = performance.now();
    longest = Math.max(longest, now - last);
    last = now;
  }, 1);
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  let next = 0;
  const lane = async () => {
    while (next < N) {
      next++;
      await db.run(insert, ['x'.repeat(40), Date.now()]);
    }
  };
  await Promise.all(Array.from({ length: parallel }, lane));
  const ms = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  clearInterval(ticker);
  longest = Math.max(longest, performance.now() - last);
  return { rate: (N / ms) * 1000, cpuUs: (cpu.user + cpu.system) / N, held: longest };
}

/** The driver alone, behind the same shape: the statement as the contract sends it (named, prepared once per connection). */
function driver(pool: pg.Pool): Database {
  const text = 'INSERT INTO bench (v, at) VALUES ($1, $2)';
  return {
    run: async (_s: unknown, params: unknown[]) => {
      const r = await pool.query({ name: 'bench_insert', text, values: params });
      return { changes: r.rowCount ?? 0, lastId: 0 };
    },
  } as unknown as Database;
}

async function main(): Promise<void> {
  const server = await startPostgres();
  const raw = new pg.Pool({ connectionString: server.url, max: PARALLEL });
  const ways: Record<string, Database> = {
    driver: driver(raw),
    contract: createPostgresDatabase({ url: server.url, name: 'bench', max: PARALLEL }),
  };
  try {
    await ways.contract.run(create);
    console.log(`the store's contract on PostgreSQL (${server.version}): ${N} single-row INSERTs per measure, ${ROUNDS} rounds, Node ${process.version}`);
    for (const parallel of [1, PARALLEL]) {
      const results: Record<string, Array<Awaited<ReturnType<typeof measure>>>> = { driver: [], contract: [] };
      for (let r = 0; r < ROUNDS; r++) for (const name of Object.keys(ways)) results[name].push(await measure(ways[name], parallel));
      const m = (name: string, k: 'rate' | 'cpuUs' | 'held') => median(results[name].map((x) => x[k]));
      for (const name of Object.keys(ways))
        console.log(
          `${String(parallel).padStart(2)} at a time  ${name.padEnd(8)} ${Math.round(m(name, 'rate'))} statements/s, ${m(name, 'cpuUs').toFixed(0)} us CPU each here, event loop held at most ${m(name, 'held').toFixed(1)} ms at a time`,
        );
      console.log(
        `${String(parallel).padStart(2)} at a time  contract / driver: ${(m('contract', 'rate') / m('driver', 'rate')).toFixed(2)}x the statements, ${(m('contract', 'cpuUs') / m('driver', 'cpuUs')).toFixed(2)}x the CPU each`,
      );
    }
  } finally {
    await (ways.contract as ReturnType<typeof createPostgresDatabase>).close();
    await raw.end();
    server.stop();
  }
}

await main();
