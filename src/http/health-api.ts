/**
 * The answers of GET /healthz and GET /readyz, declared once (src/schema) for /openapi.json.
 * `startupSchema` is also the registry's `startup` in GET /api/v1/integrations.
 */
import { array, boolean, nullable, number, object, oneOf, optional, record, string, named } from '../schema/index.ts';

const whole = (description?: string) => number({ integer: true, description });

export const startupSchema = named(
  'Startup',
  object(
    {
      ready: boolean({ description: 'every integration folder present at start was tried' }),
      loaded: whole('integrations serving'),
      failed: whole('folders that failed and serve nothing'),
      done: whole('folders tried so far'),
      total: whole('folders present at start'),
      ms: whole('how long the start-up load took (so far)'),
    },
    { description: 'The start-up load of the answering process: integrations are loaded while the server already listens' },
  ),
);

export const healthSchema = named(
  'Health',
  object({
    ok: boolean({ description: 'alive: the store reads and writes, not shutting down' }),
    ready: boolean({ description: 'ok, and every integration loaded in every serving process' }),
    version: string(),
    uptime_s: whole(),
    store: oneOf(['ok', 'failing', 'unavailable']),
    store_error: optional(
      object(
        { code: string(), message: string(), since: string(), hint: string() },
        { description: 'while writes to the store fail: what failed, since when, and what to do' },
      ),
    ),
    status: oneOf(['starting', 'serving', 'shutting_down']),
    integrations: optional(startupSchema),
    processes: optional(object({ count: whole(), ready: boolean() })),
    nodes: optional(
      object(
        {
          node: string(),
          count: whole(),
          differ: array(object({ integration: string(), here: nullable(string()), others: record(nullable(string())) })),
        },
        { description: 'on a PostgreSQL store: this node, the live nodes on the store, and integrations whose versions differ between them' },
      ),
    ),
  }),
);
