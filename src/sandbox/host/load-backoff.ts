/**
 * When an integration's pool may load its script again after a load was stopped by a limit
 * (sandbox.startup_time or memory_mb): a limit is no verdict on the code (a busy machine slows
 * every step of a load), so the load is tried again, but a script that always overruns must not
 * cost a full load on every call. The first retry is at once (a one-off time-out costs one call);
 * from the second breach in a row, calls are answered with the limit at once for RETRY_FIRST_MS,
 * doubling up to RETRY_MAX_MS, before the next call loads again. A load that succeeds ends it.
 */
import { LoadError } from './instance.ts';

export const RETRY_FIRST_MS = 1_000;
export const RETRY_MAX_MS = 30_000;

export class LoadBackoff {
  /** Loads stopped by a limit in a row. */
  private breaches = 0;
  private last: LoadError | null = null;
  private until = 0;
  private readonly now: () => number;

  constructor(now: () => number = () => performance.now()) {
    this.now = now;
  }

  /** Why no load may start now (the last breach, saying when the next load is), or null: load. */
  refusal(): LoadError | null {
    const wait = this.until - this.now();
    if (!this.last || wait <= 0) return null;
    return new LoadError(`${this.last.message} (${this.breaches} loads in a row stopped by a limit; the next is tried in ${(wait / 1000).toFixed(1)} s)`, {
      limit: this.last.limit,
    });
  }

  /**
   * A load was stopped by a limit. One that began before the current pause (several isolates
   * loading at once) does not lengthen it: the pause is for the breach already counted.
   */
  breached(e: LoadError): void {
    const now = this.now();
    if (now < this.until) return;
    this.breaches++;
    this.last = e;
    this.until = this.breaches < 2 ? now : now + Math.min(RETRY_MAX_MS, RETRY_FIRST_MS * 2 ** (this.breaches - 2));
  }

  /** No breach counted: as good as a new one. */
  get clear(): boolean {
    return this.last === null;
  }

  loaded(): void {
    this.breaches = 0;
    this.last = null;
    this.until = 0;
  }
}
