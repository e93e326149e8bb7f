/** What the benchmarks share: their settings from the environment, the median they report, and the real `switchyard serve` they measure. */

import { spawn, type ChildProcess } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import type { IncomingMessage } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * A numeric setting from the environment (`BENCH_ROUNDS=5`), or `fallback` when unset. Anything
 * but a positive number (a whole one where `whole`) stops the benchmark with the setting's name and
 * exit code 2 (bad input), before it runs for minutes to print NaN.
 */
export function setting(name: string, fallback: number, whole = true): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isFinite(n) || n <= 0 || (whole && !Number.isInteger(n))) {
    process.stderr.write(`${name}=${raw}: must be a positive ${whole ? 'whole ' : ''}number (default ${fallback})\n`);
    process.exit(2);
  }
  return n;
}

/** The value below which `p` % of `sorted` (ascending) lie; NaN when there is none. */
export function percentile(sorted: number[], p: number): number {
  if (!sorted.length) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

/** The middle value (the mean of the two middle ones for an even count). */
export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

/**
 * An integration folder `<integrations>/<name>` whose script (`src/index.ts`) is `fetch`'s body:
 * the hello integration the benchmarks load, in one place.
 */
export function writeHelloIntegration(integrations: string, name: string, fetch: string, title = 'Hello'): void {
  mkdirSync(join(integrations, name, 'src'), { recursive: true });
  writeFileSync(
    join(integrations, name, 'platform-manifest.yaml'),
    `name: ${name}\ntitle: ${title}\ndescription: Says hello\norganization: bench\nvisibility: private\nscopes: []\nscript: src/index.ts\n`,
  );
  writeFileSync(
    join(integrations, name, 'src/index.ts'),
    `import { createIntegration } from '@switchyard/runtime';\nexport default createIntegration({ ${fetch} });\n`,
  );
}

/** `switchyard serve` as a user starts it, in a temp folder with the webhook integration. */
export interface BenchServe {
  url: string;
  token: string;
  dir: string;
  child: ChildProcess;
  /** An authenticated JSON call to the HTTP API; throws on any status >= 300. */
  api(method: string, path: string, body?: unknown): Promise<any>;
  stop(): void;
}

/** The URL a starting `switchyard serve` (JSON logs) says it serves at; rejects if it exits first, with what it printed. */
export function servingUrl(child: ChildProcess): Promise<string> {
  return new Promise<string>((resolve, reject) => {
    let out = '';
    const onData = (d: Buffer) => {
      out += d;
      const m = /"msg":"switchyard serving","url":"(http:\/\/[^"]+)"/.exec(out);
      if (m) resolve(m[1]);
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.on('exit', (code) => reject(new Error(`serve exited with ${code}:\n${out}`)));
  });
}

/**
 * Starts the real command (src/main.ts serve) with `processes` serving processes (0: the default,
 * one per core) on port 0 and resolves once it logs its URL. `webhooks` adds settings under
 * `webhooks:`; `extraYaml` is appended to the config.
 */
export async function startServe(opts: { processes?: number | string; extraYaml?: string; webhooks?: Record<string, number> } = {}): Promise<BenchServe> {
  const dir = mkdtempSync(join(tmpdir(), 'switchyard-bench-'));
  const token = 'bench-token-0123456789';
  const root = new URL('../../', import.meta.url).pathname;
  cpSync(join(root, 'integrations/webhook'), join(dir, 'integrations/webhook'), { recursive: true });
  writeFileSync(
    join(dir, 'config.yaml'),
    `server:\n  port: 0\n  processes: ${opts.processes ?? 0}\ndata_dir: ./data\nintegrations_dir: ./integrations\nadmin_token: ${token}\n` +
      `log:\n  format: json\n  level: info\nwebhooks:\n  allow_private_networks: true\n` +
      Object.entries(opts.webhooks ?? {})
        .map(([k, v]) => `  ${k}: ${v}\n`)
        .join('') +
      (opts.extraYaml ?? ''),
  );
  const child = spawn(process.execPath, ['--no-node-snapshot', join(root, 'src/main.ts'), 'serve', '--config', join(dir, 'config.yaml')], {
    cwd: dir,
    stdio: ['ignore', 'pipe', 'pipe'],
    // BENCH_SERVE_NODE_OPTIONS reaches the server alone, e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof`.
    env: process.env.BENCH_SERVE_NODE_OPTIONS ? { ...process.env, NODE_OPTIONS: process.env.BENCH_SERVE_NODE_OPTIONS } : process.env,
  });
  const url = await servingUrl(child);
  // Keep draining its output so a chatty server never blocks on a full pipe.
  child.stdout!.resume();
  child.stderr!.resume();
  const api = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${url}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const json = (await res.json()) as any;
    if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(json)}`);
    return json;
  };
  let stopped = false;
  const stop = () => {
    if (stopped) return;
    stopped = true;
    child.kill('SIGTERM');
    child.once('exit', () => rmSync(dir, { recursive: true, force: true }));
  };
  process.on('exit', () => {
    if (!stopped) child.kill('SIGKILL');
  });
  return { url, token, dir, child, api, stop };
}

/** Sends `msg` to a forked child and resolves with the first message that carries `key`. */
export function ask<T>(child: ChildProcess, msg: unknown, key: string): Promise<T> {
  return new Promise((resolve) => {
    const on = (m: any) => {
      if (m && typeof m === 'object' && key in m) {
        child.off('message', on);
        resolve(m as T);
      }
    };
    child.on('message', on);
    if (msg !== undefined) child.send(msg as any);
  });
}

/** CPU time (ms) a process has used, or undefined once it is gone. */
export function cpuMs(pid: number): number | undefined {
  try {
    const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return ((Number(f[11]) + Number(f[12])) * 1000) / TICKS;
  } catch {
    return undefined;
  }
}
const TICKS = 100; // USER_HZ on Linux
/** A process and its descendants. */
export function processTree(pid: number): number[] {
  const out = [pid];
  try {
    for (const t of readdirSync(`/proc/${pid}/task`))
      for (const c of readFileSync(`/proc/${pid}/task/${t}/children`, 'utf8').trim().split(' ').filter(Boolean)) out.push(...processTree(Number(c)));
  } catch {
    /* gone */
  }
  return out;
}

/** The secret the hand-written peers sign with (Switchyard's scheme, src/webhooks/signature.ts): any one costs the same. */
export const PEER_SECRET = 'whsec_' + Buffer.alloc(24, 7).toString('base64');

/** A peer's answer read as Switchyard reads one: its status, and its first 1,024 characters (kept with the attempt). */
export function readAnswer(res: IncomingMessage, done: (status: number, excerpt: string) => void): void {
  let excerpt = '';
  res.setEncoding('utf8');
  res.on('data', (c: string) => {
    if (excerpt.length < 1024) excerpt += c.slice(0, 1024 - excerpt.length);
  });
  res.on('end', () => done(res.statusCode ?? 0, excerpt));
}
