/**
 * JSON answers as srvx's FastResponse with a string body: written to the socket in one go. The
 * WHATWG `Response.json()` gives a stream body, which the node adapter pipes chunk by chunk
 * (measured on GET /healthz: ~35 % of the request's CPU went to that stream and its writes).
 */
import { FastResponse } from 'srvx';

export function jsonResponse(data: unknown, init: { status?: number; headers?: ConstructorParameters<typeof Headers>[0] } = {}): Response {
  const headers = new Headers(init.headers);
  if (!headers.has('content-type')) headers.set('content-type', 'application/json;charset=UTF-8');
  return new FastResponse(JSON.stringify(data), { status: init.status, headers }) as unknown as Response;
}
