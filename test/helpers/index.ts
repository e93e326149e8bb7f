/**
 * Test helpers: temporary folders, a real server on 127.0.0.1 with port 0 and a fresh data
 * directory, and a client for its management API. Everything is cleaned up by `t.after`.
 */
import { createHash } from 'node:crypto';
import { adminSql } from './postgres.ts';
import { closeSync, mkdirSync, mkdtempSync, openSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import type { TestContext } from 'node:test';
import { defaultConfig, publicUrlOf, type LoadedConfig } from '../../src/config/index.ts';
import { startServer, type RunningServer } from '../../src/server/server.ts';
import { memoryLogger } from '../../src/log/index.ts';
import { consoleUrl } from '../../src/http/origins.ts';
import type { Module } from '../../src/module/contract.ts';
import { statement, type Database } from '../../src/store/contract.ts';

export const ROOT = new URL('../../', import.meta.url).pathname.replace(/\/$/, '');

type DeepPartial<T> = { [K in keyof T]?: T[K] extends object ? DeepPartial<T[K]> : T[K] };

export function tmpDir(t: TestContext | undefined, prefix = 'switchyard-test-'): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  // Never throws: a process of the test may still be writing in it (hooks run in the order they were
  // registered, so a serve started later is killed after this), and a throw here skipped the hooks
  // after it: that serve and its receiver stayed up, and the file's process never ended (a CI run hung).
  t?.after(() => {
    try {
      rmSync(dir, { recursive: true, force: true, maxRetries: 3 });
    } catch {
      /* left for the OS's temp cleaning */
    }
  });
  return dir;
}

function merge<T>(base: T, over: DeepPartial<T> | undefined): T {
  if (!over) return base;
  const out: any = Array.isArray(base) ? [...(base as any)] : { ...base };
  for (const [k, v] of Object.entries(over)) {
    out[k] = v && typeof v === 'object' && !Array.isArray(v) ? merge((base as any)[k] ?? {}, v as any) : v;
  }
  return out;
}

/** A validated config for tests: port 0, a fresh data dir, private networks allowed (loopback receivers). */
export function testConfig(t: TestContext | undefined, over?: DeepPartial<LoadedConfig>): LoadedConfig {
  const dir = tmpDir(t);
  const base = defaultConfig();
  const cfg = merge(
    {
      ...base,
      data_dir: join(dir, 'data'),
      integrations_dir: join(dir, 'integrations'),
      admin_token: 'test-admin-token',
      server: { ...base.server, port: 0 },
      webhooks: { ...base.webhooks, allow_private_networks: true },
      source: null,
      publicUrl: '',
    } as LoadedConfig,
    over,
  );
  cfg.publicUrl = publicUrlOf(cfg);
  if (process.env.SWITCHYARD_TEST_PG_URL && !over?.store) cfg.store = freshPostgresDatabase(cfg.data_dir);
  return cfg;
}

/**
 * With SWITCHYARD_TEST_PG_URL (set by test/postgres-suites.test.ts), each test's data directory
 * gets a database of its own on that server, so a suite runs unchanged on PostgreSQL; a server
 * started again on the same data directory (a restart) finds the same database.
 */
export function freshPostgresDatabase(dataDir: string, base = process.env.SWITCHYARD_TEST_PG_URL!): string {
  const name = `t_${createHash('sha256').update(dataDir).digest('hex').slice(0, 16)}`;
  // Left for the throwaway server to take with it (a test's after-hooks may outlive its server's close).
  // A copy of SWITCHYARD_TEST_PG_TEMPLATE when set (postgres-suites.test.ts: a database the
  // migrations brought up to date once); one psql run either way.
  const template = base === process.env.SWITCHYARD_TEST_PG_URL ? process.env.SWITCHYARD_TEST_PG_TEMPLATE : undefined;
  adminSql(
    base,
    `SELECT 'CREATE DATABASE ${name}${template ? ` TEMPLATE ${template}` : ''}' WHERE NOT EXISTS (SELECT 1 FROM pg_database WHERE datname = '${name}')\\gexec`,
  );
  const url = new URL(base);
  url.pathname = `/${name}`;
  return url.toString();
}

export interface TestServer extends RunningServer {
  config: LoadedConfig;
  /** The console's origin (http://localhost:<port> by default): the console answers only there. */
  consoleUrl: string;
  token: string;
  logs: Array<Record<string, unknown>>;
  /** Call the management API as the admin (or with `token`). Returns status and parsed JSON. */
  api<T = any>(method: string, path: string, body?: unknown, token?: string): Promise<{ status: number; body: T; headers: Headers }>;
}

