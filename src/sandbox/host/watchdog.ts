/**
 * The deadline of the guest calls a process runs inline (see instance.ts), kept by one thread for
 * the whole process instead of a time-out per call.
 *
 * Why: isolated-vm's `timeout` arms a timer per call on its timer thread, and that thread wakes at
 * every call's deadline, whether the call is long over or not. Serving thousands of requests a
 * second, that is thousands of wake-ups of a thread that competes with the serving thread for its
 * core: on one core the public endpoint's peak was 20-35 % lower and its p50 at half the peak
 * about three times higher with the time-out than without (docs/benchmarks.md).
 *
 * How: a small isolate of our own runs a loop on one of isolated-vm's threads, parked in
 * `Atomics.wait` on a shared buffer for WATCH_POLL_MS at a time. The serving thread writes the
 * call it is about to make (the instance's number, a sequence number, when it starts and how long
 * it may run) into the buffer before each call and clears it after: a few stores, no system call.
 * When the loop finds the same call still running past its deadline, it claims the call (a
 * compare-and-swap on the slot that names it, which the serving thread swaps back to clear it) and
 * disposes that instance's isolate: isolated-vm's handles may be used from any thread, and
 * disposal interrupts the running call as its time-out would. So it never stops a call that has
 * ended, and the caller knows a call stopped for its time from one whose isolate died of its memory
 * limit. A call so stopped ran about WATCH_POLL_MS past its deadline at most, unless the loop's
 * thread was kept off the CPU.
 *
 * The loop holds the process open while it runs, so it ends after WATCH_IDLE_MS without a call
 * (the next call starts it again) and when the sandbox closes. A process that exits while the loop
 * runs on isolated-vm's thread crashes (SIGSEGV, whatever its exit code was to be): on exit the loop
 * is stopped and waited for. While no loop runs, or the running one does not hold an instance's
 * handle yet (handed to a loop when it starts), calls fall back to isolated-vm's time-out: `arm`
 * answers 0 for them. The loop takes one of isolated-vm's threads (it has one per core, plus one).
 */
import ivm from 'isolated-vm';

/** How often the loop looks at the running call: a stopped call overran its deadline by at most this. */
export const WATCH_POLL_MS = 4;
/** The loop ends after this long without a call into a guest. */
export const WATCH_IDLE_MS = 250;

// Int32 slots of the shared buffer; the call's start (Date.now() ms) and its allowance (ms) are
// Float64s after them.
const NAP = 0; // always 0: the loop sleeps on it, and is woken on it to stop
const CTRL = 1; // RESTART: the loop returns once no call is running (the next call starts another); EXIT: for good
const CALL = 2; // the watched call's sequence number, 0 between calls, CLAIMED while the loop stops it
const INSTANCE = 3; // the watched call's instance number
const LIVE = 4; // 1 while a loop watches
const GEN = 5; // the generation of the loop running: the handles it holds (see `arm`)
const ENDED = 6; // loops that have returned (see stopForExit)
const LAST = 7; // the sequence number of the last call armed: the loop is idle while it stays the same
const TIMES_BYTE = 32;
const RESTART = 1;
const EXIT = 2;
const CLAIMED = -1;
/** The most one look of the loop counts as time gone by (see LOOP's clock). */
const LONGEST_STEP_MS = 100;
/** How long a process about to exit waits for the loop to return. */
const EXIT_WAIT_MS = 500;

