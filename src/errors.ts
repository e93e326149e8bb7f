/**
 * The one error type a user can hit. `code` is stable and machine-readable, `message` says what is
 * wrong, `hint` says what to do, `where` says where (file:line:col for files, a field path for data).
 * `status` is the HTTP status when the error crosses the management API.
 */
export type ErrorCode =
  | 'config_invalid'
  | 'config_env_missing'
  | 'data_dir_unwritable'
  | 'data_dir_locked'
  | 'port_in_use'
  | 'listen_failed'
  | 'manifest_invalid'
  | 'bundle_failed'
  | 'validation_failed'
  | 'not_found'
  | 'conflict'
  | 'unauthorized'
  | 'forbidden'
  | 'bad_request'
  | 'payload_too_large'
  | 'unsupported_media_type'
  | 'too_many_requests'
  | 'server_unreachable'
  | 'storage_full'
  | 'storage_read_only'
  | 'storage_busy'
  | 'storage_failed'
  | 'not_implemented'
  /** The server is starting and has not loaded what the request needs yet (503, Retry-After). */
  | 'starting'
  /** A module needs a capability no module of the server provides (see src/server/capabilities.ts). */
  | 'capability_missing'
  | 'internal';

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

const defaultStatus: Partial<Record<ErrorCode, number>> = {
  validation_failed: 400,
  bad_request: 400,
  manifest_invalid: 400,
  unauthorized: 401,
  forbidden: 403,
  not_found: 404,
  conflict: 409,
  payload_too_large: 413,
  unsupported_media_type: 415,
  too_many_requests: 429,
  storage_full: 507,
  storage_read_only: 503,
  storage_busy: 503,
  storage_failed: 503,
  internal: 500,
  not_implemented: 501,
  starting: 503,
};

export class SwitchyardError extends Error {
  readonly code: ErrorCode;
  readonly hint?: string;
  readonly where?: string;
  readonly status: number;
  readonly problems: Problem[];
  /** Response headers when the error crosses the management API (e.g. Retry-After). */
  readonly headers?: Record<string, string>;

  constructor(
    code: ErrorCode,
    message: string,
    opts: { hint?: string; where?: string; status?: number; problems?: Problem[]; cause?: unknown; headers?: Record<string, string> } = {},
  ) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = 'SwitchyardError';
    this.code = code;
    this.hint = opts.hint;
    this.where = opts.where;
    this.status = opts.status ?? defaultStatus[code] ?? 500;
    this.problems = opts.problems ?? [];
    this.headers = opts.headers;
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
  return problems
    .map((p) => `  ${p.severity === 'warning' ? 'warning' : 'error'} ${p.where}: ${p.message}${p.hint ? `\n    hint: ${p.hint}` : ''}`)
    .join('\n');
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