export async function startTestServer(
  t: TestContext,
  over?: DeepPartial<LoadedConfig>,
  opts: { modules?: Module[]; noWaitForIntegrations?: boolean; sandbox?: 'worker' | 'in-process' } = {},
): Promise<TestServer> {
  const config = testConfig(t, over);
  const log = memoryLogger();
  // The sandbox as the product runs it (serve: in the serving process); a test of the sandbox worker process asks for 'worker'.
  const server = await startServer(config, { log, modules: opts.modules, sandbox: opts.sandbox ?? 'in-process' });
  t.after(() => server.close());
  // The server listens while its integrations load; tests start from a loaded registry unless they
  // ask otherwise (see test/startup.test.ts for the start-up window itself).
  if (!opts.noWaitForIntegrations) await server.services.registry?.whenReady();
  return {
    ...server,
    config: server.services.config,
    consoleUrl: consoleUrl(server.services),
    token: server.services.adminToken,
    logs: log.lines,
    async api(method, path, body, token = server.services.adminToken) {
      const res = await fetch(`${server.url}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${token}`,
          ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const text = await res.text();
      let parsed: any = text;
      try {
        parsed = text ? JSON.parse(text) : undefined;
      } catch {
        /* not JSON */
      }
      return { status: res.status, body: parsed, headers: res.headers };
    },
  };
}

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * The commands that may run integrations' code in isolates in their own process: started with
 * --no-node-snapshot, as isolated-vm needs (src/sandbox/node-snapshot.ts refuses otherwise). The
 * others start without it: half the start-up CPU, over the suite's hundreds of CLI runs. `bare`:
 * without it whatever the command (a test of that refusal).
 */
const RUNS_ISOLATES = new Set(['serve', 'check', 'new', 'gitbook', 'integrations']);
function nodeOptionsFor(args: string[], bare = false): string[] {
  return !bare && RUNS_ISOLATES.has(args[0]) ? ['--no-node-snapshot'] : [];
}

/** Run the real CLI entry (`node src/main.ts ...`) as a child process. */
export function runCli(
  args: string[],
  opts: { cwd?: string; env?: NodeJS.ProcessEnv; input?: string; timeoutMs?: number; bare?: boolean } = {},
): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...nodeOptionsFor(args, opts.bare), join(ROOT, 'src/main.ts'), ...args], {
      cwd: opts.cwd ?? ROOT,
      env: { ...process.env, NO_COLOR: '1', ...opts.env },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 30_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
    child.stdin.end(opts.input ?? '');
  });
}

/** Start a long-running CLI command; resolves once a line matching `ready` appears on stdout or stderr. */
export function spawnCli(
  t: TestContext,
  args: string[],
  ready: RegExp,
  opts: {
    cwd?: string;
    env?: NodeJS.ProcessEnv;
    timeoutMs?: number /** A command that execs node in place (`taskset -c 0`). */;
    prefix?: string[];
    bare?: boolean;
  } = {},
): Promise<{ child: ChildProcess; output: () => string; match: RegExpExecArray }> {
  return new Promise((resolve, reject) => {
    const [cmd, ...before] = [...(opts.prefix ?? []), process.execPath];
    const child = spawn(cmd, [...before, ...nodeOptionsFor(args, opts.bare), join(ROOT, 'src/main.ts'), ...args], {
      cwd: opts.cwd ?? ROOT,
      env: { ...process.env, NO_COLOR: '1', ...opts.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    t.after(() => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    });
    let out = '';
    const timer = setTimeout(() => reject(new Error(`timed out waiting for ${ready} in:\n${out}`)), opts.timeoutMs ?? 15_000);
    const onData = (d: Buffer) => {
      out += d;
      const m = ready.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve({ child, output: () => out, match: m });
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`exited with ${code} before ready:\n${out}`));
    });
  });
}

/** One call to the management API of a node served at `base` (its URL) with the admin `token`: the status and the JSON answer. */
export async function adminApi(base: string, token: string, method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: await res.json() };
}

/** Poll `fn` until it returns a truthy value (or throw after `timeoutMs`). */
export async function waitFor<T>(fn: () => T | Promise<T>, timeoutMs = 5000, everyMs = 10): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      const v = await fn();
      if (v) return v as NonNullable<T>;
    } catch (e) {
      last = e;
    }
    await new Promise((r) => setTimeout(r, everyMs));
  }
  throw new Error(`waitFor timed out after ${timeoutMs} ms${last ? `: ${(last as Error).message}` : ''}`);
}

/**
 * A fresh tmpfs of `sizeMb` (a disk that fills up for real), unmounted after the test; undefined
 * where mounting is not allowed (it needs root).
 */
export function tmpfs(t: TestContext, sizeMb: number): string | undefined {
  const parent = mkdtempSync(join(tmpdir(), 'switchyard-tmpfs-'));
  const dir = join(parent, 'mnt');
  mkdirSync(dir);
  const r = spawnSync('mount', ['-t', 'tmpfs', '-o', `size=${sizeMb}m`, 'tmpfs', dir]);
  // Unmounted before it is removed (hooks registered earlier run first).
  t.after(() => {
    if (r.status === 0) spawnSync('umount', ['-l', dir]);
    rmSync(parent, { recursive: true, force: true });
  });
  return r.status === 0 ? dir : undefined;
}

/**
 * Fill the disk that holds `dir` to the last byte with a file of its own (`filler`, made anew);
 * returns that file. Truncating it frees what it is shortened by.
 */
export function fillDisk(dir: string): string {
  const filler = join(dir, 'filler');
  const fd = openSync(filler, 'w');
  const chunk = Buffer.alloc(256 * 1024, 1);
  try {
    for (;;) writeSync(fd, chunk);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOSPC') throw e;
  }
  try {
    for (;;) writeSync(fd, chunk.subarray(0, 512));
  } catch {
    /* full */
  }
  closeSync(fd);
  return filler;
}

/**
 * A test's own look at the store, on either engine (SQLite's dialect, translated for PostgreSQL as
 * the modules' statements are): the rows, the first row, or its first column.
 */
export const sql = {
  all: <R = Record<string, any>>(store: { database: Database }, text: string, params: unknown[] = []) => store.database.all<R>(statement<R>(text), params),
  get: <R = Record<string, any>>(store: { database: Database }, text: string, params: unknown[] = []) => store.database.get<R>(statement<R>(text), params),
  value: <V = any>(store: { database: Database }, text: string, params: unknown[] = []) => store.database.value<V>(statement(text), params),
  run: (store: { database: Database }, text: string, params: unknown[] = []) => store.database.run(statement(text), params),
};
