/**
 * Every module's migrations, in dependency order. A module owns its tables; add its list here.
 */
import type { ModuleMigrations } from './index.ts';
import { webhooksMigrations } from '../webhooks/schema.ts';
import { eventsMigrations } from '../events/schema.ts';

export function allMigrations(): ModuleMigrations[] {
  return [webhooksMigrations, eventsMigrations];
}
