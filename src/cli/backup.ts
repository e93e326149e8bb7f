/**
 * `switchyard backup <file>` and `switchyard restore <file>`: the data directory's database as one
 * consistent file, taken while the server runs, and put back while it is stopped. SQLite's alone:
 * with `store:` naming PostgreSQL both refuse and point at PostgreSQL's own tools.
 *
 * The backup is `VACUUM INTO` from a read-only connection: one read transaction, so the copy is
 * one snapshot (every event with its deliveries, every attempt with its delivery's state) while WAL
 * mode lets the server keep writing. SQLite's online backup API restarts at every commit another
 * connection makes, so on a busy server it might never finish. Copying the file with `cp` instead
 * can tear a write in half, or miss what still sits in the -wal file.
 *
 * The copy is written in a folder of its own beside the destination (mkdtemp: mode 0700, a name
 * nobody could plant a symlink at beforehand), into a file created empty with mode 0600 before
 * SQLite writes a byte, and renamed into place once whole. A failure, Ctrl-C or SIGTERM removes
 * the folder; only SIGKILL can leave it (`.<name>.partial-XXXXXX`, still owner-only).
 *
 * Restore takes the data directory's lock (so it refuses while a server runs), copies the file
 * into a private folder beside the database, checks that copy is a sound Switchyard database no
 * newer than this program, keeps the current database beside it
 * (`switchyard.db.before-restore-<time>`) and puts the copy in its place. The source is never
 * opened by SQLite: a WAL database copied with its -wal is copied with it and folded there (what
 * the check counts is what is restored), and nothing is created beside the source.
 *
 * Both take regular files only. A backup never replaces anything else, --force or not: renamed
 * over a device node it would become one (`backup /dev/null --force` made the machine's /dev/null
 * a regular file holding the database), and over a symlink it would replace the link, not the file
 * it names. A restore refuses a source that is not a regular file (a FIFO, a device) before it
 * opens it: open() of a FIFO waits for a writer, in a call no signal interrupts.
 */
import Database from 'better-sqlite3';
import { defineCommand } from 'citty';
import {
  closeSync,
  constants,
  existsSync,
  fstatSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readSync,
  realpathSync,
  renameSync,
  rmSync,
  statSync,
  writeSync,
  type Stats,
} from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { SwitchyardError } from '../errors.ts';
import { allMigrations } from '../server/migrations.ts';
import { DB_FILE, openStore } from '../store/index.ts';
import { acquireLock } from '../store/lock.ts';
import { vacuumInto } from '../store/sqlite-backup.ts';
import { configArg, configFrom, jsonArg } from './common.ts';
import { printJson } from './table.ts';

const out = (s: string) => process.stdout.write(s);

/**
 * Until `release`, Ctrl-C and SIGTERM run `cleanup` and exit (130, 143). Node runs signal handlers
 * between steps, never inside a SQLite call: `between()` is such a point, before anything is
 * renamed into place.
 */
