/**
 * The public endpoints' path (the hot one: benchmarked): a request to an installation's or the
 * integration's own public endpoint is handed to the integration's `fetch`, and its answer leaves
 * with the public-answer headers: written to the socket by the public lane (http/public-lane.ts), or
 * by the app as a FastResponse (toResponse).
 */
import { STATUS_CODES } from 'node:http';
import { FastResponse } from 'srvx';
import { SwitchyardError } from '../errors.ts';
import type { Installation } from '../installations/index.ts';
import type { LoadedIntegration } from '../registry/index.ts';
import type { Envelope, InvocationResult } from '../sandbox/index.ts';
import { headerOf, type PublicAnswer, type PublicRequest } from '../http/public-lane.ts';
import type { Invoke } from './invoke.ts';
import { runnable } from './runnable.ts';
import type { RuntimeDeps } from './service-deps.ts';

const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'upgrade', 'proxy-connection', 'te', 'trailer', 'content-length']);

/** An invocation's answer as it leaves: no hop-by-hop header of the guest's, the request's id. */
export function answerOf(result: Pick<InvocationResult, 'status' | 'headers' | 'body'>, requestId: string): PublicAnswer {
  const headers: Array<[string, string]> = [];
  for (const h of result.headers) {
    const name = h[0].toLowerCase();
    if (!HOP_BY_HOP.has(name) && name !== 'x-request-id') headers.push(h);
  }
  headers.push(['x-request-id', requestId]);
  const nullBody = result.status === 204 || result.status === 304 || (result.status >= 100 && result.status < 200);
  return { status: result.status, headers, body: nullBody ? null : result.body };
}

/** An answer as the app sends it. */
export function responseOf(a: PublicAnswer): Response {
  // A header list and the body bytes as they are: srvx writes them to the socket directly, where a
  // standard Response would be read back through a body stream (~10 us per request).
  return new FastResponse(a.body, { status: a.status, statusText: STATUS_CODES[a.status], headers: a.headers });
}

export function toResponse(result: InvocationResult, requestId: string): Response {
  return responseOf(answerOf(result, requestId));
}

export function createPublicFetch(
  deps: Pick<RuntimeDeps, 'installations' | 'publicAnswerHeaders'>,
  run: {
    invoke: Invoke;
    environmentFor: (integration: LoadedIntegration, installation?: Installation) => Record<string, unknown>;
    loaded: (name: string) => Promise<LoadedIntegration>;
    /** The integration if it is loaded with a script now (what `loaded` would answer at once), else undefined. */
    loadedNow: (name: string) => LoadedIntegration | undefined;
  },
) {
  const { invoke, environmentFor, loaded, loadedNow } = run;

  /** Hand an HTTP request to the integration's `fetch`; the answer leaves with the public-answer headers. */
  async function runFetch(integration: LoadedIntegration, installation: Installation | undefined, req: PublicRequest, body: Uint8Array): Promise<PublicAnswer> {
    // Built on first read: in the serving process the guest's code reads it only if it uses
    // context.environment (or calls the API), which a plain fetch handler need not.
    let environment: Record<string, unknown> | undefined;
    const envelope: Envelope = {
      event: { type: 'fetch', request: { method: req.method, url: req.url, headers: req.headers } },
      get environment() {
        return (environment ??= environmentFor(integration, installation));
      },
      ...(body.byteLength ? { fetchBody: body } : {}),
    };
    const { id, result } = await invoke({ integration, installation, envelope, recordLater: true });
    return answerOf(deps.publicAnswerHeaders ? { ...result, headers: deps.publicAnswerHeaders(result.headers, headerOf(req, 'origin')) } : result, id);
  }

  return {
    /** A public-endpoint request: any method and sub-path, handed to the integration's fetch. */
    async fetchPublic(integrationName: string, installationId: string, req: PublicRequest, body: Uint8Array): Promise<PublicAnswer> {
      // Without waiting when the copy in memory is known fresh this turn (most of a busy turn's requests).
      const installation = deps.installations.findNow(installationId) ?? (await deps.installations.find(installationId));
      if (!installation || installation.integration !== integrationName)
        throw new SwitchyardError('not_found', `no installation ${installationId} of integration "${integrationName}"`);
      runnable(installation);
      const integration = loadedNow(integrationName) ?? (await loaded(integrationName));
      return runFetch(integration, installation, req, body);
    },

    /**
     * A request to the integration's own public endpoint: fetch with no installation, and the
     * integration-wide token (GitBook's shape). An OAuth callback there finds its installation in
     * the state it consumes, as on GitBook, and stores the credentials with that token.
     */
    async fetchIntegration(integrationName: string, req: PublicRequest, body: Uint8Array): Promise<PublicAnswer> {
      return runFetch(loadedNow(integrationName) ?? (await loaded(integrationName)), undefined, req, body);
    },
  };
}
