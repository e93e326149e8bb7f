/**
 * The server's modules (the composition root). A module adds routes and background work; see Module
 * in src/module/contract.ts. Their order here does not matter: startServer starts each after the
 * modules that provide what it needs or uses (startOrder in src/module/capabilities.ts); this order
 * only breaks ties.
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
  runtimeModule,
  eventsModule,
  oauthModule,
  inspectionModule,
  metricsModule,
  retentionModule,
  consoleModule,
];
