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
 * it may run) into the buffer before each call and clears it after: a few stores, no system call. When the loop finds the same
 * call still running past its deadline, it disposes that instance's isolate (isolated-vm's handles
 * may be used from any thread; disposal interrupts the running call as its time-out would) and
 * notes the call's sequence number, by which the caller tells a call stopped for its time from one
 * whose isolate died of its memory limit. A call so stopped ran about WATCH_POLL_MS past its
 * deadline at most, unless the loop's thread was kept off the CPU.
 *
 * The loop holds the process open while it runs, so it ends after WATCH_IDLE_MS without a call
 * (the next call starts it again) and when the sandbox closes. While it is not running, or not yet
 * holding an instance's handle (handed to it when it starts), calls fall back to isolated-vm's
 * time-out: `arm` answers 0 for them.
 */
import ivm from 'isolated-vm';

/** How often the loop looks at the running call: a stopped call overran its deadline by at most this. */
export const WATCH_POLL_MS = 4;
/** The loop ends after this long without a call into a guest. */
export const WATCH_IDLE_MS = 250;

// Int32 slots of the shared buffer; the call's start (Date.now() ms) and its allowance (ms) are
// Float64s after them.
const NAP = 0; // always 0: the loop sleeps on it, and is woken on it to stop
const CTRL = 1; // non-zero: the loop returns once no call is running (to take new handles, or for good)
const ACTIVE = 2; // the watched instance's number, 0 between calls
const SEQ = 3; // the watched call's sequence number
const FIRED = 4; // the sequence number of the last call the loop stopped
const LIVE = 5; // 1 while a loop watches (or is about to)
const GEN = 6; // the generation of the loop running: the handles it holds (see `arm`)
const TIMES_BYTE = 32;
/** The most one look of the loop counts as time gone by (see LOOP's clock). */
const LONGEST_STEP_MS = 100;

