/**
 * Running the built executable the way a user on a bare machine would: copied alone into an empty
 * folder, a PATH holding only that folder (no node anywhere on it), HOME and XDG_CACHE_HOME inside
 * the folder, no node_modules above it. Shared by scripts/smoke.ts, the build's timings and
 * test/executable.test.ts.
 */
import { spawn } from 'node:child_process';
import { request } from 'node:https';
import { copyFileSync, existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

export interface Playground {
  dir: string;
  /** The copy of the executable. */
  exe: string;
  /** Environment for it: nothing inherited but what a bare shell would have. */
  env: NodeJS.ProcessEnv;
  cacheHome: string;
}

/** Copy `exe` into `<dir>/bin/switchyard` and make a bare environment around it. */
export function playground(exe: string, dir: string): Playground {
  const bin = join(dir, 'bin');
  const home = join(dir, 'home');
  const cacheHome = join(dir, 'cache');
  for (const d of [bin, home, join(dir, 'work')]) mkdirSync(d, { recursive: true });
  const copy = join(bin, 'switchyard');
  copyFileSync(exe, copy);
  return {
    dir,
    exe: copy,
    cacheHome,
    env: { PATH: bin, HOME: home, XDG_CACHE_HOME: cacheHome, NO_COLOR: '1', LANG: 'C.UTF-8' },
  };
}

/** The nearest node_modules folder at or above `dir`, if any (there must be none for a fair test). */
export function nodeModulesAbove(dir: string): string | undefined {
  for (let d = dir; ; d = dirname(d)) {
    if (existsSync(join(d, 'node_modules'))) return join(d, 'node_modules');
    if (dirname(d) === d) return undefined;
  }
}

export interface RunResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

export function runExe(pg: Playground, args: string[], opts: { env?: NodeJS.ProcessEnv; timeoutMs?: number } = {}): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(pg.exe, args, { cwd: join(pg.dir, 'work'), env: { ...pg.env, ...opts.env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 30_000);
    child.on('error', reject);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
  });
}

export interface Serving {
  url: string;
  /** From spawn to the first 200 from /healthz. */
  msToHealthy: number;
  health: Record<string, unknown>;
  output(): string;
  /** SIGTERM, then wait for the exit. */
  stop(): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/**
 * `switchyard serve --port 0` in the playground (and `args`), resolved at the first 200 from
 * /healthz; with `ca`, the server speaks HTTPS (server.tls) and /healthz is asked with `ca` trusted.
 */
export function serve(pg: Playground, opts: { env?: NodeJS.ProcessEnv; timeoutMs?: number; args?: string[]; ca?: string[] } = {}): Promise<Serving> {
  const started = performance.now();
  const child = spawn(pg.exe, ['serve', '--port', '0', ...(opts.args ?? [])], {
    cwd: join(pg.dir, 'work'),
    env: { ...pg.env, ...opts.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((r) => child.on('close', (code, signal) => r({ code, signal })));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    const kill = setTimeout(() => child.kill('SIGKILL'), 10_000);
    const result = await exited;
    clearTimeout(kill);
    return result;
  };
  return new Promise((resolve, reject) => {
    let settled = false;
    const fail = (why: string) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      void stop().then(() => reject(new Error(`${why}; output:\n${out}`)));
    };
    const timer = setTimeout(() => fail(`no 200 from /healthz within ${opts.timeoutMs ?? 20_000} ms`), opts.timeoutMs ?? 20_000);
    let polling = false;
    const onData = (d: Buffer) => {
      out += d;
      const m = (opts.ca ? /https:\/\/127\.0\.0\.1:\d+/ : /http:\/\/127\.0\.0\.1:\d+/).exec(out);
      if (m && !polling) {
        polling = true;
        void poll(m[0]);
      }
    };
    const poll = async (url: string) => {
      while (!settled) {
        try {
          const res = opts.ca ? await getWithCa(`${url}/healthz`, opts.ca) : await fetch(`${url}/healthz`);
          if (res.status === 200) {
            const health = JSON.parse(await res.text()) as Record<string, unknown>;
            settled = true;
            clearTimeout(timer);
            resolve({ url, msToHealthy: performance.now() - started, health, output: () => out, stop });
            return;
          }
        } catch {
          /* not accepting yet */
        }
        await new Promise((r) => setTimeout(r, 5));
      }
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    child.on('error', (e) => fail(`cannot start ${pg.exe}: ${e.message}`));
    void exited.then(({ code, signal }) => fail(`exited (code ${code}, signal ${signal}) before /healthz answered 200`));
  });
}

function getWithCa(url: string, ca: string[]): Promise<{ status: number; text(): Promise<string> }> {
  return new Promise((resolve, reject) => {
    request(url, { ca, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode!, text: async () => body }));
      res.on('error', reject);
    })
      .on('error', reject)
      .end();
  });
}

/**
 * A preload script that leaves a marker file when it runs: NODE_OPTIONS="--require <file>" must
 * not run it inside the executable.
 */
export function evilPreload(dir: string): { nodeOptions: string; marker: string } {
  const marker = join(dir, 'INJECTED');
  const file = join(dir, 'evil.cjs');
  writeFileSync(file, `require('node:fs').writeFileSync(${JSON.stringify(marker)}, 'injected by NODE_OPTIONS\\n');\n`);
  return { nodeOptions: `--require ${file}`, marker };
}

export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}
