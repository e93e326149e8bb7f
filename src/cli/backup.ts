/**
 * `switchyard backup <file>` and `switchyard restore <file>`: the data directory's database as one
 * consistent file, taken while the server runs, and put back while it is stopped.
 *
 * The backup uses SQLite's online backup (better-sqlite3's `db.backup`) from a read-only
 * connection: WAL mode lets the server keep writing meanwhile, and the copy is one snapshot (every
 * event with its deliveries, every attempt with its delivery's state). Copying the file with `cp`
 * instead can tear a write in half, or miss what still sits in the -wal file.
 *
 * Restore takes the data directory's lock (so it refuses while a server runs), checks that the file
 * is a sound Switchyard database no newer than this program, keeps the current database beside it
 * (`switchyard.db.before-restore-<time>`) and puts the backup in its place.
 */
import Database from 'better-sqlite3';
import { defineCommand } from 'citty';
import { chmodSync, copyFileSync, existsSync, realpathSync, renameSync, rmSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { SwitchyardError } from '../errors.ts';
import { allMigrations } from '../server/migrations.ts';
import { DB_FILE, openStore } from '../store/index.ts';
import { acquireLock } from '../store/lock.ts';
import { configArg, configFrom, jsonArg } from './common.ts';
import { printJson } from './table.ts';

const out = (s: string) => process.stdout.write(s);

/** Row counts a person can compare between the live database and its backup. */
function counts(db: Database.Database): Record<string, number> {
  const tables = new Set(db.prepare<[], { name: string }>("SELECT name FROM sqlite_master WHERE type = 'table'").all().map((r) => r.name));
  const out: Record<string, number> = {};
  for (const t of ['installations', 'events', 'webhook_deliveries', 'webhook_attempts', 'invocations'])
    if (tables.has(t)) out[t] = (db.prepare(`SELECT count(*) AS n FROM ${t}`).get() as { n: number }).n;
  return out;
}

/** What a file must be to be restored: an intact SQLite database made by Switchyard, no newer than this program. */
function checkBackup(file: string): Record<string, number> {
  let db: Database.Database;
  try {
    db = new Database(file, { readonly: true, fileMustExist: true });
  } catch (e) {
    throw new SwitchyardError('bad_request', `${file} cannot be opened as a database: ${(e as Error).message}`, { where: file });
  }
  try {
    let problem: string;
    try {
      problem = String(db.pragma('integrity_check', { simple: true }));
    } catch (e) {
      problem = (e as Error).message;
    }
    if (problem !== 'ok') throw new SwitchyardError('bad_request', `${file} is not an intact SQLite database: ${problem}`, { where: file });
    const hasVersions = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'").get();
    if (!hasVersions) throw new SwitchyardError('bad_request', `${file} is a SQLite database but not a Switchyard one (no schema_migrations table)`, { where: file });
    const known = new Map(allMigrations().map((m) => [m.module, m.steps.length]));
    for (const r of db.prepare<[], { module: string; version: number }>('SELECT module, version FROM schema_migrations').all()) {
      const ours = known.get(r.module);
      if (ours !== undefined && r.version > ours)
        throw new SwitchyardError('bad_request', `${file} was written by a newer Switchyard (${r.module} schema ${r.version}, this program knows ${ours})`, {
          where: file,
          hint: 'restore it with the version that made it, or upgrade this one',
        });
    }
    return counts(db);
  } finally {
    db.close();
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
    const dest = resolve(String(args.file));
    // Never over the live database or its journals, --force or not: the server keeps writing to
    // the file it has open, and those writes would be lost under the copy.
    const live = join(resolve(config.data_dir), DB_FILE);
    const sameFile = (a: string, b: string) => existsSync(a) && existsSync(b) && realpathSync(a) === realpathSync(b);
    if ([live, `${live}-wal`, `${live}-shm`].some((f) => f === dest || sameFile(f, dest)))
      throw new SwitchyardError('bad_request', `${dest} is the live database (or its journal)`, { where: dest, hint: 'write the backup outside the data directory' });
    if (existsSync(dest) && !args.force) throw new SwitchyardError('conflict', `${dest} exists`, { where: dest, hint: 'choose another file, or pass --force to replace it' });
    if (!existsSync(dirname(dest))) throw new SwitchyardError('bad_request', `the folder ${dirname(dest)} does not exist`, { where: dest });
    const store = openStore(config.data_dir, { readonly: true });
    const started = performance.now();
    const temp = `${dest}.partial-${process.pid}`;
    try {
      await store.db.backup(temp);
      chmodSync(temp, 0o600);
      // One self-contained file: out of WAL mode, so opening it makes no -wal/-shm beside it.
      const copy = new Database(temp);
      copy.pragma('journal_mode = DELETE');
      copy.close();
      renameSync(temp, dest); // a reader never sees half a backup under the final name
    } catch (e) {
      rmSync(temp, { force: true });
      throw new SwitchyardError('storage_failed', `backup to ${dest} failed: ${(e as Error).message}`, { where: dest, cause: e });
    } finally {
      store.close();
    }
    const rows = checkBackup(dest);
    const report = { file: dest, bytes: statSync(dest).size, durationMs: Math.round(performance.now() - started), rows };
    if (args.json) return printJson(report);
    out(`backed up ${store.file} to ${dest} (${report.bytes} bytes, ${report.durationMs} ms): ${Object.entries(rows).map(([t, n]) => `${n} ${t}`).join(', ')}\n`);
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
    const source = resolve(String(args.file));
    if (!existsSync(source)) throw new SwitchyardError('not_found', `no file ${source}`, { where: source });
    const rows = checkBackup(source);
    const lock = acquireLock(config.data_dir); // refuses while a server holds the data directory
    try {
      const live = join(config.data_dir, DB_FILE);
      // The copy first, beside the database: a full disk or a kill stops it with the database
      // untouched (a stray .restoring-<pid> file at worst). Only then the swap, two renames.
      const temp = `${live}.restoring-${process.pid}`;
      try {
        copyFileSync(source, temp);
        chmodSync(temp, 0o600);
      } catch (e) {
        rmSync(temp, { force: true });
        throw new SwitchyardError('storage_failed', `could not copy ${source} into ${config.data_dir}: ${(e as Error).message}; the database is unchanged`, { where: source, cause: e });
      }
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
      out(`restored ${source} into ${live}: ${Object.entries(rows).map(([t, n]) => `${n} ${t}`).join(', ')}\n`);
      if (kept) out(`the database it replaced is kept as ${kept}\n`);
      out('start the server: deliveries that were due or in flight when the backup was taken are sent again (at least once)\n');
    } finally {
      lock.release();
    }
  },
});

export { backup, restore };
