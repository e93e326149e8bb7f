/**
 * Each module's migration steps past its recorded version, one transaction per module, on either
 * engine: `schema_migrations` is the same table on both, and `stepsOf` picks the module's steps for
 * the engine at hand (a database is one engine's, so each numbers its own).
 */
import type Database from 'better-sqlite3';
import { SwitchyardError } from '../errors.ts';
import type { Session } from './postgres/pool.ts';

const CREATE = `CREATE TABLE IF NOT EXISTS schema_migrations (
    module TEXT PRIMARY KEY, version INTEGER NOT NULL, applied_at TEXT NOT NULL)`;
const VERSION = 'SELECT version FROM schema_migrations WHERE module = ?';
const SET = `INSERT INTO schema_migrations (module, version, applied_at) VALUES (?, ?, ?)
     ON CONFLICT(module) DO UPDATE SET version = excluded.version, applied_at = excluded.applied_at`;

/** The steps of `steps` past `current` (none when up to date); refused when the database is newer. */
function pending(module: string, steps: string[], current: number, tooNewHint: string): string[] {
  if (current > steps.length)
    throw new SwitchyardError('schema_too_new', `the database's ${module} schema (v${current}) is newer than this program knows (v${steps.length})`, {
      hint: tooNewHint,
    });
  return steps.slice(current);
}

export function applySteps<M extends { module: string }>(db: Database.Database, modules: M[], stepsOf: (m: M) => string[], tooNewHint: string): void {
  db.exec(CREATE);
  const get = db.prepare(VERSION);
  const set = db.prepare(SET);
  for (const m of modules) {
    const steps = stepsOf(m);
    const todo = pending(m.module, steps, (get.get(m.module) as { version: number } | undefined)?.version ?? 0, tooNewHint);
    if (!todo.length) continue;
    db.transaction(() => {
      for (const step of todo) db.exec(step);
      set.run(m.module, steps.length, new Date().toISOString());
    })();
  }
}

/** As applySteps, on a PostgreSQL session (postgres/pool.ts): one transaction per module. */
export async function applyStepsOn<M extends { module: string }>(
  session: Session,
  modules: M[],
  stepsOf: (m: M) => string[],
  tooNewHint: string,
): Promise<void> {
  const numbered = (sql: string) =>
    sql.replace(
      /\?/g,
      (() => {
        let n = 0;
        return () => `$${++n}`;
      })(),
    );
  await session.query(CREATE);
  for (const m of modules) {
    const steps = stepsOf(m);
    const [row] = await session.query<{ version: number }>(numbered(VERSION), [m.module]);
    const todo = pending(m.module, steps, row?.version ?? 0, tooNewHint);
    if (!todo.length) continue;
    await session.query('BEGIN');
    try {
      for (const step of todo) await session.query(step);
      await session.query(numbered(SET), [m.module, steps.length, new Date().toISOString()]);
      await session.query('COMMIT');
    } catch (e) {
      await session.query('ROLLBACK').catch(() => {});
      throw e;
    }
  }
}
