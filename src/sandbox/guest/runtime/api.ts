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
  /** GitBook's API client shape (`api.integrations.updateIntegrationInstallation(...)` ...): see gitbook-api.ts. */
  [namespace: string]: any;
}

interface ApiResult {
  status: number;
  body: string;
}

export function createAPIClient(): APIClient {
  async function request<T>(method: string, path: string, body?: unknown): Promise<T> {
    const r = await callHost<ApiResult>('api', {
      method: String(method).toUpperCase(),
      path: String(path),
      body: body === undefined ? null : JSON.stringify(body),
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
        typeof e === 'string' ? e : e?.message ? `${e.code ? `${e.code}: ` : ''}${e.message}${e.hint ? ` (${e.hint})` : ''}` : typeof parsed === 'string' ? parsed.slice(0, 300) : '';
      throw new APIError(`API ${String(method).toUpperCase()} ${path} answered ${r.status}${detail ? `: ${detail}` : ''}`, r.status, parsed);
    }
    return parsed as T;
  }
  return {
    request,
    installations: {
      get: (id) => request('GET', `installations/${encodeURIComponent(id)}`),
      update: (id, body) => request('PATCH', `installations/${encodeURIComponent(id)}`, body),
    },
    ...gitbookNamespaces(request),
  };
}

