/**
 * The store's contract on PostgreSQL, the two ways a process can reach it: the synchronous
 * connection the modules use today (a thread behind Atomics.wait: store/postgres/bridge.ts) and the
 * pool on the event loop (store/postgres/pool.ts), through the same `Database` interface, on a
 * throwaway PostgreSQL 15 (Debian's package) on this machine.
 * Run: PATH=node_modules/.bin:$PATH node --no-node-snapshot scripts/bench/pg-contract.ts
 *
 * For each: BENCH_N (5,000) single-row INSERTs one after another, then the same number 16 at a
 * time (what a serving process with requests in flight asks), and how long the event loop was held
 * meanwhile: the longest gap between two ticks of a 1 ms timer (a statement that blocks the thread
 * holds every timer, HTTP request and heartbeat of the process that long). Prints statements per second, this process's CPU
 * per statement, and the ratio pool / synchronous. Medians of BENCH_ROUNDS (3).
 */
import { statement, type Database } from '../../src/store/contract.ts';
import { createDatabase } from '../../src/store/database.ts';
import { openPostgresDb } from '../../src/store/postgres/db.ts';
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

async function main(): Promise<void> {
  const pg = await startPostgres();
  const sync = openPostgresDb({ url: pg.url, name: 'bench' });
  const ways: Record<string, Database> = {
    synchronous: createDatabase(sync, 'postgres'),
    pool: createPostgresDatabase({ url: pg.url, name: 'bench', max: PARALLEL }),
  };
  try {
    await ways.pool.run(create);
    console.log(`the store's contract on PostgreSQL (${pg.version}): ${N} single-row INSERTs per measure, ${ROUNDS} rounds, Node ${process.version}`);
    for (const parallel of [1, PARALLEL]) {
      const results: Record<string, Array<Awaited<ReturnType<typeof measure>>>> = { synchronous: [], pool: [] };
      for (let r = 0; r < ROUNDS; r++) for (const name of Object.keys(ways)) results[name].push(await measure(ways[name], parallel));
      const m = (name: string, k: 'rate' | 'cpuUs' | 'held') => median(results[name].map((x) => x[k]));
      for (const name of Object.keys(ways))
        console.log(
          `${String(parallel).padStart(2)} at a time  ${name.padEnd(11)} ${Math.round(m(name, 'rate'))} statements/s, ${m(name, 'cpuUs').toFixed(0)} us CPU each here, event loop held at most ${m(name, 'held').toFixed(1)} ms at a time`,
        );
      console.log(`${String(parallel).padStart(2)} at a time  pool / synchronous: ${(m('pool', 'rate') / m('synchronous', 'rate')).toFixed(2)}x the statements, ${(m('pool', 'cpuUs') / m('synchronous', 'cpuUs')).toFixed(2)}x the CPU each`);
    }
  } finally {
    await (ways.pool as ReturnType<typeof createPostgresDatabase>).close();
    sync.close();
    pg.stop();
  }
}

await main();
