/**
 * console: every call becomes one log line of the current invocation, formatted like Node's
 * (printf-style %s %d %i %f %j %o %O %c, objects inspected to a bounded depth and length).
 */
import { logToHost } from '../bridge.ts';

const MAX_LINE = 16 * 1024;

function inspect(v: unknown, depth: number, seen: Set<unknown>): string {
  if (typeof v === 'string') return depth === 0 ? v : JSON.stringify(v);
  if (typeof v === 'bigint') return `${v}n`;
  if (typeof v === 'symbol') return v.toString();
  if (typeof v === 'function') return `[Function: ${v.name || '(anonymous)'}]`;
  if (v === null || typeof v !== 'object') return String(v);
  if (seen.has(v)) return '[Circular]';
  if (v instanceof Error) return v.stack ?? `${v.name}: ${v.message}`;
  if (v instanceof Date) return Number.isNaN(v.getTime()) ? 'Invalid Date' : v.toISOString();
  if (v instanceof RegExp) return String(v);
  if (depth > 2) return Array.isArray(v) ? '[Array]' : '[Object]';
  seen.add(v);
  try {
    if (Array.isArray(v)) {
      const items = v.slice(0, 100).map((x) => inspect(x, depth + 1, seen));
      if (v.length > 100) items.push(`... ${v.length - 100} more items`);
      return `[ ${items.join(', ')} ]`;
    }
    if (v instanceof Map)
      return `Map(${v.size}) { ${[...v]
        .slice(0, 100)
        .map(([k, x]) => `${inspect(k, depth + 1, seen)} => ${inspect(x, depth + 1, seen)}`)
        .join(', ')} }`;
    if (v instanceof Set)
      return `Set(${v.size}) { ${[...v]
        .slice(0, 100)
        .map((x) => inspect(x, depth + 1, seen))
        .join(', ')} }`;
    if (ArrayBuffer.isView(v))
      return `${v.constructor.name}(${(v as any).length ?? v.byteLength}) [ ${Array.from(v as unknown as ArrayLike<number>)
        .slice(0, 50)
        .join(', ')} ]`;
    const tag = (v as any)[Symbol.toStringTag];
    const name = tag ?? (Object.getPrototypeOf(v)?.constructor?.name !== 'Object' ? Object.getPrototypeOf(v)?.constructor?.name : '');
    const keys = Object.keys(v);
    const parts = keys.slice(0, 100).map((k) => `${/^[A-Za-z_$][\w$]*$/.test(k) ? k : JSON.stringify(k)}: ${inspect((v as any)[k], depth + 1, seen)}`);
    if (keys.length > 100) parts.push(`... ${keys.length - 100} more`);
    const body = parts.length ? `{ ${parts.join(', ')} }` : '{}';
    return name ? `${name} ${body}` : body;
  } catch {
    return '[Object]';
  } finally {
    seen.delete(v);
  }
}

export function format(args: unknown[]): string {
  let out = '';
  let rest = args;
  if (typeof args[0] === 'string' && args[0].includes('%')) {
    let i = 1;
    out = args[0].replace(/%([sdifjoOc%])/g, (m, f) => {
      if (f === '%') return '%';
      if (i >= args.length) return m;
      const a = args[i++];
      switch (f) {
        case 's':
          return typeof a === 'string' ? a : inspect(a, 1, new Set());
        case 'd':
        case 'i': {
          const n = typeof a === 'bigint' ? a : Number(a);
          return f === 'i' && typeof n === 'number' ? String(Math.trunc(n)) : String(n);
        }
        case 'f':
          return String(parseFloat(String(a)));
        case 'j':
          try {
            return JSON.stringify(a);
          } catch {
            return '[Circular]';
          }
        case 'c':
          return '';
        default:
          return inspect(a, 1, new Set());
      }
    });
    rest = args.slice(i);
  } else if (args.length) {
    out = inspect(args[0], 0, new Set());
    rest = args.slice(1);
  }
  for (const a of rest) out += ` ${inspect(a, 0, new Set())}`;
  return out.length > MAX_LINE ? `${out.slice(0, MAX_LINE)}... (${out.length - MAX_LINE} more characters)` : out;
}

function emit(level: string, args: unknown[]): void {
  let text: string;
  try {
    text = format(args);
  } catch (e) {
    text = `[unprintable: ${String((e as Error)?.message ?? e)}]`;
  }
  logToHost(level, text);
}

const counts = new Map<string, number>();
const timers = new Map<string, number>();

export const console = {
  log: (...a: unknown[]) => emit('log', a),
  info: (...a: unknown[]) => emit('info', a),
  debug: (...a: unknown[]) => emit('debug', a),
  warn: (...a: unknown[]) => emit('warn', a),
  error: (...a: unknown[]) => emit('error', a),
  trace: (...a: unknown[]) => emit('debug', [...a, `\n${(new Error().stack ?? '').split('\n').slice(2).join('\n')}`]),
  dir: (v: unknown) => emit('log', [v]),
  table: (v: unknown) => emit('log', [v]),
  assert: (ok: unknown, ...a: unknown[]) => {
    if (!ok) emit('error', ['Assertion failed', ...a]);
  },
  count: (label = 'default') => {
    const n = (counts.get(label) ?? 0) + 1;
    counts.set(label, n);
    emit('log', [`${label}: ${n}`]);
  },
  countReset: (label = 'default') => void counts.delete(label),
  time: (label = 'default') => void timers.set(label, Date.now()),
  timeLog: (label = 'default', ...a: unknown[]) => emit('log', [`${label}: ${Date.now() - (timers.get(label) ?? Date.now())}ms`, ...a]),
  timeEnd: (label = 'default') => {
    emit('log', [`${label}: ${Date.now() - (timers.get(label) ?? Date.now())}ms`]);
    timers.delete(label);
  },
  group: (...a: unknown[]) => a.length && emit('log', a),
  groupEnd: () => {},
};
