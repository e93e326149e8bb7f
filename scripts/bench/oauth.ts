/**
 * OAuth connect: integrations/oauth-example against oauth2-mock-server on 127.0.0.1, with the
 * production sandbox limits. 30 connections, each three browser hops:
 *   start:    GET <public endpoint>/oauth -> 302 to the provider (state issued by the server)
 *   provider: the provider's /authorize -> 302 back with a code (not ours: for reference)
 *   callback: GET .../oauth?code&state -> state burned, code exchanged, credentials stored, page
 * Prints the wall-time medians of our two hops (goal: callback < 200 ms) and the CPU time the
 * handler's invocations used against the sandbox's cpu_time budget (goal: under half of it).
 *
 * Run: PATH=node_modules/.bin:$PATH node --no-node-snapshot scripts/bench/oauth.ts
 */
import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { OAuth2Server } from 'oauth2-mock-server';
import { defaultConfig, publicUrlOf, type LoadedConfig } from '../../src/config/index.ts';
import { startServer } from '../../src/server/server.ts';
import { createLogger } from '../../src/log/index.ts';
import { median } from './common.ts';
import { sql } from '../../test/helpers/index.ts';

const RUNS = 30;
const CALLBACK_GOAL_MS = 200;

function line(label: string, xs: number[], goal: number): string {
  const s = [...xs].sort((a, b) => a - b);
  const m = median(xs);
  return `${label.padEnd(22)} median ${m.toFixed(1).padStart(6)} ms  (min ${s[0].toFixed(1)}, p90 ${s[Math.floor(s.length * 0.9) - 1].toFixed(1)}, max ${s.at(-1)!.toFixed(1)})  goal < ${goal} ms  ratio ${(m / goal).toFixed(2)} ${m < goal ? 'ok' : 'OVER GOAL'}`;
}

async function hop(url: string): Promise<{ ms: number; status: number; location: string | null }> {
  const t0 = performance.now();
  const res = await fetch(url, { redirect: 'manual' });
  await res.arrayBuffer();
  return { ms: performance.now() - t0, status: res.status, location: res.headers.get('location') };
}

const provider = new OAuth2Server();
await provider.issuer.keys.generate('RS256');
await provider.start(0, '127.0.0.1');
provider.issuer.url = `http://127.0.0.1:${provider.address().port}`;

const root = mkdtempSync(join(tmpdir(), 'switchyard-bench-oauth-'));
cpSync(join(import.meta.dirname, '../../integrations/oauth-example'), join(root, 'integrations/oauth-example'), {
  recursive: true,
  filter: (f) => !f.endsWith('.env'),
});
process.env.OAUTH_EXAMPLE_CLIENT_ID = 'bench-client';
process.env.OAUTH_EXAMPLE_CLIENT_SECRET = 'bench-secret';
process.env.OAUTH_EXAMPLE_PROVIDER_URL = provider.issuer.url;
const base = defaultConfig();
const config: LoadedConfig = {
  ...base,
  data_dir: join(root, 'data'),
  integrations_dir: join(root, 'integrations'),
  admin_token: 'bench-admin-token',
  server: { ...base.server, port: 0 },
  webhooks: { ...base.webhooks, allow_private_networks: true },
  log: { ...base.log, level: 'error' },
  source: null,
  publicUrl: '',
};
config.publicUrl = publicUrlOf(config);
const server = await startServer(config, { log: createLogger({ level: 'error' }) });

try {
  const res = await fetch(`${server.url}/api/v1/installations`, {
    method: 'POST',
    headers: { authorization: `Bearer ${config.admin_token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ integration: 'oauth-example' }),
  });
  const { installation } = (await res.json()) as { installation: { id: string; connect: Array<{ url: string }> } };
  const connect = installation.connect[0].url;
  const start: number[] = [];
  const callback: number[] = [];
  for (let i = 0; i < RUNS + 3; i++) {
    const a = await hop(connect);
    const b = await hop(a.location!);
    const c = await hop(b.location!);
    if (a.status !== 302 || b.status !== 302 || c.status !== 200) throw new Error(`run ${i}: statuses ${a.status} ${b.status} ${c.status}`);
    if (i >= 3) {
      // The first runs warm the isolate up.
      start.push(a.ms);
      callback.push(c.ms);
    }
  }
  const rows = await sql.all<{ status: number; cpu_ms: number }>(
    server.services.store,
    "SELECT status, cpu_ms FROM invocations WHERE integration = 'oauth-example' ORDER BY created_at",
  );
  const warm = rows.slice(6);
  const budget = config.sandbox.cpu_time;
  console.log(`OAuth connect against oauth2-mock-server, ${RUNS} connections after 3 warm-up ones`);
  console.log(line('start (302 + state)', start, CALLBACK_GOAL_MS / 2));
  console.log(line('callback (exchange)', callback, CALLBACK_GOAL_MS));
  console.log(
    line(
      'start CPU',
      warm.filter((r) => r.status === 302).map((r) => r.cpu_ms),
      budget / 2,
    ),
  );
  console.log(
    line(
      'callback CPU',
      warm.filter((r) => r.status === 200).map((r) => r.cpu_ms),
      budget / 2,
    ),
  );
  console.log(`(cpu goal: half of sandbox.cpu_time = ${budget} ms; first, cold invocation: ${rows[0]?.cpu_ms.toFixed(1)} ms CPU)`);
} finally {
  await server.close();
  await provider.stop();
  rmSync(root, { recursive: true, force: true });
}
