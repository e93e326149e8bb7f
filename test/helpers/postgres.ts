/**
 * A throwaway PostgreSQL server for tests and benchmarks: `initdb` and `pg_ctl` from Debian's
 * `postgresql` package into a temp folder, on a free loopback port, trust authentication for
 * 127.0.0.1 only (no other address; a Unix socket in the folder only when asked for), stopped and
 * removed afterwards. `restart()` restarts it as an operator would (pg_ctl restart: every
 * connection is closed, the data stays).
 *
 * PostgreSQL refuses to run as root. When this process is root, the server's commands run as an
 * unprivileged account (`postgres`, which the Debian package creates, or SWITCHYARD_PG_USER):
 * Node's spawn with `uid`/`gid` (libuv drops the supplementary groups too), so neither su nor
 * runuser (a PAM session each) is needed. The temp folder is handed to that account.
 *
 * Where the binaries are: SWITCHYARD_PG_BIN, else the newest /usr/lib/postgresql/<ver>/bin, else
 * initdb on the PATH. Absent, `postgresFor(t)` skips the test and says why, so `npm test` passes
 * on a machine without PostgreSQL.
 */
import { spawnSync, type SpawnSyncOptions } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  appendFileSync,
  chownSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  lstatSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import { freePortOutsideEphemeral } from './ports.ts';

export interface PgServer {
  /** postgres://postgres@127.0.0.1:<port>/postgres */
  url: string;
  host: string;
  port: number;
  user: string;
  database: string;
  version: string;
  dir: string;
  /** The directory of the Unix socket, when started with `socket: true`. */
  socketDir?: string;
  /** The server's log (for a failure's message). */
  log(): string;
  /** pg_ctl restart (fast): every session ends (and its advisory locks with it), the data stays. */
  restart(): void;
  /** pg_ctl stop (fast) and start: the server is away in between, the data stays. */
  halt(): void;
  start(): void;
  /** SIGSTOP (SIGCONT) to the server and every backend: connections stay open, nothing answers. */
  freeze(): void;
  thaw(): void;
  /** Stop (immediate) and remove the folder; safe to call twice. */
  stop(): void;
}

/** The folder with initdb and pg_ctl, or why there is none. */
export function postgresBinaries(): { bin: string } | { absent: string } {
  const has = (dir: string) => existsSync(join(dir, 'initdb')) && existsSync(join(dir, 'pg_ctl'));
  const env = process.env.SWITCHYARD_PG_BIN;
  if (env) return has(env) ? { bin: env } : { absent: `no initdb/pg_ctl in SWITCHYARD_PG_BIN=${env}` };
  const root = '/usr/lib/postgresql';
  if (existsSync(root)) {
    const versions = readdirSync(root)
      .filter((v) => has(join(root, v, 'bin')))
      .sort((a, b) => Number(b) - Number(a));
    if (versions.length) return { bin: join(root, versions[0], 'bin') };
  }
  for (const dir of (process.env.PATH ?? '').split(':')) if (dir && has(dir)) return { bin: dir };
  return { absent: 'PostgreSQL binaries (initdb, pg_ctl) not found: apt-get install postgresql, or set SWITCHYARD_PG_BIN' };
}

/** Who runs the server: this process, or (as root) an unprivileged account. */
export function runAs(): { uid?: number; gid?: number; name: string } | { absent: string } {
  if (process.getuid?.() !== 0) return { name: 'self' };
  const name = process.env.SWITCHYARD_PG_USER || 'postgres';
  const line = readFileSync('/etc/passwd', 'utf8')
    .split('\n')
    .find((l) => l.startsWith(`${name}:`));
  if (!line) return { absent: `running as root and there is no unprivileged account "${name}" to run PostgreSQL (set SWITCHYARD_PG_USER)` };
  const [, , uid, gid] = line.split(':');
  if (Number(uid) === 0) return { absent: `account "${name}" is root; PostgreSQL refuses to run as root` };
  return { uid: Number(uid), gid: Number(gid), name };
}

/** Why a server cannot be started here, or undefined when it can. */
export function postgresUnavailable(): string | undefined {
  const b = postgresBinaries();
  if ('absent' in b) return b.absent;
  const who = runAs();
  if ('absent' in who) return who.absent;
  return undefined;
}

