/**
 * What a limit breach or a failure looks like to the caller and in the integration's logs. The
 * caller sees a short JSON error without internals; the log line says which limit, its configured
 * value and what was used.
 */
import type { InvocationError, InvocationResult, LimitName, Limits, LogLine } from './types.ts';

const encoder = new TextEncoder();

function ms(n: number): string {
  return `${Math.round(n)} ms`;
}

function size(n: number): string {
  if (n >= 1024 * 1024 && n % (1024 * 1024) === 0) return `${n / (1024 * 1024)} MB`;
  if (n >= 1024 && n % 1024 === 0) return `${n / 1024} kB`;
  return `${n} bytes`;
}

/** The sentence for a breach, naming the config key and its value. */
export function describeLimit(limit: LimitName, limits: Limits, used?: number): string {
  const u = used === undefined ? '' : ` (used ${limit.endsWith('_body') || limit === 'script_size' ? size(used) : limit === 'subrequests' ? used : ms(used)})`;
  switch (limit) {
    case 'cpu_time':
      // An inline call's time-out runs on the clock (see host/invocation.ts budget): on a machine
      // short of CPU it can end before the CPU time is spent, and the message says so.
      if (used !== undefined && used < limits.cpu_time) {
        return `exceeded its CPU time limit, sandbox.cpu_time = ${ms(limits.cpu_time)} (used ${Math.round(used)} ms of CPU, but its call ran twice the time it had left on the clock: the process was short of CPU); the invocation was stopped`;
      }
      return `exceeded its CPU time limit, sandbox.cpu_time = ${ms(limits.cpu_time)}${u}; the invocation was stopped`;
    case 'wall_time':
      return `did not finish within its wall-clock limit, sandbox.wall_time = ${ms(limits.wall_time)}${u}; the invocation was stopped`;
    case 'memory_mb':
      return `ran out of memory, sandbox.memory_mb = ${limits.memory_mb} MB; the invocation was stopped`;
    case 'subrequests':
      return `made more outbound requests than sandbox.subrequests = ${limits.subrequests} allows; the invocation was stopped`;
    case 'request_body':
      return `the request body is larger than sandbox.request_body = ${size(limits.request_body)}${u}`;
    case 'response_body':
      return `returned a response body larger than sandbox.response_body = ${size(limits.response_body)}; the invocation was stopped`;
    case 'script_size':
      return `the script is larger than sandbox.script_size = ${size(limits.script_size)}${u}`;
    case 'startup_time':
      return `its load (compile and top-level code) did not finish within sandbox.startup_time = ${ms(limits.startup_time)}${u}; the script was not loaded`;
    case 'wait_until':
      return `its waitUntil work did not finish within sandbox.wait_until = ${ms(limits.wait_until)} after the response; it was stopped`;
  }
}

export function logLine(level: LogLine['level'], message: string): LogLine {
  return { time: Date.now(), level, message };
}

const statusOf: Record<InvocationError['kind'], number> = { limit: 503, crash: 503, load: 500, exception: 500 };
const publicMessage: Record<InvocationError['kind'], string> = {
  limit: 'The integration exceeded a resource limit',
  crash: 'The integration sandbox failed; try again',
  load: 'The integration could not be loaded',
  exception: 'Internal server error',
};

/** A result for an invocation that produced no response of its own. */
export function failure(error: InvocationError, opts: { logs?: LogLine[]; durationMs: number; cpuMs?: number; status?: number }): InvocationResult {
  const status = opts.status ?? statusOf[error.kind];
  const body = encoder.encode(
    JSON.stringify({ error: error.kind === 'limit' && error.limit === 'request_body' ? 'Request body too large' : publicMessage[error.kind] }),
  );
  const logs = [...(opts.logs ?? [])];
  logs.push(logLine('error', `${error.kind === 'limit' ? `limit ${error.limit}: ` : `${error.kind}: `}${error.message}`));
  return {
    status,
    headers: [['content-type', 'application/json']],
    body,
    logs,
    error,
    durationMs: opts.durationMs,
    cpuMs: opts.cpuMs ?? 0,
  };
}
