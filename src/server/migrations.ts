/**
 * Every module's migrations, in dependency order. A module owns its tables; add its list here.
 * This sits above the modules (beside modules.ts): the store below them runs what it is handed.
 */
import type { ModuleMigrations } from '../store/index.ts';
import { installationsMigrations } from '../installations/schema.ts';
import { runtimeMigrations } from '../runtime/schema.ts';
import { oauthMigrations } from '../oauth/schema.ts';
import { webhooksMigrations } from '../webhooks/schema.ts';
import { eventsMigrations } from '../events/schema.ts';
import { consoleMigrations } from '../console/schema.ts';

export function allMigrations(): ModuleMigrations[] {
  return [installationsMigrations, runtimeMigrations, oauthMigrations, webhooksMigrations, eventsMigrations, consoleMigrations];
}
