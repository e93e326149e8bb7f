/**
 * Work gathered during one turn of the event loop and done once at its end: a group commit, one
 * IPC write, one reload however many changes asked for it. Under load one flush serves many
 * callers; idle, it costs one turn.
 *
 * `oncePerTurn` coalesces calls to one function; `batchPerTurn` collects items and hands them to
 * one flush. What a flush does with its items (commit, roll back, answer callers) stays the
 * caller's: a flush that cannot write now hands its items back (`putBack`) to wait a turn, or a
 * while, ahead of those that arrived meanwhile.
 */

/** How a turn's work is scheduled: after I/O (setImmediate, the default) or before (queueMicrotask). */
export type Turn = (run: () => void) => void;
const afterIo: Turn = (run) => void setImmediate(run);

/** A function that, called any number of times in a turn, runs `run` once in the next. */
export function oncePerTurn(run: () => void, turn: Turn = afterIo): () => void {
  let queued = false;
  const fire = () => {
    queued = false;
    run();
  };
  return () => {
    if (queued) return;
    queued = true;
    turn(fire);
  };
}

export interface Batch<T> {
  /** Adds an item and asks for a flush this turn. */
  push(item: T): void;
  /** Adds an item without asking for a flush: `soon`, `within` or `flush` says when. */
  add(item: T): void;
  /** Asks for a flush this turn (one however often asked). */
  soon(): void;
  /** Asks for a flush at the latest `ms` from now, unless one is asked already (timer unref'd). */
  within(ms: number): void;
  /** Flushes now, synchronously. */
  flush(): void;
  /**
   * Hands a flushed batch back, ahead of what arrived since: flushed again next turn or, given
   * `ms`, not before `ms` (a failing store: turns in between do not flush, however much arrives).
   */
  putBack(items: T[], ms?: number): void;
  /**
   * Hands a batch back, ahead of what arrived since, without asking for a flush: the caller asks
   * (`soon`) when what it waits for is done. A write still in flight must not be waited for by
   * putting back every turn: each turn's immediate keeps the event loop from sleeping in its poll
   * (a busy wait for the whole round trip).
   */
  hold(items: T[]): void;
  /** Items waiting. */
  readonly size: number;
}

export interface BatchOptions<T> {
  /** How many of the waiting items one flush takes (at least one; the rest wait a turn). Default: all. */
  take?: (waiting: readonly T[]) => number;
  turn?: Turn;
}

/**
 * Collects items and hands them to `write` once per turn. `scheduled` tells `write` whether it runs
 * from the schedule (a turn or a timer) or from a direct `flush()` (a reader that must see it all
 * now, or shutdown).
 */
export function batchPerTurn<T>(write: (batch: T[], scheduled: boolean) => void, opts: BatchOptions<T> = {}): Batch<T> {
  const turn = opts.turn ?? afterIo;
  let waiting: T[] = [];
  let turnQueued = false;
  let timer: NodeJS.Timeout | undefined;
  /** After a failed write: no flush before the timer. */
  let holding = false;

  function run(scheduled: boolean): void {
    if (timer) clearTimeout(timer);
    timer = undefined;
    holding = false;
    if (!waiting.length) return;
    let batch = waiting;
    waiting = [];
    if (opts.take) {
      const n = Math.max(1, opts.take(batch));
      if (n < batch.length) {
        waiting = batch.slice(n);
        batch = batch.slice(0, n);
        soon();
      }
    }
    write(batch, scheduled);
  }
  const onTurn = () => {
    turnQueued = false;
    run(true);
  };
  const onTimer = () => run(true);
  function soon(): void {
    if (turnQueued || holding) return;
    turnQueued = true;
    turn(onTurn);
  }

  /** Ahead of what arrived since. */
  function hold(items: T[]): void {
    waiting = waiting.length ? [...items, ...waiting] : items;
  }

  return {
    push(item) {
      waiting.push(item);
      soon();
    },
    add(item) {
      waiting.push(item);
    },
    soon,
    within(ms) {
      if (turnQueued || timer) return;
      timer = setTimeout(onTimer, ms);
      timer.unref();
    },
    flush: () => run(false),
    hold,
    putBack(items, ms) {
      hold(items);
      if (ms === undefined) return soon();
      if (timer) clearTimeout(timer);
      holding = true;
      timer = setTimeout(onTimer, ms);
      timer.unref();
    },
    get size() {
      return waiting.length;
    },
  };
}

/**
 * `run` at most once every `ms`: a call runs it at once when the last run was `ms` or more ago,
 * and otherwise once at the end of that window, however many calls come meanwhile (timer unref'd).
 */
export function atMostEvery(ms: number, run: () => void): { call(): void; cancel(): void } {
  let last = Number.NEGATIVE_INFINITY;
  let timer: NodeJS.Timeout | undefined;
  const fire = () => {
    timer = undefined;
    last = performance.now();
    run();
  };
  return {
    call() {
      if (timer) return;
      const wait = last + ms - performance.now();
      if (wait <= 0) return fire();
      timer = setTimeout(fire, wait);
      timer.unref();
    },
    cancel() {
      clearTimeout(timer);
      timer = undefined;
    },
  };
}
