/**
 * Each module's migration steps past its recorded version, one transaction per module, on either
 * engine: `schema_migrations` is the same table on both, and `stepsOf` picks the module's steps for
 * the engine at hand (a database is one engine's, so each numbers its own).
 */
import type Database from 'better-sqlite3';
import { SwitchyardError } from '../errors.ts';

export function applySteps<M extends { module: string }>(db: Database.Database, modules: M[], stepsOf: (m: M) => string[], tooNewHint: string): void {
  db.exec(`CREATE TABLE IF NOT EXISTS schema_migrations (
    module TEXT PRIMARY KEY, version INTEGER NOT NULL, applied_at TEXT NOT NULL)`);
  const get = db.prepare('SELECT version FROM schema_migrations WHERE module = ?');
  const set = db.prepare(
    `INSERT INTO schema_migrations (module, version, applied_at) VALUES (?, ?, ?)
     ON CONFLICT(module) DO UPDATE SET version = excluded.version, applied_at = excluded.applied_at`,
  );
  for (const m of modules) {
    const steps = stepsOf(m);
    const current = (get.get(m.module) as { version: number } | undefined)?.version ?? 0;
    if (current > steps.length)
      throw new SwitchyardError('schema_too_new', `the database's ${m.module} schema (v${current}) is newer than this program knows (v${steps.length})`, {
        hint: tooNewHint,
      });
    if (current === steps.length) continue;
    db.transaction(() => {
      for (let v = current; v < steps.length; v++) db.exec(steps[v]);
      set.run(m.module, steps.length, new Date().toISOString());
    })();
  }
}
