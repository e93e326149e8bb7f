/**
 * Logger(namespace): GitBook's runtime logger. Each call is one console line of the invocation,
 * prefixed with `[namespace]`, so `switchyard logs` shows which part of the code spoke.
 */
import { console } from '../web/console.ts';

export interface NamespacedLogger {
  info(message: unknown, ...args: unknown[]): void;
  debug(message: unknown, ...args: unknown[]): void;
  warn(message: unknown, ...args: unknown[]): void;
  error(message: unknown, ...args: unknown[]): void;
}

export function Logger(namespace: string): NamespacedLogger {
  const prefix = `[${String(namespace)}]`;
  const line =
    (write: (...a: unknown[]) => void) =>
    (message: unknown, ...args: unknown[]) =>
      typeof message === 'string' ? write(`${prefix} ${message}`, ...args) : write(prefix, message, ...args);
  return Object.freeze({
    info: line(console.log),
    debug: line(console.debug),
    warn: line(console.warn),
    error: line(console.error),
  });
}
