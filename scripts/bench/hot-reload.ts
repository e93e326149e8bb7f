/**
 * Hot reload: time from writing an integration's script to the new version being served.
 * Median of 20 writes; the goal is under 300 ms.
 *
 *   1. registry: the registry swaps in the new version (its onChange fires with the new code).
 *   2. http:     a request to the installation's public endpoint answers with the new code
 *                (only when the server has the runtime and the sandbox; skipped otherwise).
 *
 * Run: PATH=node_modules/.bin:$PATH node --no-node-snapshot scripts/bench/hot-reload.ts
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { defaultConfig, publicUrlOf, type LoadedConfig } from '../../src/config/index.ts';
import { createLogger } from '../../src/log/index.ts';
import { createRegistry, type Registry } from '../../src/registry/index.ts';
import type { Module } from '../../src/module/contract.ts';
import { median } from './common.ts';

const RUNS = 20;
const GOAL_MS = 300;

const manifest = 'name: bench\ntitle: Bench\ndescription: Hot reload benchmark\norganization: bench\nvisibility: private\nscopes: []\nscript: src/index.ts\n';
const script = (n: number) =>
  `import { createIntegration } from '@switchyard/runtime';\nexport default createIntegration({ fetch: async () => new Response('version-${n}') });\n`;

function report(label: string, times: number[]): void {
  const m = median(times);
  const s = [...times].sort((a, b) => a - b);
  console.log(
    `${label.padEnd(9)} median ${m.toFixed(1)} ms  (min ${s[0].toFixed(1)}, p90 ${s[Math.floor(s.length * 0.9) - 1].toFixed(1)}, max ${s.at(-1)!.toFixed(1)})  goal < ${GOAL_MS} ms  ratio ${(m / GOAL_MS).toFixed(2)} ${m < GOAL_MS ? 'ok' : 'OVER GOAL'}`,
  );
}

async function benchRegistry(root: string): Promise<number[]> {
  const dir = join(root, 'integrations');
  mkdirSync(join(dir, 'bench/src'), { recursive: true });
  writeFileSync(join(dir, 'bench/platform-manifest.yaml'), manifest);
  writeFileSync(join(dir, 'bench/src/index.ts'), script(0));
  const registry: Registry = await createRegistry({ dir, log: createLogger({ level: 'warn' }), env: {}, limits: defaultConfig().sandbox, watch: true });
  const times: number[] = [];
  try {
    for (let i = 1; i <= RUNS; i++) {
      const marker = `version-${i}`;
      const swapped = new Promise<number>((resolve) => {
        const off = registry.onChange((_name, current) => {
          if (current?.script?.code.includes(marker)) {
            off();
            resolve(performance.now());
          }
        });
      });
      const t0 = performance.now();
      writeFileSync(join(dir, 'bench/src/index.ts'), script(i));
      times.push((await swapped) - t0);
      await new Promise((r) => setTimeout(r, 30));
    }
  } finally {
    await registry.close();
  }
  return times;
}

/** The whole server: write, then poll the installation's public endpoint until the answer changes. */
async function benchHttp(root: string): Promise<number[] | string> {
  const { startServer } = await import('../../src/server/server.ts');
  const dir = join(root, 'http-integrations');
  mkdirSync(join(dir, 'bench/src'), { recursive: true });
  writeFileSync(join(dir, 'bench/platform-manifest.yaml'), manifest);
  writeFileSync(join(dir, 'bench/src/index.ts'), script(0));
  const base = defaultConfig();
  const config: LoadedConfig = {
    ...base,
    data_dir: join(root, 'data'),
    integrations_dir: dir,
    admin_token: 'bench-admin-token',
    server: { ...base.server, port: 0 },
    log: { ...base.log, level: 'error' },
    source: null,
    publicUrl: '',
  };
  config.publicUrl = publicUrlOf(config);
  // The modules a public endpoint needs, in start order (the sandbox first, so the first load is checked too).
  let modules: Module[];
  try {
    modules = [
      (await import('../../src/sandbox/index.ts')).sandboxModule,
      (await import('../../src/registry/index.ts')).registryModule,
      (await import('../../src/installations/index.ts')).installationsModule,
      (await import('../../src/runtime/index.ts')).runtimeModule,
    ];
  } catch (e) {
    return `this build lacks a module the public endpoint needs (${(e as Error).message.split('\n')[0]})`;
  }
  let server;
  try {
    server = await startServer(config, { log: createLogger({ level: 'error' }), modules });
  } catch (e) {
    return `the server did not start (${(e as Error).message})`;
  }
  try {
    if (!server.services.runtime || !server.services.sandbox) return 'this build has no runtime/sandbox module yet';
    const auth = { authorization: `Bearer ${config.admin_token}`, 'content-type': 'application/json' };
    const res = await fetch(`${server.url}/api/v1/installations`, { method: 'POST', headers: auth, body: JSON.stringify({ integration: 'bench' }) });
    if (!res.ok) return `installing failed: ${res.status} ${await res.text()}`;
    const body = (await res.json()) as { installation: { urls: { publicEndpoint: string } } };
    const endpoint = body.installation.urls.publicEndpoint;
    const first = await (await fetch(endpoint, { method: 'POST' })).text();
    if (first !== 'version-0') return `the public endpoint answered "${first.slice(0, 80)}" instead of version-0`;
    const times: number[] = [];
    for (let i = 1; i <= RUNS; i++) {
      const marker = `version-${i}`;
      const t0 = performance.now();
      writeFileSync(join(dir, 'bench/src/index.ts'), script(i));
      for (;;) {
        const text = await (await fetch(endpoint, { method: 'POST' })).text();
        if (text === marker) break;
        if (performance.now() - t0 > 10_000) return `no answer with ${marker} after 10 s (last: ${text.slice(0, 80)})`;
        await new Promise((r) => setTimeout(r, 2));
      }
      times.push(performance.now() - t0);
      await new Promise((r) => setTimeout(r, 30));
    }
    return times;
  } finally {
    await server.close();
  }
}

const root = mkdtempSync(join(tmpdir(), 'switchyard-bench-reload-'));
// The registry's file watches do not hold the process open (a server's socket does); this does.
const keepAlive = setInterval(() => {}, 1000);
try {
  console.log(`hot reload: file write -> new version served, ${RUNS} writes each`);
  report('registry', await benchRegistry(root));
  const http = await benchHttp(root);
  if (typeof http === 'string') console.log(`http      skipped: ${http}`);
  else report('http', http);
} finally {
  clearInterval(keepAlive);
  rmSync(root, { recursive: true, force: true });
}
