/**
 * What the running server is made of. Modules are started in order by src/http/server.ts and
 * stopped in reverse; each may add routes and attach its public face to the services object.
 */
import type { H3 } from 'h3';
import type { LoadedConfig } from './config/index.ts';
import type { Logger } from './log/index.ts';
import type { Store } from './store/index.ts';
import type { ProcessLink } from './process/serving.ts';

export interface Services {
  config: LoadedConfig;
  log: Logger;
  store: Store;
  adminToken: string;
  startedAt: number;
  /** Set once shutdown begins: workers stop taking new work. */
  closing: boolean;
  /** Isolates run in this process rather than in a sandbox worker process (see startServer). */
  sandboxInProcess?: boolean;
  /** Set in a serving process beside others, under the supervisor (src/process/serving.ts). */
  processes?: ProcessLink;
  /**
   * Resolves once the HTTP server listens and its start line is said: start-up work whose log lines
   * should come after that line (loading the integrations) waits for it.
   */
  listening?: Promise<void>;
  /** Capabilities attached by modules as they start (see each module's index.ts). */
  [capability: string]: unknown;
}

export interface Module {
  name: string;
  /** Start background work and attach capabilities; the returned function stops it (bounded). */
  start?(services: Services): void | Promise<void | (() => Promise<void> | void)>;
  /** Add HTTP routes (called after every module started). */
  routes?(app: H3, services: Services): void;
  /** OpenAPI path items of the routes this module adds (merged into GET /openapi.json). */
  openapi?: Record<string, unknown>;
}
