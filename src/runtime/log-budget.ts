/**
 * How much of what integration code prints is stored: at most `sandbox.log_bytes` per invocation,
 * `sandbox.log_bytes_per_minute` per integration (a token bucket), and nothing while the data
 * directory's disk has less than `sandbox.log_disk_reserve` free, so logs never take the space the
 * delivery queue needs. What is dropped is counted in one marker line at the end of the record.
 * Failure policy: fail open on the disk check (a statfs error stores the logs; the caps still hold).
 */
import { statfsSync } from 'node:fs';
import type { LogLine } from '../sandbox/index.ts';

export type DropReason = 'invocation' | 'integration' | 'disk';

export interface Dropped {
  lines: number;
  bytes: number;
  reason: DropReason;
}

/** The marker line: a log line that also carries its counts (not shown by the API, read back by SQL). */
export type MarkerLine = LogLine & { dropped: Dropped };

export interface LogBudgetOptions {
  /** `sandbox.log_bytes`: message bytes stored per invocation. */
  perInvocation: number;
  /** `sandbox.log_bytes_per_minute`: message bytes stored per integration per minute. */
  perMinute: number;
  /** `sandbox.log_disk_reserve`: below this much free space, no line is stored. */
  diskReserve: number;
  /** The directory on the disk that holds the store; absent, no disk check (PostgreSQL: its server's full disk answers for itself). */
  dataDir?: string;
  now?: () => number;
  /** Free bytes of the disk holding `dir` (statfs by default). */
  freeBytes?: (dir: string) => number;
}

/** How often the free space is measured at most. */
const DISK_CHECK_MS = 1000;

const encoder = new TextEncoder();
export const lineBytes = (line: LogLine) => (/^[\x00-\x7f]*$/.test(line.message) ? line.message.length : encoder.encode(line.message).byteLength);

function size(n: number): string {
  if (n >= 1024 * 1024 && n % (1024 * 1024) === 0) return `${n / (1024 * 1024)} MB`;
  if (n >= 1024 && n % 1024 === 0) return `${n / 1024} kB`;
  return `${n} bytes`;
}

const statfsFree = (dir: string) => {
  const s = statfsSync(dir);
  return Number(s.bavail) * Number(s.bsize);
};

export function createLogBudget(opts: LogBudgetOptions) {
  const now = opts.now ?? Date.now;
  const freeBytes = opts.freeBytes ?? statfsFree;
  const buckets = new Map<string, { tokens: number; at: number }>();
  let disk = { low: false, at: -Infinity };

  function diskLow(): boolean {
    if (opts.dataDir === undefined) return false;
    const t = now();
    if (t - disk.at < DISK_CHECK_MS) return disk.low;
    let low = false;
    try {
      low = freeBytes(opts.dataDir) < opts.diskReserve;
    } catch {
      low = false;
    }
    disk = { low, at: t };
    return low;
  }

  /** Take `bytes` from the integration's bucket (refilled continuously, at most one minute's worth). */
  function take(integration: string, bytes: number): boolean {
    const t = now();
    let b = buckets.get(integration);
    if (!b) {
      if (buckets.size >= 10_000) buckets.clear();
      buckets.set(integration, (b = { tokens: opts.perMinute, at: t }));
    }
    b.tokens = Math.min(opts.perMinute, b.tokens + ((t - b.at) * opts.perMinute) / 60_000);
    b.at = t;
    if (b.tokens < bytes) return false;
    b.tokens -= bytes;
    return true;
  }

  function why(reason: DropReason): string {
    switch (reason) {
      case 'invocation':
        return `more than sandbox.log_bytes = ${size(opts.perInvocation)} in this invocation`;
      case 'integration':
        return `this integration printed more than sandbox.log_bytes_per_minute = ${size(opts.perMinute)}`;
      case 'disk':
        return `the data directory's disk has less than sandbox.log_disk_reserve = ${size(opts.diskReserve)} free`;
    }
  }

  function marker(d: Dropped): MarkerLine {
    const what = `${d.lines} line${d.lines === 1 ? '' : 's'} / ${d.bytes} bytes`;
    return { time: now(), level: 'warn', message: `log output dropped: ${what} not stored (${why(d.reason)})`, dropped: d };
  }

  return {
    /**
     * The lines of one invocation to store, in order, after `stored` message bytes it already has.
     * Once a line is dropped every later one is too (no gaps), and a marker line ends the list.
     */
    admit(integration: string, lines: LogLine[], stored = 0): { lines: LogLine[]; dropped?: Dropped } {
      const kept: LogLine[] = [];
      let used = stored;
      let dropped: Dropped | undefined;
      for (const line of lines) {
        const n = lineBytes(line);
        if (!dropped) {
          const reason: DropReason | undefined = diskLow()
            ? 'disk'
            : used + n > opts.perInvocation
              ? 'invocation'
              : !take(integration, n)
                ? 'integration'
                : undefined;
          if (!reason) {
            used += n;
            kept.push(line);
            continue;
          }
          dropped = { lines: 0, bytes: 0, reason };
        }
        dropped.lines++;
        dropped.bytes += n;
      }
      if (dropped) kept.push(marker(dropped));
      return { lines: kept, dropped };
    },

    /** The marker after one more dropped line (a record that already ends with `previous`). */
    dropMore(previous: Dropped, line: LogLine): MarkerLine {
      return marker({ lines: previous.lines + 1, bytes: previous.bytes + lineBytes(line), reason: previous.reason });
    },
  };
}

export type LogBudget = ReturnType<typeof createLogBudget>;
