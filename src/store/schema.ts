/**
 * Every module's migrations, in dependency order. A module owns its tables; add its list here.
 */
import type { ModuleMigrations } from './index.ts';

export function allMigrations(): ModuleMigrations[] {
  return [];
}