// Runs in the watchdog's own isolate, where the only clock is Date.now(). Time is counted on a
// clock of the loop's own: the wall clock's steps, none backwards and none longer than
// LONGEST_STEP_MS, so a clock set forward (or a machine resumed) ends no call; a loop starved of
// CPU counts short and stops a call late, never early. The loop stops only with no call armed, by
// a handshake on LIVE and CALL (each side stores its own slot, then reads the other's: one of them
// sees the other), so a call is never armed with no loop to watch it. It reads a call's instance
// and times between two reads of CALL (the serving thread writes them before it), and stops the
// call only if it can swap that call's number for CLAIMED: a call the serving thread has cleared
// is not touched. Nothing here may throw (an isolate disposed meanwhile): LIVE must be left at 0.
const LOOP = `
const isolates = new Map();
globalThis.watch = (sab, poll, idleMs, gen, ...enlisted) => {
  const i32 = new Int32Array(sab), times = new Float64Array(sab, ${TIMES_BYTE}, 2);
  try {
    if (Atomics.load(i32, ${CTRL}) === ${EXIT}) return 'exit';
    for (let i = 0; i + 1 < enlisted.length; i += 2) isolates.set(enlisted[i], enlisted[i + 1]);
    for (const [id, iso] of isolates) if (iso.isDisposed) isolates.delete(id);
    Atomics.compareExchange(i32, ${CTRL}, ${RESTART}, 0);
    Atomics.store(i32, ${GEN}, gen);
    Atomics.store(i32, ${LIVE}, 1);
    let wall = Date.now(), clock = 0, idleSince = 0, seen = 0, since = 0, last = Atomics.load(i32, ${LAST});
    for (;;) {
      Atomics.wait(i32, ${NAP}, 0, poll);
      const now = Date.now(), step = now - wall;
      wall = now;
      clock += step < 0 ? 0 : step > ${LONGEST_STEP_MS} ? ${LONGEST_STEP_MS} : step;
      if (Atomics.load(i32, ${CTRL}) === ${EXIT}) return 'exit';
      const call = Atomics.load(i32, ${CALL}), armed = Atomics.load(i32, ${LAST});
      // Calls a few µs long are seldom running when it looks: the last one armed tells it they come.
      if (armed !== last) {
        last = armed;
        idleSince = clock;
      }
      if (call <= 0) {
        if (Atomics.load(i32, ${CTRL}) !== 0 || clock - idleSince >= idleMs) {
          Atomics.store(i32, ${LIVE}, 0);
          if (Atomics.load(i32, ${CALL}) === 0) return 'ended';
          Atomics.store(i32, ${LIVE}, 1);
        }
        continue;
      }
      idleSince = clock;
      const id = Atomics.load(i32, ${INSTANCE}), start = times[0], allowed = times[1];
      if (Atomics.load(i32, ${CALL}) !== call) continue;
      // First seen now: it began before, by the wall clock (bounded like a step).
      if (call !== seen) {
        seen = call;
        const before = now - start;
        since = clock - (before < 0 ? 0 : before > ${LONGEST_STEP_MS} ? ${LONGEST_STEP_MS} : before);
      }
      // Whole milliseconds on both sides: one more, so that no call is stopped early.
      if (clock - since <= allowed) continue;
      if (Atomics.compareExchange(i32, ${CALL}, call, ${CLAIMED}) !== call) continue;
      try {
        const iso = isolates.get(id);
        if (iso && !iso.isDisposed) iso.dispose();
      } catch {
        // disposed meanwhile
      }
      Atomics.store(i32, ${CALL}, 0);
      Atomics.notify(i32, ${CALL});
    }
  } finally {
    if (Atomics.compareExchange(i32, ${CALL}, ${CLAIMED}, 0) === ${CLAIMED}) Atomics.notify(i32, ${CALL});
    Atomics.store(i32, ${LIVE}, 0);
    Atomics.add(i32, ${ENDED}, 1);
    Atomics.notify(i32, ${ENDED});
  }
};`;

export class CallWatchdog {
  private readonly sab = new SharedArrayBuffer(TIMES_BYTE + 16);
  private readonly i32 = new Int32Array(this.sab);
  private readonly times = new Float64Array(this.sab, TIMES_BYTE, 2);
  private isolate: ivm.Isolate | undefined;
  private watch: ivm.Reference | undefined;
  /** Every live instance's isolate, by number. */
  private readonly known = new Map<number, ivm.Isolate>();
  /** The generation of the loop that took each instance's handle: held once that loop has started. */
  private readonly heldFrom = new Map<number, number>();
  /** Calls the loop stopped, and calls it watched (for tests and metrics). */
  stopped = 0;
  watched = 0;
  /** Known instances whose handle no loop has taken yet (every held one is known). */
  private get waiting(): number {
    return this.known.size - this.heldFrom.size;
  }
  /** Loops started (each returns, and counts itself in ENDED). */
  private started = 0;
  private nextId = 1;
  private seq = 0;
  private gen = 0;
  private armed = 0;
  /** Consecutive failures of the loop; past a few it is given up and every call keeps its time-out. */
  private failures = 0;
  private exitHooked = false;
  private readonly poll: number;
  private readonly idleMs: number;

  constructor(poll = WATCH_POLL_MS, idleMs = WATCH_IDLE_MS) {
    this.poll = poll;
    this.idleMs = idleMs;
  }

  /**
   * Number an isolate for `arm`. A loop that takes its handle starts now, or (one runs) when the
   * running one has returned, so that it holds it by the time the instance has loaded.
   */
  enlist(isolate: ivm.Isolate): number {
    const id = this.nextId++;
    this.known.set(id, isolate);
    this.start();
    return id;
  }

  /** The isolate is gone: the loop drops its handle when it next starts. */
  forget(id: number): void {
    this.known.delete(id);
    this.heldFrom.delete(id);
  }

