/**
 * The invocation log API, declared once (src/schema): the queries log-routes.ts validates, and the
 * answers /openapi.json describes. The answer's shape is invocation-view.ts's interface (the
 * browser console and the CLI share that without this file); the check at the end fails to
 * type-check when the two drift apart.
 */
import { array, dateTime, named, nullable, number, object, string, type Infer } from '../schema/index.ts';
import { pageQuery, text, timeQuery, trueOrFalse } from '../http/params.ts';
import type { InvocationView } from './invocation-view.ts';

export const invocationSchema = named(
  'InvocationView',
  object({
    requestId: string({ description: 'the x-request-id of its answer' }),
    integration: string(),
    installationId: nullable(string()),
    eventType: string({ description: 'fetch, ui_render or the platform event type' }),
    eventId: nullable(string()),
    status: number({ integer: true }),
    outcome: string({ description: 'ok, http_error (status >= 400 without a fault), or the fault: exception, limit, crash, load' }),
    durationMs: number(),
    cpuMs: number(),
    error: nullable(
      object({ kind: string(), message: string(), limit: nullable(string({ description: 'the sandbox limit it broke' })), stack: nullable(string()) }),
    ),
    logs: array(object({ time: dateTime(), level: string(), message: string() })),
    createdAt: dateTime(),
    cursor: string({ description: 'pass as `after` to GET /api/v1/logs/stream to resume after this invocation' }),
  }),
);

const errorsQuery = trueOrFalse('only invocations that failed: a fault (exception, limit, crash, load) or a 5xx answer');
const rendersQuery = trueOrFalse(
  'false: leave out ui_render invocations (each render of a component, e.g. a console page view, and the events.ui_render handler run it calls)',
);

export const logsQuery = object({
  integration: text('integration name'),
  installation: text('installation id'),
  event: text('event id: the invocations of its handlers'),
  errors: errorsQuery,
  renders: rendersQuery,
  since: timeQuery('recorded since'),
  until: timeQuery('recorded until'),
  ...pageQuery,
});

export const invocationListSchema = object({ invocations: array(invocationSchema), nextCursor: nullable(string()) });

// The answer's shape and invocation-view.ts's interface are one: each must be assignable to the other.
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
type Assert<T extends true> = T;
export type SchemasMatchViews = [Assert<Same<Infer<typeof invocationSchema>, InvocationView>>];
