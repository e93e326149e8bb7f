/**
 * Batch ingest through the HTTP API, as a sender at volume uses it: `switchyard serve` (the real
 * command, default processes) on a temp data directory, CONNECTIONS clients each POSTing batches of
 * BATCH events to /api/v1/events for SECONDS, ROUNDS times. Prints events stored per second (from
 * the answers: accepted items), the median, and the ratio to the goal of 50,000 events/s.
 *
 * Run: PATH=node_modules/.bin:$PATH node --no-node-snapshot scripts/bench/batch-ingest.ts
 *      (BENCH_PROCESSES=1 for the one-process server; BENCH_CONNECTIONS, BENCH_BATCH, BENCH_SECONDS, BENCH_ROUNDS)
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { samplePayload } from '../../src/events/index.ts';
import { median, setting } from './common.ts';

const GOAL = 50_000;
const BATCH = setting('BENCH_BATCH', 1000);
const CONNECTIONS = setting('BENCH_CONNECTIONS', 4);
const SECONDS = setting('BENCH_SECONDS', 4, false);
const ROUNDS = setting('BENCH_ROUNDS', 3);
const PROCESSES = process.env.BENCH_PROCESSES ?? '0';
const TOKEN = 'bench-admin-token-0123456789';

const dir = mkdtempSync(join(tmpdir(), 'switchyard-bench-batch-'));
writeFileSync(
  join(dir, 'config.yaml'),
  `server:\n  port: 0\n  processes: ${PROCESSES}\ndata_dir: ./data\nintegrations_dir: ./integrations\nadmin_token: ${TOKEN}\nlog:\n  format: json\n  level: info\n`,
);
const root = new URL('../../', import.meta.url).pathname;
const server = spawn(process.execPath, ['--no-node-snapshot', join(root, 'src/main.ts'), 'serve', '--config', join(dir, 'config.yaml')], { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
const cleanup = () => {
  server.kill('SIGTERM');
  rmSync(dir, { recursive: true, force: true });
};
process.on('exit', cleanup);
process.on('SIGINT', () => process.exit(130));

const base = await new Promise<string>((resolve, reject) => {
  let out = '';
  const onData = (d: Buffer) => {
    out += d;
    const m = /"msg":"switchyard serving","url":"(http:\/\/[^"]+)"/.exec(out);
    if (m) resolve(m[1]);
  };
  server.stdout!.on('data', onData);
  server.stderr!.on('data', onData); // the log goes to stderr

  server.on('exit', (code) => reject(new Error(`serve exited with ${code}:\n${out}`)));
});

// Bodies built before the clock starts: the client's JSON work is not the server's.
const bodies = Array.from({ length: 8 }, () => JSON.stringify(Array.from({ length: BATCH }, () => ({ ...samplePayload('site_view'), eventId: undefined }))));

async function round(): Promise<number> {
  let stored = 0;
  const end = performance.now() + SECONDS * 1000;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: CONNECTIONS }, async (_, c) => {
      for (let i = c; performance.now() < end; i++) {
        const res = await fetch(`${base}/api/v1/events`, {
          method: 'POST',
          headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
          body: bodies[i % bodies.length],
        });
        const body = (await res.json()) as { accepted?: number };
        if (res.status !== 202) throw new Error(`status ${res.status}: ${JSON.stringify(body).slice(0, 300)}`);
        stored += body.accepted ?? 0;
      }
    }),
  );
  return stored / ((performance.now() - started) / 1000);
}

const rates: number[] = [];
for (let r = 0; r < ROUNDS; r++) {
  const rate = await round();
  rates.push(rate);
  console.log(`round ${r + 1}: ${Math.round(rate).toLocaleString('en')} events/s stored`);
}
const m = median(rates);
console.log(
  `batch ingest (batches of ${BATCH}, ${CONNECTIONS} connections, processes=${PROCESSES === '0' ? 'default' : PROCESSES}): median ${Math.round(m).toLocaleString('en')} events/s stored; goal >= ${GOAL.toLocaleString('en')}: ratio ${(m / GOAL).toFixed(2)} ${m >= GOAL ? 'ok' : 'UNDER GOAL'}`,
);
process.exit(0);