function cleanupOnSignal(what: string, cleanup: () => void): { between(): Promise<void>; release(): void } {
  const stop = (signal: NodeJS.Signals) => {
    cleanup();
    process.stderr.write(`${what} stopped by ${signal}: nothing was written\n`);
    process.exit(signal === 'SIGINT' ? 130 : 143);
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
  const turn = () => new Promise<void>((r) => setImmediate(r));
  return {
    // Two turns of the event loop: the second comes after a poll phase, where a signal that
    // arrived during a synchronous call is read.
    between: () => turn().then(turn),
    release() {
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
    },
  };
}

/** Row counts a person can compare between the live database and its backup. */
function counts(db: Database.Database): Record<string, number> {
  const tables = new Set(
    db
      .prepare<[], { name: string }>("SELECT name FROM sqlite_master WHERE type = 'table'")
      .all()
      .map((r) => r.name),
  );
  const out: Record<string, number> = {};
  for (const t of ['installations', 'events', 'webhook_deliveries', 'webhook_attempts', 'invocations'])
    if (tables.has(t)) out[t] = (db.prepare(`SELECT count(*) AS n FROM ${t}`).get() as { n: number }).n;
  return out;
}

/**
 * What a file must be to be restored: an intact SQLite database made by Switchyard, no newer than
 * this program. `file` is opened; problems name `shown` (the file the operator gave).
 */
function checkBackup(file: string, shown = file): Record<string, number> {
  let db: Database.Database;
  try {
    db = new Database(file, { readonly: true, fileMustExist: true });
  } catch (e) {
    throw new SwitchyardError('bad_request', `${shown} cannot be opened as a database: ${(e as Error).message}`, { where: shown });
  }
  try {
    let problem: string;
    try {
      problem = String(db.pragma('integrity_check', { simple: true }));
    } catch (e) {
      problem = (e as Error).message;
    }
    if (problem !== 'ok') throw new SwitchyardError('bad_request', `${shown} is not an intact SQLite database: ${problem}`, { where: shown });
    const hasVersions = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'").get();
    if (!hasVersions)
      throw new SwitchyardError('bad_request', `${shown} is a SQLite database but not a Switchyard one (no schema_migrations table)`, { where: shown });
    const known = new Map(allMigrations().map((m) => [m.module, m.steps.length]));
    for (const r of db.prepare<[], { module: string; version: number }>('SELECT module, version FROM schema_migrations').all()) {
      const ours = known.get(r.module);
      if (ours !== undefined && r.version > ours)
        throw new SwitchyardError('bad_request', `${shown} was written by a newer Switchyard (${r.module} schema ${r.version}, this program knows ${ours})`, {
          where: shown,
          hint: 'restore it with the version that made it, or upgrade this one',
        });
    }
    return counts(db);
  } finally {
    db.close();
  }
}

/** What a file system entry is, for a message: "a FIFO (named pipe)", "a folder"... */
function kindOf(st: Stats): string {
  if (st.isFile()) return 'a regular file';
  if (st.isDirectory()) return 'a folder';
  if (st.isSymbolicLink()) return 'a symlink';
  if (st.isFIFO()) return 'a FIFO (named pipe)';
  if (st.isCharacterDevice()) return 'a character device';
  if (st.isBlockDevice()) return 'a block device';
  if (st.isSocket()) return 'a socket';
  return 'not a regular file';
}

/**
 * Where `backup` may write: a name that holds nothing, or (with --force) a regular file. The entry
 * itself is looked at (lstat): a symlink is refused too, whatever it points to.
 */
function checkBackupTarget(dest: string, force: boolean): void {
  let st: Stats;
  try {
    st = lstatSync(dest);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw new SwitchyardError('bad_request', `${dest} cannot be looked at: ${(e as Error).message}`, { where: dest });
  }
  if (!st.isFile())
    throw new SwitchyardError('bad_request', `${dest} is ${kindOf(st)}: a backup only ever replaces a regular file`, {
      where: dest,
      hint: st.isSymbolicLink()
        ? 'give the path of the file itself (or a new name): a backup replaces no symlink'
        : 'give the path of a new file, or of an earlier backup to replace with --force',
    });
  if (!force) throw new SwitchyardError('conflict', `${dest} exists`, { where: dest, hint: 'choose another file, or pass --force to replace it' });
}

/** A file `restore` reads: a regular file (through symlinks), looked at before anything opens it. */
function checkRestoreSource(file: string, shown: string): void {
  const st = statSync(file);
  if (!st.isFile())
    throw new SwitchyardError('bad_request', `${file} is ${kindOf(st)}, not a file written by \`switchyard backup\``, {
      where: shown,
      hint: 'give the path of a backup file (a regular file); copy it off a pipe or device first',
    });
}

/**
 * A byte-for-byte copy of a regular file into a new file of mode 0600. The source is opened
 * without waiting (O_NONBLOCK: a FIFO swapped in after the check does not hold the open) and
 * checked again on the descriptor before a byte is read.
 */
function copyRegular(source: string, target: string, shown: string): void {
  const from = openSync(source, constants.O_RDONLY | constants.O_NONBLOCK);
  try {
    const st = fstatSync(from);
    if (!st.isFile()) throw new SwitchyardError('bad_request', `${source} is ${kindOf(st)}, not a file written by \`switchyard backup\``, { where: shown });
    const to = openSync(target, 'wx', 0o600);
    try {
      const buffer = Buffer.allocUnsafe(1 << 20);
      for (let n; (n = readSync(from, buffer, 0, buffer.length, null)) > 0; ) for (let done = 0; done < n; ) done += writeSync(to, buffer, done, n - done);
    } finally {
      closeSync(to);
    }
  } finally {
    closeSync(from);
  }
}

/**
 * `source` as one self-contained database file at `temp` (in a private folder of `dataDir`). The file and its
 * journal, a -wal with rows not yet checkpointed or a hot -journal, are copied byte for byte and
 * opened there, where SQLite replays or rolls back and the result is folded out of WAL mode. The
 * source itself is never opened by SQLite, which would make a -shm (or -wal) beside it.
 */
function copyWhole(source: string, temp: string, dataDir: string): void {
  try {
    for (const suffix of ['', '-wal', '-journal']) if (suffix === '' || existsSync(source + suffix)) copyRegular(source + suffix, temp + suffix, source);
  } catch (e) {
    if (e instanceof SwitchyardError) throw e;
    throw new SwitchyardError('storage_failed', `could not copy ${source} into ${dataDir}: ${(e as Error).message}; the database is unchanged`, {
      where: source,
      cause: e,
    });
  }
  try {
    const db = new Database(temp, { fileMustExist: true });
    try {
      db.pragma('wal_checkpoint(TRUNCATE)');
      db.pragma('journal_mode = DELETE');
    } finally {
      db.close();
    }
  } catch (e) {
    const code = String((e as { code?: unknown }).code ?? '');
    if (code.startsWith('SQLITE_FULL') || code.startsWith('SQLITE_IOERR'))
      throw new SwitchyardError('storage_failed', `could not copy ${source} into ${dataDir}: ${(e as Error).message}; the database is unchanged`, {
        where: source,
        cause: e,
      });
    throw new SwitchyardError('bad_request', `${source} cannot be opened as a database: ${(e as Error).message}`, { where: source });
  }
}

const backup = defineCommand({
  meta: { name: 'backup', description: 'Write a consistent copy of the database to <file>, while the server runs or not (mode 0600: it holds secrets)' },
  args: {
    file: { type: 'positional', description: 'Where to write the backup', required: true },
    force: { type: 'boolean', description: 'Replace <file> if it exists' },
    ...configArg,
    ...jsonArg,
  },
  async run({ args }) {
    const config = configFrom(args);
    if (config.store)
      throw new SwitchyardError('bad_request', 'backup copies the SQLite file; this configuration keeps its store in PostgreSQL', {
        where: 'store',
        hint: "use PostgreSQL's own tools: pg_dump -Fc (docs/postgres.md, Backups)",
      });
    const dest = resolve(String(args.file));
    // Never over the live database or its journals, --force or not: the server keeps writing to
    // the file it has open, and those writes would be lost under the copy.
    const live = join(resolve(config.data_dir), DB_FILE);
    const sameFile = (a: string, b: string) => existsSync(a) && existsSync(b) && realpathSync(a) === realpathSync(b);
    if ([live, `${live}-wal`, `${live}-shm`].some((f) => f === dest || sameFile(f, dest)))
      throw new SwitchyardError('bad_request', `${dest} is the live database (or its journal)`, {
        where: dest,
        hint: 'write the backup outside the data directory',
      });
    checkBackupTarget(dest, Boolean(args.force));
    if (!existsSync(dirname(dest))) throw new SwitchyardError('bad_request', `the folder ${dirname(dest)} does not exist`, { where: dest });
    const store = openStore(config.data_dir, { readonly: true });
    const started = performance.now();
    let folder: string | undefined;
    const removeFolder = () => folder && rmSync(folder, { recursive: true, force: true });
    const signals = cleanupOnSignal('backup', removeFolder);
    try {
      folder = mkdtempSync(join(dirname(dest), `.${basename(dest)}.partial-`));
      const temp = join(folder, 'backup.db');
      closeSync(openSync(temp, 'wx', 0o600));
      // VACUUM INTO writes into an empty file, and writes it out of WAL mode: one self-contained
      // file, which opening makes no -wal/-shm beside (store/sqlite-backup.ts).
      vacuumInto(store, temp);
      await signals.between();
      renameSync(temp, dest); // a reader never sees half a backup under the final name
    } catch (e) {
      throw new SwitchyardError('storage_failed', `backup to ${dest} failed: ${(e as Error).message}`, { where: dest, cause: e });
    } finally {
      signals.release();
      removeFolder();
      store.close();
    }
    const rows = checkBackup(dest);
    const report = { file: dest, bytes: statSync(dest).size, durationMs: Math.round(performance.now() - started), rows };
    if (args.json) return printJson(report);
    out(
      `backed up ${store.file} to ${dest} (${report.bytes} bytes, ${report.durationMs} ms): ${Object.entries(rows)
        .map(([t, n]) => `${n} ${t}`)
        .join(', ')}\n`,
    );
    out(`keep it as safe as the data directory: it holds webhook signing secrets and OAuth tokens\n`);
  },
});

const restore = defineCommand({
  meta: { name: 'restore', description: 'Replace the database with a backup (the server must be stopped); the current one is kept beside it' },
  args: {
    file: { type: 'positional', description: 'A file written by `switchyard backup`', required: true },
    ...configArg,
    ...jsonArg,
  },
  async run({ args }) {
    const config = configFrom(args);
    if (config.store)
      throw new SwitchyardError('bad_request', 'restore replaces the SQLite file; this configuration keeps its store in PostgreSQL', {
        where: 'store',
        hint: "use PostgreSQL's own tools: pg_restore (docs/postgres.md, Backups)",
      });
    const source = resolve(String(args.file));
    if (!existsSync(source)) throw new SwitchyardError('not_found', `no file ${source}`, { where: source });
    // Before the lock and before anything is opened: the journals beside it are copied too.
    for (const suffix of ['', '-wal', '-journal']) if (suffix === '' || existsSync(source + suffix)) checkRestoreSource(source + suffix, source);
    mkdirSync(config.data_dir, { recursive: true, mode: 0o700 });
    const lock = acquireLock(config.data_dir); // refuses while a server holds the data directory
    let folder: string | undefined;
    const removeFolder = () => folder && rmSync(folder, { recursive: true, force: true });
    const signals = cleanupOnSignal('restore', removeFolder);
    try {
      const live = join(config.data_dir, DB_FILE);
      // The copy first, beside the database: a full disk or a kill stops it with the database
      // untouched. Only then the swap, two renames.
      folder = mkdtempSync(join(config.data_dir, '.restoring-'));
      const temp = join(folder, DB_FILE);
      copyWhole(source, temp, config.data_dir);
      const rows = checkBackup(temp, source);
      await signals.between();
      let kept: string | null = null;
      if (existsSync(live)) {
        // Fold the WAL into the file first, so the kept copy is whole on its own.
        const db = new Database(live);
        db.pragma('wal_checkpoint(TRUNCATE)');
        db.close();
        kept = `${live}.before-restore-${new Date().toISOString().replace(/[:.]/g, '-')}`;
        renameSync(live, kept);
      }
      for (const f of [`${live}-wal`, `${live}-shm`]) rmSync(f, { force: true });
      renameSync(temp, live);
      const report = { restored: source, database: live, previous: kept, rows };
      if (args.json) return printJson(report);
      out(
        `restored ${source} into ${live}: ${Object.entries(rows)
          .map(([t, n]) => `${n} ${t}`)
          .join(', ')}\n`,
      );
      if (kept) out(`the database it replaced is kept as ${kept}\n`);
      out('start the server: deliveries that were due or in flight when the backup was taken are sent again (at least once)\n');
    } finally {
      signals.release();
      removeFolder();
      lock.release();
    }
  },
});

export { backup, restore };