const running = new Set<PgServer>();
process.once('exit', () => {
  for (const s of running) s.stop();
});

/**
 * Start a server. `settings` go into postgresql.conf (e.g. `{ synchronous_commit: 'off' }`).
 * Throws when PostgreSQL is unavailable (postgresUnavailable says why) or does not start.
 */
export async function startPostgres(opts: { settings?: Record<string, string | number>; socket?: boolean } = {}): Promise<PgServer> {
  const b = postgresBinaries();
  if ('absent' in b) throw new Error(b.absent);
  const who = runAs();
  if ('absent' in who) throw new Error(who.absent);
  const dir = mkdtempSync(join(tmpdir(), 'switchyard-pg-'));
  if (who.uid !== undefined) chownSync(dir, who.uid, who.gid!);
  const data = join(dir, 'data');
  const logFile = join(dir, 'server.log');
  const as: SpawnSyncOptions = {
    cwd: dir,
    encoding: 'utf8',
    ...(who.uid !== undefined ? { uid: who.uid, gid: who.gid } : {}),
    env: { ...process.env, LC_ALL: 'C' },
  };
  const run = (cmd: string, args: string[]) => {
    const r = spawnSync(cmd.startsWith('/') ? cmd : join(b.bin, cmd), args, as);
    if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} failed (${r.status ?? r.signal}): ${r.stderr || r.stdout || r.error}`);
    return String(r.stdout);
  };
  const cleanup = () => rmSync(dir, { recursive: true, force: true });
  try {
    const template = initializedCluster(b.bin, who, run, data);
    if (template !== data) run('/bin/cp', ['-a', template, data]);
  } catch (e) {
    cleanup();
    throw e;
  }
  // TCP on 127.0.0.1, trust for that address alone; and the socket in the folder, when asked for.
  const socketDir = opts.socket ? join(dir, 's') : undefined;
  if (socketDir) {
    mkdirSync(socketDir);
    if (who.uid !== undefined) chownSync(socketDir, who.uid, who.gid!);
  }
  writeFileSync(join(data, 'pg_hba.conf'), `host all all 127.0.0.1/32 trust\n${socketDir ? 'local all all trust\n' : ''}`);
  const version = run('pg_ctl', ['--version']).trim();
  for (let tries = 0; ; tries++) {
    const port = await freePortOutsideEphemeral();
    const conf: Record<string, string | number> = {
      port,
      listen_addresses: "'127.0.0.1'",
      unix_socket_directories: socketDir ? `'${socketDir}'` : "''",
      max_connections: 50,
      ...opts.settings,
    };
    appendFileSync(
      join(data, 'postgresql.conf'),
      Object.entries(conf)
        .map(([k, v]) => `${k} = ${v}\n`)
        .join(''),
    );
    try {
      run('pg_ctl', ['-D', data, '-l', logFile, '-w', '-t', '30', 'start']);
    } catch (e) {
      const log = existsSync(logFile) ? readFileSync(logFile, 'utf8') : '';
      if (tries < 2 && /could not bind|Address already in use/.test(log)) continue; // the port was taken in between
      cleanup();
      throw new Error(`${(e as Error).message}\n${log}`);
    }
    let stopped = false;
    const server: PgServer = {
      url: `postgres://postgres@127.0.0.1:${port}/postgres`,
      host: '127.0.0.1',
      port,
      user: 'postgres',
      database: 'postgres',
      version,
      dir,
      ...(socketDir ? { socketDir } : {}),
      log: () => (existsSync(logFile) ? readFileSync(logFile, 'utf8') : ''),
      restart() {
        run('pg_ctl', ['-D', data, '-l', logFile, '-m', 'fast', '-w', '-t', '30', 'restart']);
      },
      halt() {
        run('pg_ctl', ['-D', data, '-l', logFile, '-m', 'fast', '-w', '-t', '30', 'stop']);
      },
      start() {
        run('pg_ctl', ['-D', data, '-l', logFile, '-w', '-t', '30', 'start']);
      },
      freeze() {
        signalTree(Number(readFileSync(join(data, 'postmaster.pid'), 'utf8').split('\n')[0]), 'SIGSTOP');
      },
      thaw() {
        signalTree(Number(readFileSync(join(data, 'postmaster.pid'), 'utf8').split('\n')[0]), 'SIGCONT');
      },
      stop() {
        if (stopped) return;
        stopped = true;
        running.delete(server);
        spawnSync(join(b.bin, 'pg_ctl'), ['-D', data, '-m', 'immediate', '-w', 'stop'], as);
        cleanup();
      },
    };
    running.add(server);
    return server;
  }
}

