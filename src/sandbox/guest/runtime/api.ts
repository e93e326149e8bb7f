/**
 * context.api: a small client for the platform's management API. The host performs every request
 * against `environment.apiEndpoint` with `Authorization: Bearer <installation token, else
 * integration token>` and refuses any other origin; the token never has to be handled here.
 *
 * Paths are relative to apiEndpoint (`installations/inst_1` -> `<apiEndpoint>/installations/inst_1`);
 * a path that already starts with the endpoint's own path (`/api/v1/...`) is used as is.
 */
import { callHost } from '../bridge.ts';
import { gitbookNamespaces } from './gitbook-api.ts';

export class APIError extends Error {
  readonly status: number;
  readonly body: unknown;
  constructor(message: string, status: number, body: unknown) {
    super(message);
    this.name = 'APIError';
    this.status = status;
    this.body = body;
  }
  /** The status under the name GitBook's client uses. */
  get code(): number {
    return this.status;
  }
}

export interface APIClient {
  /** Send one request; resolves with the parsed JSON answer (null when empty), throws APIError on 4xx/5xx. */
  request<T = any>(method: string, path: string, body?: unknown): Promise<T>;
  installations: {
    get<T = any>(id: string): Promise<T>;
    /** PATCH installations/<id> (e.g. `{ configuration: {...} }`: the server merges configuration keys). */
    update<T = any>(id: string, body: unknown): Promise<T>;
  };
  /**
   * GitBook's `api.createInstallationClient(integration, installationId)`: a client that acts as
   * one installation of the integration, for code running with the integration's token.
   */
  createInstallationClient(integration: string, installationId: string): Promise<APIClient>;
  /** The API this client talks to (`environment.apiEndpoint`), as GitBook's client has it. */
  endpoint: string;
  userAgent: string;
  /** GitBook's API client shape (`api.integrations.updateIntegrationInstallation(...)` ...): see gitbook-api.ts. */
  [namespace: string]: any;
}

interface ApiResult {
  status: number;
  body: string;
}

/**
 * Which token the host sends: by default the installation's (else the integration's);
 * `as: 'integration'` the integration's (context.integration.api); `token` one the API minted for
 * this invocation (an installation client). The host refuses any token it did not hand out.
 */
export interface ClientOptions {
  as?: 'integration';
  token?: string;
  environment?: Record<string, any>;
}

export function createAPIClient(opts: ClientOptions = {}): APIClient {
  async function request<T>(method: string, path: string, body?: unknown): Promise<T> {
    const r = await callHost<ApiResult>('api', {
      method: String(method).toUpperCase(),
      path: String(path),
      body: body === undefined ? null : JSON.stringify(body),
      ...(opts.as ? { as: opts.as } : {}),
      ...(opts.token ? { token: opts.token } : {}),
    });
    let parsed: unknown = null;
    if (r.body) {
      try {
        parsed = JSON.parse(r.body);
      } catch {
        parsed = r.body;
      }
    }
    if (r.status >= 400) {
      const e = (parsed as { error?: { message?: string; code?: string; hint?: string } | string } | null)?.error;
      const detail =
        typeof e === 'string'
          ? e
          : e?.message
            ? `${e.code ? `${e.code}: ` : ''}${e.message}${e.hint ? ` (${e.hint})` : ''}`
            : typeof parsed === 'string'
              ? parsed.slice(0, 300)
              : '';
      throw new APIError(`API ${String(method).toUpperCase()} ${path} answered ${r.status}${detail ? `: ${detail}` : ''}`, r.status, parsed);
    }
    return parsed as T;
  }
  const env = opts.environment ?? {};
  const namespaces = gitbookNamespaces(request);
  return {
    request,
    installations: {
      get: (id) => request('GET', `installations/${encodeURIComponent(id)}`),
      update: (id, body) => request('PATCH', `installations/${encodeURIComponent(id)}`, body),
    },
    async createInstallationClient(integration: string, installationId: string): Promise<APIClient> {
      const { data } = await (namespaces.integrations as any).createIntegrationInstallationToken(integration, installationId);
      return createAPIClient({ token: data.token, environment: env });
    },
    endpoint: typeof env.apiEndpoint === 'string' ? env.apiEndpoint : '',
    userAgent: `integration-${env.integration?.name ?? 'unknown'}/${env.integration?.version ?? '0'}`,
    ...namespaces,
  };
}
