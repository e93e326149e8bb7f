/**
 * The invocation log API (admin token), declared with route() (schemas in api.ts): `GET
 * /api/v1/logs` (filters, newest first, cursor) and `GET /api/v1/logs/:requestId`. The live feed,
 * `GET /api/v1/logs/stream`, is the inspection module's. Shapes are documented in
 * docs/inspection.md and used by `switchyard logs`: keep them stable.
 */
import type { H3 } from 'h3';
import { SwitchyardError } from '../errors.ts';
import { route } from '../http/route.ts';
import type { ServicesWith } from '../module/contract.ts';
import { invocationListSchema, invocationSchema, logsQuery } from './api.ts';

export function logRoutes(app: H3, services: ServicesWith<'invocations'>): void {
  const invocations = () => services.invocations;

  route(
    app,
    {
      method: 'GET',
      path: '/api/v1/logs',
      summary:
        'Invocations of integration code, newest first: what it printed, how it ended. Live: GET /api/v1/logs/stream (server-sent events, see docs/inspection.md).',
      auth: 'admin',
      query: logsQuery,
      response: invocationListSchema,
    },
    ({ query }) => invocations().list(query),
  );

  route(
    app,
    {
      method: 'GET',
      path: '/api/v1/logs/:requestId',
      summary: 'One invocation by its request id (the x-request-id of its answer)',
      auth: 'admin',
      params: { requestId: 'the x-request-id of its answer' },
      response: invocationSchema,
      responses: { '404': { description: 'no such invocation' } },
    },
    async ({ params }) => {
      const id = params.requestId;
      const found = await invocations().get(id);
      if (!found)
        throw new SwitchyardError('not_found', `no invocation ${id}`, {
          hint: 'request ids are in the x-request-id header of each answer and in `switchyard logs`',
        });
      return found;
    },
  );
}
