/**
 * The one error type a user can hit. `code` is stable and machine-readable, `message` says what is
 * wrong, `hint` says what to do, `where` says where (file:line:col for files, a field path for data).
 * `status` is the HTTP status when the error crosses the management API: the code's, from ERROR_CODES.
 */

/**
 * Every error code, with its one HTTP status and, for the command line, whether it means "you asked
 * wrongly" (`usage`: exit code 2) rather than "it failed" (exit code 1). Codes met only at start-up
 * or in the CLI carry 500, what they would answer if they ever crossed the API. docs/operations.md
 * lists each one (test/errors.test.ts holds the two together, and checks every code src/ uses is here).
 */
export const ERROR_CODES = {
  config_invalid: { status: 500, usage: true },
  data_dir_unwritable: { status: 500, usage: true },
  data_dir_locked: { status: 500, usage: true },
  /** The database was written by a newer program (its schema version is beyond this one's). */
  schema_too_new: { status: 500, usage: true },
  /** No folder the executable can unpack its native addons into. */
  cache_unwritable: { status: 500, usage: true },
  port_in_use: { status: 500, usage: true },
  listen_failed: { status: 500, usage: true },
  /** server.tls names a certificate or key that cannot serve (missing, unreadable, not PEM, not a pair). */
  tls_invalid: { status: 500, usage: true },
  /** A process that runs isolates was started without --no-node-snapshot (src/sandbox/node-snapshot.ts). */
  node_options_invalid: { status: 500, usage: true },
  /** A module needs a capability no module of the server provides (see src/module/capabilities.ts). */
  capability_missing: { status: 500 },
  /** The modules of a server need each other to start first (see startOrder in src/module/capabilities.ts). */
  module_cycle: { status: 500 },
  bad_request: { status: 400, usage: true },
  validation_failed: { status: 400, usage: true },
  /** The webhook integration is installed into the organization, never on a space or site (spec 5.5). */
  webhook_organization_only: { status: 400, usage: true },
  unauthorized: { status: 401 },
  /** An install link that was altered, or was not made by this server. */
  install_link_invalid: { status: 401, usage: true },
  /** An install link past its expiry. */
  install_link_expired: { status: 401, usage: true },
  /** An install link made before its integration's links were revoked. */
  install_link_revoked: { status: 401, usage: true },
  forbidden: { status: 403 },
  /** A private integration of another organization than the server's, installed without the admin token (spec 2.5). */
  integration_private: { status: 403, usage: true },
  /** An unlisted integration installed without its own install link (spec 2.5). */
  install_link_required: { status: 403, usage: true },
  not_found: { status: 404 },
  /** No route for this method and path. */
  no_route: { status: 404 },
  conflict: { status: 409 },
  /** The installation is uninstalled: it existed, and will not come back. */
  gone: { status: 410 },
  payload_too_large: { status: 413 },
  /** The request line and headers are past the server's limit (Node's maxHeaderSize). */
  headers_too_large: { status: 431 },
  unsupported_media_type: { status: 415 },
  too_many_requests: { status: 429 },
  internal: { status: 500 },
  not_implemented: { status: 501 },
  /** The installation is paused: its public endpoint answers again once it is resumed. */
  paused: { status: 503 },
  /** The server is starting and has not loaded what the request needs yet (Retry-After). */
  starting: { status: 503 },
  /** The web console's browser bundle cannot be served. */
  console_unavailable: { status: 503 },
  storage_read_only: { status: 503 },
  storage_busy: { status: 503 },
  storage_failed: { status: 503 },
  /** The store's database cannot be reached or did not answer in time (PostgreSQL): retry later. */
  storage_unavailable: { status: 503 },
  storage_full: { status: 507 },
  /** The CLI found no server at the configured URL. */
  server_unreachable: { status: 500 },
} as const satisfies Record<string, { status: number; usage?: true }>;

export type ErrorCode = keyof typeof ERROR_CODES;

export function isErrorCode(code: unknown): code is ErrorCode {
  return typeof code === 'string' && Object.hasOwn(ERROR_CODES, code);
}

/** "You asked wrongly" (exit code 2), not "it failed" (exit code 1). */
export function isUsageError(code: ErrorCode): boolean {
  return 'usage' in ERROR_CODES[code];
}

/**
 * The code of an error answer from a server: its own when this program knows it, else (a newer
 * server's) the first code of its 4xx status, bad_request for another 4xx, internal for a 5xx.
 */
export function errorCodeOf(code: unknown, status: number): ErrorCode {
  if (isErrorCode(code)) return code;
  if (status >= 500) return 'internal';
  return (Object.keys(ERROR_CODES) as ErrorCode[]).find((c) => ERROR_CODES[c].status === status) ?? 'bad_request';
}

export interface Problem {
  /** Field path (`webhooks.timeout`) or file position (`integrations/x/platform-manifest.yaml:3:5`). */
  where: string;
  message: string;
  hint?: string;
  /** Warnings do not fail validation; they are reported alongside errors. */
  severity?: 'error' | 'warning';
  /** The problem is only an unset environment variable (this one): the folder needs configuration, not fixing. */
  needsEnv?: string;
}

export class SwitchyardError extends Error {
  readonly code: ErrorCode;
  readonly hint?: string;
  readonly where?: string;
  readonly status: number;
  readonly problems: Problem[];
  /** Response headers when the error crosses the management API (e.g. Retry-After). */
  readonly headers?: Record<string, string>;
  /**
   * The command line exits 2 for this one whatever its code's default: the operator must fix
   * something before running the command again (`serve` on a full disk: storage_full, else 1).
   */
  readonly usage?: true;

  constructor(
    code: ErrorCode,
    message: string,
    opts: { hint?: string; where?: string; problems?: Problem[]; cause?: unknown; headers?: Record<string, string>; usage?: true } = {},
  ) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = 'SwitchyardError';
    this.code = code;
    this.hint = opts.hint;
    this.where = opts.where;
    this.status = ERROR_CODES[code].status;
    this.problems = opts.problems ?? [];
    this.headers = opts.headers;
    if (opts.usage) this.usage = true;
  }

  /** The JSON error shape of the management API. */
  toJSON(): { error: { code: ErrorCode; message: string; hint?: string; where?: string; problems?: Problem[] } } {
    return {
      error: {
        code: this.code,
        message: this.message,
        ...(this.hint ? { hint: this.hint } : {}),
        ...(this.where ? { where: this.where } : {}),
        ...(this.problems.length ? { problems: this.problems } : {}),
      },
    };
  }
}

/** One line per problem, for terminals: `where: message (hint)`. */
export function formatProblems(problems: Problem[]): string {
  return problems.map((p) => `  ${p.severity === 'warning' ? 'warning' : 'error'} ${p.where}: ${p.message}${p.hint ? `\n    hint: ${p.hint}` : ''}`).join('\n');
}

/** The message a terminal user sees for an error: what, where, what to do. */
export function formatError(err: unknown): string {
  if (err instanceof SwitchyardError) {
    const head = `${err.where ? `${err.where}: ` : ''}${err.message}`;
    const list = err.problems.length ? `\n${formatProblems(err.problems)}` : '';
    return `${head}${list}${err.hint ? `\nhint: ${err.hint}` : ''}`;
  }
  return err instanceof Error ? err.message : String(err);
}
