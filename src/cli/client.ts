/**
 * The CLI's client of the management API: base URL from config (server.public_url; with
 * `server.port: 0` the URL the running server recorded in <data_dir>/run/server-url), admin token
 * from config or <data_dir>/admin-token. When the server is not running it says so in one line.
 */
import { readFileSync } from 'node:fs';
import { getCACertificates, setDefaultCACertificates } from 'node:tls';
import { errorCodeOf, SwitchyardError } from '../errors.ts';
import type { LoadedConfig } from '../config/index.ts';
import { adminTokenFile, resolveAdminToken } from '../http/auth.ts';
import { recordedServingUrl, servingUrlFile } from '../http/announce.ts';

export interface ApiClient {
  baseUrl: string;
  request<T = any>(method: string, path: string, body?: unknown, query?: Record<string, string | number | boolean | undefined>): Promise<T>;
  get<T = any>(path: string, query?: Record<string, string | number | boolean | undefined>): Promise<T>;
  post<T = any>(path: string, body?: unknown): Promise<T>;
  patch<T = any>(path: string, body?: unknown): Promise<T>;
  delete<T = any>(path: string): Promise<T>;
  /** A raw fetch against the server with the admin token (streams, non-JSON). */
  raw(path: string, init?: RequestInit): Promise<Response>;
}

export function apiClient(config: LoadedConfig, opts: { url?: string; token?: string } = {}): ApiClient {
  // `server.port: 0`: the port is chosen at start; the running server records its URL.
  const portAtStart = !opts.url && !process.env.SWITCHYARD_URL && !config.server.public_url && config.server.port === 0;
  const recorded = portAtStart ? recordedServingUrl(config.data_dir) : undefined;
  const baseUrl = (opts.url ?? process.env.SWITCHYARD_URL ?? recorded ?? config.publicUrl).replace(/\/+$/, '');
  const token = opts.token ?? process.env.SWITCHYARD_ADMIN_TOKEN ?? resolveAdminToken(config);
  // Where the token was read from, for a refusal (never the token itself).
  const tokenFrom =
    opts.token !== undefined
      ? 'the token given to the command'
      : process.env.SWITCHYARD_ADMIN_TOKEN !== undefined
        ? 'SWITCHYARD_ADMIN_TOKEN'
        : config.admin_token
          ? `admin_token in ${config.source ?? 'the configuration'}`
          : adminTokenFile(config.data_dir);
  if (baseUrl.startsWith('https:')) trustServerCertificate(config.server.tls.cert);

  async function raw(path: string, init: RequestInit = {}): Promise<Response> {
    if (portAtStart && !recorded)
      throw new SwitchyardError(
        'server_unreachable',
        `server.port is 0 in ${config.source ?? 'the configuration'}: the server picks its port when it starts, and no running server recorded one in ${servingUrlFile(config.data_dir)}`,
        {
          hint: 'start it with `switchyard serve`; or point the CLI at a server with SWITCHYARD_URL=http://127.0.0.1:<port> (its start line shows the URL), or set a fixed server.port',
        },
      );
    if (!token)
      throw new SwitchyardError('unauthorized', `no admin token: admin_token is empty and ${config.data_dir}/admin-token does not exist`, {
        hint: 'start the server once (it generates the token), or set SWITCHYARD_ADMIN_TOKEN',
      });
    try {
      return await fetch(`${baseUrl}${path}`, {
        ...init,
        headers: { authorization: `Bearer ${token}`, ...(init.headers as Record<string, string>) },
      });
    } catch (e) {
      const refused = certificateProblem(e);
      if (refused)
        throw new SwitchyardError('server_unreachable', `the server at ${baseUrl} answered with a certificate this command does not trust (${refused})`, {
          hint: "a certificate a private CA issued: NODE_EXTRA_CA_CERTS=<that CA's PEM file>; a name it does not cover: point SWITCHYARD_URL (or server.public_url) at a name it does",
          cause: e,
        });
      const where = recorded ? ` (the URL its last start recorded in ${servingUrlFile(config.data_dir)})` : '';
      throw new SwitchyardError('server_unreachable', `the switchyard server is not running at ${baseUrl}${where}`, {
        hint: 'start it with `switchyard serve` (or point --config / SWITCHYARD_URL at the right server)',
        cause: e,
      });
    }
  }

  async function request<T>(method: string, path: string, body?: unknown, query?: Record<string, string | number | boolean | undefined>): Promise<T> {
    const qs = query
      ? new URLSearchParams(
          Object.entries(query)
            .filter(([, v]) => v !== undefined && v !== '')
            .map(([k, v]) => [k, String(v)] as [string, string]),
        ).toString()
      : '';
    const res = await raw(`${path}${qs ? `?${qs}` : ''}`, {
      method,
      headers: body === undefined ? {} : { 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    let parsed: any;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      parsed = text;
    }
    if (!res.ok) {
      const err = parsed?.error;
      if (res.status === 401 && err?.code === 'unauthorized')
        throw new SwitchyardError('unauthorized', `the server at ${baseUrl} refused the admin token read from ${tokenFrom}`, {
          hint:
            tokenFrom === 'SWITCHYARD_ADMIN_TOKEN'
              ? "set SWITCHYARD_ADMIN_TOKEN to that server's admin token (its <data_dir>/admin-token, or admin_token of its config.yaml), or unset it to read this configuration's"
              : "this is another server's token: run the command with that server's config.yaml (--config), or set SWITCHYARD_ADMIN_TOKEN to its token (its <data_dir>/admin-token)",
        });
      throw new SwitchyardError(errorCodeOf(err?.code, res.status), err?.message ?? `${method} ${path} answered ${res.status}`, {
        hint: err?.hint,
        where: err?.where,
        problems: err?.problems,
      });
    }
    return parsed as T;
  }

  return {
    baseUrl,
    request,
    get: (p, q) => request('GET', p, undefined, q),
    post: (p, b) => request('POST', p, b ?? {}),
    patch: (p, b) => request('PATCH', p, b ?? {}),
    delete: (p) => request('DELETE', p),
    raw,
  };
}

let trusted: string | undefined;

/**
 * With server.tls the CLI also trusts the certificates in the server's own cert file: a self-signed
 * certificate works without more setup. One a CA issued is checked against the system's CAs, as
 * any; one a private CA issued needs that CA (NODE_EXTRA_CA_CERTS).
 */
function trustServerCertificate(file: string): void {
  if (!file || trusted === file) return;
  trusted = file;
  let certs: string[];
  try {
    certs = readFileSync(file, 'utf8').match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
  } catch {
    return; // not readable by this user: the system's CAs only
  }
  if (certs.length) setDefaultCACertificates([...getCACertificates('default'), ...certs]);
}

/** The reason when a request failed on the server's certificate (fetch wraps it in its cause). */
function certificateProblem(e: unknown): string | undefined {
  for (let c = e as { code?: unknown; message?: unknown; cause?: unknown } | undefined, i = 0; c && i < 5; c = c.cause as typeof c, i++) {
    const code = typeof c.code === 'string' ? c.code : '';
    if (/CERT|SELF_SIGNED|ERR_TLS_|UNABLE_TO_(GET|VERIFY)/.test(code)) return `${code}: ${String(c.message)}`;
  }
  return undefined;
}
