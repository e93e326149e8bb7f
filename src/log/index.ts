/**
 * One structured logger: human-readable lines on a terminal, JSON lines otherwise (or as configured).
 * Fields named like secrets are redacted wherever they appear.
 */
export type Level = 'debug' | 'info' | 'warn' | 'error';
const rank: Record<Level, number> = { debug: 10, info: 20, warn: 30, error: 40 };

export interface Logger {
  debug(msg: string, fields?: Record<string, unknown>): void;
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  error(msg: string, fields?: Record<string, unknown>): void;
  child(fields: Record<string, unknown>): Logger;
  /**
   * A line for people at info level: on a terminal `text` as it is (no time, level or fields), in
   * JSON logs the structured record `msg` with `fields`.
   */
  notice?(text: string, msg: string, fields?: Record<string, unknown>): void;
}

const SECRET_KEY = /secret|token|password|authorization|signature|client_secret|access_token|refresh_token|api_key/i;

// The user-info part of a URL (`https://user:pw@host`): everything between `//` and the last `@`
// before the path. Backslashes end it too, as WHATWG URL parsing treats them like `/` there.
const URL_CREDENTIALS = /\b([a-z][a-z0-9+.-]*:\/\/)[^\s/?#\\@]*(?:@[^\s/?#\\@]*)*@/gi;

/**
 * Credentials in the URLs of a text replaced by `***` (`https://***@host/path`): how a stored
 * webhook URL, or an error that quotes one, is shown anywhere outside the server.
 */
export function hideUrlCredentials(text: string): string {
  return text.includes('@') ? text.replace(URL_CREDENTIALS, '$1***@') : text;
}

/** Replace values of secret-looking keys, recursively; and credentials in URLs. */
export function redact(value: unknown, depth = 0): unknown {
  if (typeof value === 'string') return hideUrlCredentials(value);
  if (depth > 6 || value === null || typeof value !== 'object') return value;
  if (value instanceof Error) return { name: value.name, message: hideUrlCredentials(value.message), stack: value.stack && hideUrlCredentials(value.stack) };
  if (Array.isArray(value)) return value.map((v) => redact(v, depth + 1));
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) out[k] = SECRET_KEY.test(k) && v !== undefined && v !== '' ? '[redacted]' : redact(v, depth + 1);
  return out;
}

export interface LoggerOptions {
  level?: Level;
  format?: 'auto' | 'pretty' | 'json';
  write?: (line: string) => void;
  isTTY?: boolean;
}

const colours: Record<Level, string> = { debug: '\x1b[90m', info: '\x1b[36m', warn: '\x1b[33m', error: '\x1b[31m' };

export function createLogger(opts: LoggerOptions = {}, base: Record<string, unknown> = {}): Logger {
  const level = opts.level ?? 'info';
  const isTTY = opts.isTTY ?? Boolean(process.stderr.isTTY);
  const json = opts.format === 'json' || (opts.format !== 'pretty' && !isTTY);
  const colour = isTTY && !process.env.NO_COLOR;
  const write = opts.write ?? ((line: string) => process.stderr.write(`${line}\n`));

  function emit(lvl: Level, msg: string, fields?: Record<string, unknown>): void {
    if (rank[lvl] < rank[level]) return;
    const all = redact({ ...base, ...fields }) as Record<string, unknown>;
    if (json) {
      write(JSON.stringify({ time: new Date().toISOString(), level: lvl, msg: hideUrlCredentials(msg), ...all }));
      return;
    }
    const time = new Date().toISOString().slice(11, 23);
    const tag = colour ? `${colours[lvl]}${lvl.padEnd(5)}\x1b[0m` : lvl.padEnd(5);
    const extra = Object.entries(all)
      .map(([k, v]) => `${k}=${typeof v === 'string' ? (/\s/.test(v) ? JSON.stringify(v) : v) : JSON.stringify(v)}`)
      .join(' ');
    write(`${time} ${tag} ${hideUrlCredentials(msg)}${extra ? `  ${colour ? '\x1b[90m' : ''}${extra}${colour ? '\x1b[0m' : ''}` : ''}`);
  }

  return {
    debug: (m, f) => emit('debug', m, f),
    info: (m, f) => emit('info', m, f),
    warn: (m, f) => emit('warn', m, f),
    error: (m, f) => emit('error', m, f),
    child: (fields) => createLogger(opts, { ...base, ...fields }),
    notice(text, msg, fields) {
      if (json) emit('info', msg, fields);
      else if (rank.info >= rank[level]) write(hideUrlCredentials(text));
    },
  };
}

/** A logger that keeps lines in memory, for tests. */
export function memoryLogger(): Logger & { lines: Array<Record<string, unknown>> } {
  const lines: Array<Record<string, unknown>> = [];
  const logger = createLogger({ format: 'json', level: 'debug', write: (l) => lines.push(JSON.parse(l)) });
  return Object.assign(logger, { lines });
}

/**
 * The same logger with info and warn lines lowered to debug: for a serving process other than the
 * first, whose registry reports exactly what the first one's does (same folder, same results).
 */
export function echoOf(log: Logger): Logger {
  return {
    debug: (m, f) => log.debug(m, f),
    info: (m, f) => log.debug(m, f),
    warn: (m, f) => log.debug(m, f),
    error: (m, f) => log.error(m, f),
    child: (fields) => echoOf(log.child(fields)),
    notice: (_text, m, f) => log.debug(m, f),
  };
}
