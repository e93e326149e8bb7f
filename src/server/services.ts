/**
 * What the running server is made of. Modules are started in order by startServer (server.ts) and
 * stopped in reverse; each may add routes and attach its public face to the services object.
 */
import type { H3 } from 'h3';
import type { HttpServices } from '../http/app.ts';
import type { OpenApiPart } from '../http/openapi.ts';
import type { ProcessLink } from '../process/serving.ts';

export interface Services extends HttpServices {
  /** Isolates run in this process rather than in a sandbox worker process (see startServer). */
  sandboxInProcess?: boolean;
  /** Set in a serving process beside others, under the supervisor (src/process/serving.ts). */
  processes?: ProcessLink;
  /** Capabilities attached by modules as they start (see each module's index.ts). */
  [capability: string]: unknown;
}

export interface Module {
  name: string;
  /** Start background work and attach capabilities; the returned function stops it (bounded). */
  start?(services: Services): void | Promise<void | (() => Promise<void> | void)>;
  /** Add HTTP routes (called after every module started). */
  routes?(app: H3, services: Services): void;
  /** The paths of the routes this module adds, and the schemas they refer to (merged into GET /openapi.json). */
  openapi?: OpenApiPart;
}
