/**
 * The crash record: a small file per serving process naming the integrations it is running, so
 * that when the process dies the supervisor can say which integration took it down (an abort
 * leaves no time to say anything). It must cost next to nothing on the hot path:
 *
 * - a name is written when it starts running and the file does not list it yet (a steady
 *   stream of one integration's requests writes nothing);
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
  /** The integration whose invocation started last. */
  last?: string;
  /** The integration known to have broken the process. */
  culprit?: string;
}

export class CrashRecord {
  private readonly fd: number;
  /** Invocations running now, per integration: when each began (oldest first, ended oldest first: close enough). */
  private readonly live = new Map<string, { starts: number[]; version: string }>();
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
    if (cur) cur.starts.push(Date.now());
    else this.live.set(name, { starts: [Date.now()], version });
    if (this.last !== name || !this.written.has(name)) {
      this.last = name;
      this.write();
    }
  }

  /**
   * `name`'s guest code is about to run: it is now the one that started last. Its invocation may
   * have started long before (an isolate made on first use), with others started meanwhile.
   */
  dispatching(name: string): void {
    if (this.last === name || !this.live.has(name)) return;
    this.last = name;
    this.write();
  }

  ended(name: string): void {
    const cur = this.live.get(name);
    if (!cur) return;
    cur.starts.shift();
    if (!cur.starts.length) this.live.delete(name);
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
    const running = [...this.live].map(([name, x]) => ({ name, version: x.version, since: x.starts[0] }));
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
 * What a dead process's record says about who killed it: every integration running is a suspect,
 * scored. A named culprit scores 2 (and is the only suspect). Otherwise two signs score 1 each:
 * the integration that started last (a guest call that never returned holds the main thread, and
 * nothing starts after it) and the one whose oldest running invocation began first (a bomb running
 * on its isolate's thread can stall the whole process, freezing a well-behaved call started after
 * it). Measured with a wedging bomb beside steady well-behaved traffic: either sign alone pointed
 * at the well-behaved integration in about one death of three; both never did.
 */
export function suspects(record: CrashRecordContent): Map<string, number> {
  if (record.culprit) return new Map([[record.culprit, 2]]);
  const scores = new Map(record.running.map((r) => [r.name, 0]));
  if (!record.running.length) return scores;
  const earliest = record.running.reduce((a, b) => (b.since < a.since ? b : a));
  scores.set(earliest.name, scores.get(earliest.name)! + 1);
  if (record.last !== undefined && scores.has(record.last)) scores.set(record.last, scores.get(record.last)! + 1);
  return scores;
}
