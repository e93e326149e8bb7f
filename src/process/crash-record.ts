/**
 * The crash record: a small file per serving process naming the integrations it is running, so
 * that when the process dies the supervisor can say which integration took it down (an abort
 * leaves no time to say anything). It must cost next to nothing on the hot path:
 *
 * - a name is written when it starts running and the file does not list it yet, or another
 *   integration started last (a steady stream of one integration's requests writes nothing);
 * - names that stopped running are dropped lazily, by a timer (TIDY_MS), so the file lists a
 *   superset of what runs: what runs now plus what ran in the last moments;
 * - a culprit known for sure (a catastrophic isolate error, an invocation past every limit) is
 *   written at once, just before the process exits.
 *
 * The supervisor reads the file after the process died (see attribution in supervisor.ts).
 */
import { closeSync, openSync, readFileSync, rmSync, writeSync } from 'node:fs';

const TIDY_MS = 100;
const SIZE = 4096;

export interface CrashRecordContent {
  /** Integrations running at the write, with when the oldest of their running invocations began (ms since the epoch). */
  running: Array<{ name: string; version: string; since: number }>;
  /** The integration that started last: the one on the main thread if the process stopped answering. */
  last?: string;
  /** The integration known to have broken the process. */
  culprit?: string;
}

export class CrashRecord {
  private readonly fd: number;
  /** Invocations running now, per integration: count and when the oldest began. */
  private readonly live = new Map<string, { n: number; since: number; version: string }>();
  private written = new Set<string>();
  private last: string | undefined;
  private tidy: NodeJS.Timeout | undefined;

  readonly file: string;

  constructor(file: string) {
    this.file = file;
    this.fd = openSync(file, 'w', 0o600);
    this.write();
  }

  started(name: string, version: string): void {
    const cur = this.live.get(name);
    if (cur) cur.n++;
    else this.live.set(name, { n: 1, since: Date.now(), version });
    if (this.last !== name || !this.written.has(name)) {
      this.last = name;
      this.write();
    }
  }

  ended(name: string): void {
    const cur = this.live.get(name);
    if (!cur) return;
    if (--cur.n <= 0) this.live.delete(name);
    if (!this.tidy) {
      this.tidy = setTimeout(() => {
        this.tidy = undefined;
        if ([...this.written].some((n) => !this.live.has(n))) this.write();
      }, TIDY_MS);
      this.tidy.unref();
    }
  }

  culprit(name: string): void {
    this.write(name);
  }

  close(): void {
    clearTimeout(this.tidy);
    closeSync(this.fd);
    rmSync(this.file, { force: true });
  }

  private write(culprit?: string): void {
    const running = [...this.live].map(([name, x]) => ({ name, version: x.version, since: x.since }));
    this.written = new Set(running.map((r) => r.name));
    const content = (r: typeof running): CrashRecordContent => ({ running: r, last: this.last, ...(culprit ? { culprit } : {}) });
    let text = JSON.stringify(content(running));
    // Fixed size, written in place: one write, and never a half-old half-new file to parse.
    if (text.length > SIZE) text = JSON.stringify(content(running.slice(0, 20)));
    writeSync(this.fd, text.padEnd(SIZE, ' '), 0);
  }
}

/** What a dead process's record says (an empty record when it is missing or unreadable). */
export function readCrashRecord(file: string): CrashRecordContent {
  try {
    const parsed = JSON.parse(readFileSync(file, 'utf8').trim()) as CrashRecordContent;
    return {
      running: Array.isArray(parsed.running) ? parsed.running : [],
      last: typeof parsed.last === 'string' ? parsed.last : undefined,
      culprit: typeof parsed.culprit === 'string' ? parsed.culprit : undefined,
    };
  } catch {
    return { running: [] };
  } finally {
    rmSync(file, { force: true });
  }
}

/**
 * Who is to blame for a process that died. The culprit, when one was named. When the process had
 * stopped answering (its main thread held by an isolate call that never came back), the
 * integration that started last. Otherwise the one whose oldest running invocation began first:
 * a bomb runs a while, the well-behaved requests around it come and go. Empty when nothing ran.
 */
export function blame(record: CrashRecordContent, unresponsive: boolean): string[] {
  if (record.culprit) return [record.culprit];
  if (!record.running.length) return [];
  if (unresponsive && record.last && record.running.some((r) => r.name === record.last)) return [record.last];
  const earliest = Math.min(...record.running.map((r) => r.since));
  return record.running.filter((r) => r.since === earliest).map((r) => r.name);
}