// Runs in the watchdog's own isolate, where the only clock is Date.now(). Time is counted on a
// clock of the loop's own: the wall clock's steps, none backwards and none longer than
// LONGEST_STEP_MS, so a clock set forward (or a machine resumed) ends no call; a loop starved of
// CPU counts short and stops a call late, never early. The loop stops only with no call armed, by
// a handshake on LIVE and ACTIVE (each side stores its own slot, then reads the other's: one of
// them sees the other), so a call is never armed with no loop to watch it. A call is stopped only
// if it is still the same call (sequence and instance read again) after its times were read.
const LOOP = `
const isolates = new Map();
globalThis.watch = (sab, poll, idleMs, gen, ...enlisted) => {
  for (let i = 0; i + 1 < enlisted.length; i += 2) isolates.set(enlisted[i], enlisted[i + 1]);
  for (const [id, iso] of isolates) if (iso.isDisposed) isolates.delete(id);
  const i32 = new Int32Array(sab), times = new Float64Array(sab, ${TIMES_BYTE}, 2);
  Atomics.compareExchange(i32, ${CTRL}, 1, 0);
  Atomics.store(i32, ${GEN}, gen);
  Atomics.store(i32, ${LIVE}, 1);
  let wall = Date.now(), clock = 0, idleSince = 0, seen = -1, since = 0;
  let lastSeq = Atomics.load(i32, ${SEQ});
  for (;;) {
    Atomics.wait(i32, ${NAP}, 0, poll);
    const now = Date.now(), step = now - wall;
    wall = now;
    clock += step < 0 ? 0 : Math.min(step, ${LONGEST_STEP_MS});
    const id = Atomics.load(i32, ${ACTIVE}), seq = Atomics.load(i32, ${SEQ}), start = times[0], allowed = times[1];
    if (id !== 0 || seq !== lastSeq) idleSince = clock;
    lastSeq = seq;
    if (id === 0) {
      if (Atomics.load(i32, ${CTRL}) !== 0 || clock - idleSince >= idleMs) {
        Atomics.store(i32, ${LIVE}, 0);
        if (Atomics.load(i32, ${ACTIVE}) === 0) return 'ended';
        Atomics.store(i32, ${LIVE}, 1);
      }
      continue;
    }
    // First seen now: it began before, by the wall clock (bounded like a step).
    if (seq !== seen) {
      seen = seq;
      since = clock - Math.min(Math.max(0, now - start), ${LONGEST_STEP_MS});
    }
    if (clock - since < allowed || Atomics.load(i32, ${SEQ}) !== seq || Atomics.load(i32, ${ACTIVE}) !== id) continue;
    Atomics.store(i32, ${FIRED}, seq);
    const iso = isolates.get(id);
    if (iso && !iso.isDisposed) iso.dispose();
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
  /** Known instances whose handle no loop has taken yet. */
  private waiting = 0;
  /** Loops started and not yet returned (one running, perhaps one queued behind it). */
  private pending = 0;
  private nextId = 1;
  private seq = 0;
  private gen = 0;
  private armed = false;
  /** Consecutive failures of the loop; past a few it is given up and every call keeps its time-out. */
  private failures = 0;

  private readonly poll: number;
  private readonly idleMs: number;

  constructor(poll = WATCH_POLL_MS, idleMs = WATCH_IDLE_MS) {
    this.poll = poll;
    this.idleMs = idleMs;
  }

  /**
   * Number an isolate for `arm`. A loop that takes its handle starts now (behind the running one,
   * if any), so that it holds it by the time the instance has loaded.
   */
  enlist(isolate: ivm.Isolate): number {
    const id = this.nextId++;
    this.known.set(id, isolate);
    this.waiting++;
    this.start();
    return id;
  }

  /** The isolate is gone: the loop drops its handle when it next starts. */
  forget(id: number): void {
    if (!this.known.delete(id)) return;
    if (!this.heldFrom.delete(id)) this.waiting--;
  }

  /**
   * A call into instance `id`, allowed `ms` of the clock, is about to start. Answers its sequence
   * number, or 0 when this watchdog cannot stop it (the caller gives the call a time-out instead).
   * A call made while another is armed (a nested call) is not watched either.
   */
  arm(id: number, ms: number): number {
    if (this.armed) return 0;
    const from = this.heldFrom.get(id);
    if (from === undefined || from > Atomics.load(this.i32, GEN) || Atomics.load(this.i32, LIVE) !== 1) {
      this.start();
      return 0;
    }
    this.times[0] = Date.now();
    this.times[1] = ms;
    const seq = (this.seq = (this.seq % 0x7fffffff) + 1);
    Atomics.store(this.i32, SEQ, seq);
    Atomics.store(this.i32, ACTIVE, id);
    if (Atomics.load(this.i32, LIVE) !== 1) {
      // The loop was ending: it saw no call, so this one is not watched.
      Atomics.store(this.i32, ACTIVE, 0);
      this.start();
      return 0;
    }
    this.armed = true;
    this.watched++;
    return seq;
  }

  /** The call armed as `seq` is over. */
  disarm(seq: number): void {
    if (seq === 0) return;
    Atomics.store(this.i32, ACTIVE, 0);
    this.armed = false;
  }

  /** Whether the loop stopped call `seq` for running past its deadline (asked once per failed call). */
  fired(seq: number): boolean {
    if (seq === 0 || Atomics.load(this.i32, FIRED) !== seq) return false;
    this.stopped++;
    return true;
  }

  /**
   * End the loop now rather than after WATCH_IDLE_MS (it holds the process open): the sandbox
   * closes. The next call starts it again.
   */
  rest(): void {
    if (Atomics.load(this.i32, LIVE) === 1) this.signal(1);
  }

  private signal(value: number): void {
    Atomics.store(this.i32, CTRL, value);
    Atomics.notify(this.i32, NAP);
  }

  /**
   * Start a loop holding every known handle no loop holds yet. A running loop that lacks some is
   * asked to return, and the new one queues behind it on the watchdog's isolate (it starts as soon
   * as that one has returned).
   */
  private start(): void {
    if (this.failures >= 3 || this.armed) return;
    if (Atomics.load(this.i32, LIVE) === 1) {
      if (this.waiting === 0) return;
      if (Atomics.load(this.i32, CTRL) === 0) this.signal(1);
    }
    if (this.pending >= 2) return;
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
        this.waiting--;
      }
      const shared = new ivm.ExternalCopy(this.sab).copyInto({ release: true });
      const loop = this.watch!.apply(undefined, [shared, this.poll, this.idleMs, gen, ...enlisted], { result: { copy: true } });
      this.pending++;
      loop.then(
        () => {
          this.pending--;
          this.failures = 0;
        },
        () => {
          this.pending--;
          this.lost();
        },
      );
    } catch {
      this.lost();
    }
  }

  /** The loop's isolate failed: a new one takes every handle again. */
  private lost(): void {
    Atomics.store(this.i32, LIVE, 0);
    this.failures++;
    this.heldFrom.clear();
    this.waiting = this.known.size;
    try {
      this.isolate?.dispose();
    } catch {
      // already gone
    }
    this.isolate = undefined;
  }
}

let shared: CallWatchdog | undefined;

/** The process's watchdog (one loop for every instance). */
export function callWatchdog(): CallWatchdog {
  shared ??= new CallWatchdog();
  return shared;
}
