/**
 * The start line: where the server answers, where its console is and where the admin token is kept.
 * It is the first thing `serve` says once it listens (the integrations load after it), in plain
 * words on a terminal and as the `switchyard serving` record in JSON logs. The URL is also recorded
 * in <data_dir>/run/server-url, so the CLI finds a server whose port was chosen at start
 * (`server.port: 0`).
 */
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { LoadedConfig } from '../config/index.ts';
import type { Logger } from '../log/index.ts';
import { ADMIN_TOKEN_FILE } from './auth.ts';
import { displayStoreUrl } from '../store/postgres/url.ts';

export interface Serving {
  /** The public URL, with the port the server got. */
  url: string;
  /** The console's page (…/console/). */
  console: string;
  /** Serving processes under the supervisor; absent for a single process. */
  processes?: number;
  /** The certificate served with server.tls. */
  tls?: { names: string; subject: string; validTo: string };
}

/** Where the admin token is: a path or the config key, never the token itself. */
export function adminCredential(config: LoadedConfig): string {
  return config.admin_token ? 'admin_token in config.yaml' : join(config.data_dir, ADMIN_TOKEN_FILE);
}

export function announceServing(log: Logger, config: LoadedConfig, s: Serving): void {
  const credential = adminCredential(config);
  const fields = {
    url: s.url,
    console: s.console,
    ...(s.processes ? { processes: s.processes } : {}),
    // Not named like a secret: the log redacts those, and this says where the token is, not what.
    admin_credential: credential,
    data_dir: config.data_dir,
    // Where the state is: the SQLite file under data_dir, or the PostgreSQL database (no credentials).
    store: config.store ? displayStoreUrl(config.store) : 'sqlite',
    config: config.source ?? '(embedded defaults)',
    ...(s.tls ? { tls: { cert: config.server.tls.cert, names: s.tls.names || s.tls.subject, valid_to: s.tls.validTo } } : {}),
  };
  const token = config.admin_token ? 'the admin_token of config.yaml' : `the admin token in ${credential}`;
  const text =
    `Switchyard serving ${s.url}${s.processes ? ` (${s.processes} processes)` : ''}. ` +
    `Console: ${s.console} (log in with ${token}). Config: ${fields.config}` +
    (config.store ? `. Store: ${fields.store}` : '') +
    (s.tls ? `. TLS: ${config.server.tls.cert} (${s.tls.names || s.tls.subject}, valid until ${s.tls.validTo.slice(0, 10)})` : '');
  if (log.notice) log.notice(text, 'switchyard serving', fields);
  else log.info('switchyard serving', fields);
}

export function servingUrlFile(dataDir: string): string {
  return join(dataDir, 'run', 'server-url');
}

/** Record the URL the server listens on (it may have chosen its port), for the CLI. */
export function recordServingUrl(dataDir: string, url: string): void {
  try {
    mkdirSync(join(dataDir, 'run'), { recursive: true, mode: 0o700 });
    writeFileSync(servingUrlFile(dataDir), `${url}\n`);
  } catch {
    /* only a convenience for the CLI: SWITCHYARD_URL still works */
  }
}

export function forgetServingUrl(dataDir: string): void {
  try {
    rmSync(servingUrlFile(dataDir), { force: true });
  } catch {
    /* a stale URL only makes the CLI say the server is not running there */
  }
}

/** The URL the running (or last) server recorded, if any. */
export function recordedServingUrl(dataDir: string): string | undefined {
  try {
    const url = readFileSync(servingUrlFile(dataDir), 'utf8').trim();
    return /^https?:\/\//.test(url) ? url : undefined;
  } catch {
    return undefined;
  }
}