/**
 * A cluster that initdb made once, copied for each server: initdb costs about 0.6 s of CPU and a
 * copy 0.06 (measured), and the suite starts dozens of servers on two busy cores. One template per
 * account and initdb binary (its path, size and time), in the temp folder; made in a private folder
 * and renamed into place, so servers started together never see half of one.
 *
 * The temp folder is shared and the template's name can be worked out by anyone: one that is not a
 * folder of the account the servers run as, closed to everyone else, may have been planted (its
 * postgresql.conf runs commands as that account). It is not used, nor replaced: the server gets a
 * cluster of its own, from initdb, as before there was a template.
 */
export function initializedCluster(
  bin: string,
  who: { uid?: number; gid?: number; name: string },
  run: (cmd: string, args: string[]) => string,
  data: string,
  root = tmpdir(),
): string {
  const owner = who.uid ?? process.getuid?.();
  const initdb = statSync(join(bin, 'initdb'));
  const key = createHash('sha256').update(`${bin} ${initdb.size} ${initdb.mtimeMs} ${owner}`).digest('hex').slice(0, 16);
  const template = join(root, `switchyard-pg-template-${key}`);
  const trusted = () => {
    const st = lstatSync(template, { throwIfNoEntry: false });
    if (!st) return undefined;
    return st.isDirectory() && (owner === undefined || st.uid === owner) && (st.mode & 0o077) === 0 && existsSync(join(template, 'PG_VERSION'));
  };
  const initialize = (into: string) => run('initdb', ['-D', into, '-U', 'postgres', '-A', 'trust', '-E', 'UTF8', '--no-sync', '--no-instructions']);
  let found = trusted();
  if (found === undefined) {
    const work = mkdtempSync(join(root, 'switchyard-pg-initdb-'));
    if (who.uid !== undefined) chownSync(work, who.uid, who.gid!);
    const made = join(work, 'data');
    try {
      initialize(made);
      try {
        renameSync(made, template);
      } catch {
        // Another server's start made it first (ENOTEMPTY, EEXIST), or something else is there.
      }
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
    found = trusted();
  }
  if (!found) {
    initialize(data);
    return data;
  }
  return template;
}

/** A process and its children (the postmaster's backends). */
function signalTree(pid: number, signal: NodeJS.Signals): void {
  const children = spawnSync('pgrep', ['-P', String(pid)], { encoding: 'utf8' })
    .stdout.split('\n')
    .filter(Boolean)
    .map(Number);
  process.kill(pid, signal);
  for (const c of children) {
    try {
      process.kill(c, signal);
    } catch (e) {
      // A backend that was exiting when listed (a zombie the postmaster reaps once continued) is gone.
      if ((e as NodeJS.ErrnoException).code !== 'ESRCH') throw e;
    }
  }
}

/**
 * A server for this test, stopped after it; undefined (and the test skipped, with the reason) when
 * PostgreSQL is not available here.
 */
export async function postgresFor(t: TestContext, opts?: Parameters<typeof startPostgres>[0]): Promise<PgServer | undefined> {
  const why = postgresUnavailable();
  if (why) {
    t.skip(why);
    return undefined;
  }
  const server = await startPostgres(opts);
  t.after(() => server.stop());
  return server;
}

/**
 * One SQL text run synchronously with psql (tests' set-up that cannot wait: a database per test,
 * made where a configuration is made); answers the rows as psql's unaligned text.
 */
export function adminSql(url: string, sql: string): string {
  const b = postgresBinaries();
  const psql = 'bin' in b ? join(b.bin, 'psql') : 'psql';
  // On standard input, so that SQL and a meta-command (\\gexec) may be mixed.
  const r = spawnSync(psql, ['-X', '-q', '-tA', '-v', 'ON_ERROR_STOP=1', '-d', url, '-f', '-'], { encoding: 'utf8', input: sql });
  if (r.status !== 0) throw new Error(`psql failed on ${sql.slice(0, 60)}: ${r.stderr || r.error?.message}`);
  return r.stdout.trim();
}
