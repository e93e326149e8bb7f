/**
 * The server's modules, in start order. A module adds routes and background work; see Module in
 * services.ts.
 */
import type { Module } from './services.ts';
import { registryModule } from './registry/index.ts';
import { webhooksModule } from './webhooks/index.ts';
import { eventsModule } from './events/index.ts';

export const modules: Module[] = [registryModule, webhooksModule, eventsModule];
