/**
 * The server's modules, in start order (the composition root). A module adds routes and background
 * work; see Module in src/module/contract.ts.
 */
import type { Module } from '../module/contract.ts';
import { sandboxModule } from '../sandbox/index.ts';
import { registryModule } from '../registry/index.ts';
import { installationsModule } from '../installations/index.ts';
import { runtimeModule } from '../runtime/index.ts';
import { oauthModule } from '../oauth/index.ts';
import { webhooksModule } from '../webhooks/index.ts';
import { eventsModule } from '../events/index.ts';
import { consoleModule } from '../console/index.ts';
import { inspectionModule } from '../inspection/index.ts';
import { metricsModule } from '../metrics/index.ts';
import { retentionModule } from '../retention/index.ts';

export const modules: Module[] = [
  sandboxModule,
  registryModule,
  installationsModule,
  webhooksModule,
  // After the runtime: handler runs owed from before this start go out as soon as events starts.
  runtimeModule,
  eventsModule,
  oauthModule,
  inspectionModule,
  metricsModule,
  retentionModule,
  consoleModule,
];
