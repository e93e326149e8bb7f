/**
 * `switchyard store copy --to postgres://…`: the data directory's SQLite database copied into an
 * empty PostgreSQL database, every table and row as it is, verified by counts (src/store/copy.ts).
 * The SQLite file is opened read-only and read in one transaction: a server may keep running on it,
 * and what it writes after the copy began is not in the copy.
 */
import { defineCommand } from 'citty';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { SwitchyardError } from '../errors.ts';
import { allMigrations } from '../server/migrations.ts';
import { copyStore, type CopyReport } from '../store/copy.ts';
import { DB_FILE, openStore, connectStore, type Store } from '../store/index.ts';
import { displayStoreUrl, readStoreUrl } from '../store/postgres/url.ts';
import { configArg, configFrom, jsonArg } from './common.ts';
import { createProgress, type Progress } from './progress.ts';
import { printJson, table } from './table.ts';

const out = (s: string) => process.stdout.write(s);

const URL_HINT = 'postgres://user:password@host:5432/database (the database must exist and be empty: CREATE DATABASE switchyard)';

/** The target URL, checked without ever repeating it (it may hold a password). */
function targetUrl(given: string | undefined): string {
  const url = given ?? process.env.DATABASE_URL;
  if (!url)
    throw new SwitchyardError('bad_request', 'say which PostgreSQL database to copy into: --to postgres://…', {
      where: '--to',
      hint: `${URL_HINT}; or set DATABASE_URL`,
    });
  const where = given === undefined ? 'DATABASE_URL' : '--to';
  const read = readStoreUrl(url);
  if (!read.ok)
    throw new SwitchyardError(
      'bad_request',
      `${where} must be a postgres:// URL that PostgreSQL's parsers read alike: it ${read.problem} (the value is not repeated here: it may hold a password)`,
      { where, hint: `${read.hint}; ${URL_HINT}` },
    );
  return url;
}

const rate = (rows: number, ms: number) => (ms > 0 ? Math.round((rows * 1000) / ms) : rows);

const copy = defineCommand({
  meta: {
    name: 'copy',
    description: "Copy the data directory's SQLite database into an empty PostgreSQL database, verified by row counts",
  },
  args: {
    to: {
      type: 'string',
      description: 'the PostgreSQL database to copy into, postgres://user:password@host:5432/database (default $DATABASE_URL)',
      valueHint: 'url',
    },
    ...configArg,
    ...jsonArg,
  },
  async run({ args }) {
    const url = targetUrl(args.to);
    const config = configFrom(args);
    const name = displayStoreUrl(url);
    const file = join(resolve(config.data_dir), DB_FILE);
    if (!existsSync(file))
      throw new SwitchyardError('not_found', `no SQLite database at ${file}`, {
        where: file,
        hint: 'store copy reads the data_dir of the configuration (--config); point it at the configuration whose data you are moving',
      });

    const source = openStore(config.data_dir, { readonly: true });
    // The target's schema is made by the same migrations a server runs; the folder openStore wants
    // for a data directory is a throwaway one (nothing is written into the real one).
    const scratch = mkdtempSync(join(tmpdir(), 'switchyard-copy-'));
    let target: Store | undefined;
    let bar: Progress | undefined;
    let report: CopyReport;
    try {
      target = await connectStore(scratch, { url, migrations: allMigrations() });
      let current = '';
      report = await copyStore(source, target, {
        migrations: allMigrations(),
        targetName: name,
        progress: args.json
          ? undefined
          : (t, done, total) => {
              if (t !== current) {
                bar?.end();
                bar = createProgress(total, t);
                current = t;
              }
              bar!.update(done);
            },
      });
    } finally {
      bar?.end();
      await target?.close();
      await source.close();
      rmSync(scratch, { recursive: true, force: true });
    }
    if (args.json)
      return printJson({ tables: report.tables.map((t) => ({ name: t.name, source: t.source, copied: t.copied, mapped: t.mapped })), ms: report.ms });
    const rows = report.tables.reduce((n, t) => n + t.copied, 0);
    out(
      `${table(
        ['table', 'source', 'copied'],
        report.tables.map((t) => [t.name, t.source, t.copied]),
      )}\n`,
    );
    out(`copied ${rows} rows from ${source.file} into ${name} in ${report.ms} ms (${rate(rows, report.ms)} rows/s); every table's count matches\n`);
    // Older versions stored a NUL on SQLite as it came (a receiver's answer, say); PostgreSQL's text cannot hold one.
    for (const t of report.tables.filter((t) => t.mapped))
      out(
        `${t.name}: ${t.mapped} text value${t.mapped === 1 ? '' : 's'} held a NUL character, which PostgreSQL cannot store: copied with U+FFFD in its place, as the server stores such text now\n`,
      );
    out(
      "what a running server writes after the copy began is not in it: stop the server before the copy you switch over with, then set `store:` in config.yaml to this database's URL\n",
    );
  },
});

export default defineCommand({
  meta: { name: 'store', description: 'Work on the store itself: copy a SQLite data directory into PostgreSQL' },
  subCommands: { copy },
});