  /**
   * A call into instance `id`, allowed `ms` of the clock, is about to start. Answers its sequence
   * number, or 0 when this watchdog cannot stop it (the caller gives the call a time-out instead).
   * A call made while another is armed (a nested call) is not watched either.
   */
  arm(id: number, ms: number): number {
    if (this.armed !== 0) return 0;
    const from = this.heldFrom.get(id);
    if (from === undefined || from > Atomics.load(this.i32, GEN) || Atomics.load(this.i32, LIVE) !== 1) {
      this.start();
      return 0;
    }
    const seq = (this.seq = (this.seq % 0x7fffffff) + 1);
    this.times[0] = Date.now();
    this.times[1] = ms;
    Atomics.store(this.i32, INSTANCE, id);
    Atomics.store(this.i32, LAST, seq);
    Atomics.store(this.i32, CALL, seq);
    if (Atomics.load(this.i32, LIVE) !== 1) {
      // The loop was ending: it saw no call, so this one is not watched.
      Atomics.store(this.i32, CALL, 0);
      this.start();
      return 0;
    }
    this.armed = seq;
    this.watched++;
    return seq;
  }

  /**
   * The call armed as `seq` is over. True when the loop stopped it first (its isolate is disposed,
   * or being disposed: this waits until it is), for running past its allowance.
   */
  disarm(seq: number): boolean {
    if (seq === 0) return false;
    this.armed = 0;
    if (Atomics.compareExchange(this.i32, CALL, seq, 0) === seq) return false;
    while (Atomics.load(this.i32, CALL) === CLAIMED) Atomics.wait(this.i32, CALL, CLAIMED, 100);
    this.stopped++;
    return true;
  }

  /**
   * End the loop now rather than after WATCH_IDLE_MS (it holds the process open): the sandbox
   * closes. The next call starts it again.
   */
  rest(): void {
    if (Atomics.load(this.i32, LIVE) === 1) this.signal(RESTART);
  }

  private signal(value: number): void {
    Atomics.store(this.i32, CTRL, value);
    Atomics.notify(this.i32, NAP);
  }

  /** The process exits: stop the loop for good and wait (a little) until every loop started has returned. */
  private stopForExit(): void {
    this.signal(EXIT);
    const until = Date.now() + EXIT_WAIT_MS;
    for (;;) {
      const ended = Atomics.load(this.i32, ENDED);
      if (ended === this.started || Date.now() >= until) return;
      Atomics.wait(this.i32, ENDED, ended, 10);
    }
  }

  /**
   * Start a loop holding every known handle, unless one runs: a running loop that lacks some is
   * asked to return, and the next one starts once it has.
   */
  private start(): void {
    if (this.failures >= 3 || this.armed !== 0 || Atomics.load(this.i32, CTRL) === EXIT) return;
    if (this.started !== Atomics.load(this.i32, ENDED)) {
      if (this.waiting > 0 && Atomics.load(this.i32, CTRL) === 0) this.signal(RESTART);
      return;
    }
    if (!this.exitHooked) {
      this.exitHooked = true;
      process.on('exit', () => this.stopForExit());
    }
    try {
      if (!this.isolate) {
        this.isolate = new ivm.Isolate({ memoryLimit: 8 });
        const context = this.isolate.createContextSync();
        context.evalSync(LOOP);
        this.watch = context.global.getSync('watch', { reference: true }) as ivm.Reference;
      }
      const gen = ++this.gen;
      const enlisted: unknown[] = [];
      for (const [id, iso] of this.known) {
        if (iso.isDisposed) {
          this.forget(id);
          continue;
        }
        if (this.heldFrom.has(id)) continue;
        enlisted.push(id, iso);
        this.heldFrom.set(id, gen);
      }
      const isolate = this.isolate;
      const shared = new ivm.ExternalCopy(this.sab).copyInto({ release: true });
      const loop = this.watch!.apply(undefined, [shared, this.poll, this.idleMs, gen, ...enlisted], { result: { copy: true } });
      this.started++;
      loop.then(
        () => {
          this.failures = 0;
          // Handles came while it ran: the next loop takes them now rather than at the next call.
          if (this.waiting > 0) this.start();
        },
        () => this.lost(isolate),
      );
    } catch {
      this.lost(this.isolate);
    }
  }

  /** The loop's isolate failed: a new one takes every handle again (a failure of an older one is no news). */
  private lost(isolate: ivm.Isolate | undefined): void {
    if (isolate !== this.isolate) return;
    this.failures++;
    this.heldFrom.clear();
    try {
      this.isolate?.dispose();
    } catch {
      // already gone
    }
    this.isolate = undefined;
    // A loop that died without its finally (its isolate disposed) counts as ended, its claim dropped.
    Atomics.compareExchange(this.i32, CALL, CLAIMED, 0);
    Atomics.store(this.i32, LIVE, 0);
    Atomics.store(this.i32, ENDED, this.started);
  }
}

let shared: CallWatchdog | undefined;

/** The process's watchdog (one loop for every instance). */
export function callWatchdog(): CallWatchdog {
  shared ??= new CallWatchdog();
  return shared;
}
