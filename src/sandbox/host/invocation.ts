/**
 * One invocation on one instance, with its limits enforced by the host: CPU time (inline, every
 * call into the guest has what is left of it as its time-out; otherwise a watchdog on the isolate's
 * cpuTime) and a wall-clock deadline (both dispose the isolate, so they also stop code that runs
 * after the guest awaited something), a cap on outbound requests, response size, log lines, and the
 * waitUntil drain time after the response. Operations of an invocation that has ended are never
 * completed, so nothing leaks into the next one.
 */
import { describeLimit, failure, logLine } from '../limits.ts';
import type { Envelope, InvocationResult, LimitName, LogLine, WorkerSettings } from '../types.ts';
import type { Death, GuestInstance, InstanceHooks } from './instance.ts';
import { ownBytes } from '../bytes.ts';
import { isCanonicalRequest } from './incoming.ts';
import { fetchThroughApi, InvocationTokens, OpError, parseFetchArg, performApi, performCrypto, performFetch } from './ops.ts';

const MAX_PENDING_TIMERS = 10_000;
// The guest library stops a guest at 10 000 operations per invocation; this is the host's backstop.
const MAX_OPS = 10_100;
let sequence = 0;

// Random bytes for the guest's crypto.getRandomValues, drawn from the OS in 64 kB batches.
let pool = new Uint8Array(0);
let poolAt = 0;
function entropy(): Uint8Array {
  if (poolAt + 256 > pool.length) {
    pool = globalThis.crypto.getRandomValues(new Uint8Array(65536));
    poolAt = 0;
  }
  return pool.slice(poolAt, (poolAt += 256));
}
// Added to an inline call's time-out (see budget): room for a call that was preempted.
const INLINE_GRACE_MS = 10;
const levels = new Set(['debug', 'info', 'log', 'warn', 'error']);

interface Op {
  abort?: AbortController;
  timer?: NodeJS.Timeout;
}

export interface RunOutcome {
  result: InvocationResult;
  /** Settles when the invocation is completely over (waitUntil work included). */
  done: Promise<void>;
  /** Over already (no waitUntil work): the instance is free now. */
  over: boolean;
}

export class Invocation implements InstanceHooks {
  private readonly inst: GuestInstance;
  private readonly envelope: Envelope;
  /** The API tokens this invocation may send (its environment's, and installation tokens minted for it). */
  private tokens?: InvocationTokens;
  private readonly settings: WorkerSettings;
  private readonly onLateLog: (line: LogLine) => void;
  private readonly logs: LogLine[] = [];
  private logCount = 0;
  private responded = false;
  private finished = false;
  private readonly ops = new Map<number, Op>();
  private timers = 0;
  private opsStarted = 0;
  private subrequests = 0;
  private started = 0;
  private cpuStart = 0;
  private cpuAtEnd = 0;
  private deadline = 0;
  private wallTimer?: NodeJS.Timeout;
  private cpuTimer?: NodeJS.Timeout;
  private breachInfo: { limit: LimitName; used?: number } | null = null;
  private death: { why: Death; message: string } | null = null;
  private stop!: () => void;
  private readonly stopped = new Promise<'stopped'>((r) => (this.stop = () => r('stopped')));
  private readonly seq = ++sequence;
  /** Whether calls into the guest run inline (see instance.ts); fixed for the invocation. */
  readonly inline: boolean;
  // The answer, when it came during the dispatch call itself (the usual inline case: no promise).
  private answerValue: unknown = undefined;
  private hasAnswer = false;
  private answer: ((out: unknown) => void) | null = null;
  private drainedResolve!: () => void;
  private readonly drained = new Promise<'drained'>((r) => (this.drainedResolve = () => r('drained')));
  /** Which limit the time-out of the current inline call stands for. */
  private budgetLimit: 'cpu_time' | 'wall_time' | 'wait_until' = 'cpu_time';
  /** CPU time of this invocation's inline calls, in ms (the host thread's own clock). */
  private inlineCpu = 0;

  constructor(inst: GuestInstance, envelope: Envelope, settings: WorkerSettings, onLateLog: (line: LogLine) => void) {
    this.inst = inst;
    this.envelope = envelope;
    this.settings = settings;
    this.onLateLog = onLateLog;
    this.inline = inst.mode.inline();
  }

  /**
   * Time-out of the next call into the guest. Inline: twice what is left of the CPU limit (counted
   * in CPU time of the host's thread, see charge) plus INLINE_GRACE_MS, since the time-out runs on
   * the clock and a call can be preempted (a call that returns is charged its real CPU time, and
   * stopped past the limit); or the wall-clock deadline when that is nearer. (Calls on
   * isolated-vm's threads get the deadline; the CPU watchdog covers them.)
   */
  budget(): number {
    const wall = this.deadline - Date.now();
    if (!this.inline) return wall;
    const left = this.limits.cpu_time - this.inlineCpu;
    const cpu = 2 * left + INLINE_GRACE_MS;
    this.budgetLimit = cpu <= wall ? 'cpu_time' : this.responded ? 'wait_until' : 'wall_time';
    return Math.min(cpu, wall);
  }

  /**
   * CPU time of an inline call; an invocation past its CPU limit is stopped once the call is back
   * (for a call that failed, once its outbox was taken: see died and unhandled).
   */
  charge(ms: number, failed: boolean): void {
    this.inlineCpu += ms;
    if (!failed && this.inlineCpu > this.limits.cpu_time) this.breach('cpu_time', this.inlineCpu);
  }

  private get limits() {
    return this.settings.limits;
  }

  /**
   * Run the invocation. Inline, a handler that answers without waiting for anything answers during
   * the dispatch call itself, and its outcome comes back synchronously (so the host can hand the
   * same instance to the next invocation of its batch: see SandboxHost.invoke); otherwise a promise.
   */
  run(): RunOutcome | Promise<RunOutcome> {
    this.started = performance.now();
    const limits = this.limits;
    const inst = this.inst;
    inst.hooks = this;
    for (const l of inst.startupLogs.splice(0)) this.log(l.level, `(top level) ${l.message}`);
    // Inline, CPU time is the thread's inside the calls (see charge): the isolate's clock is not read.
    if (!this.inline) this.cpuStart = inst.cpuMs();
    this.deadline = Date.now() + limits.wall_time;
    // Inline, the guest runs only inside calls bounded by budget(): no timers unless it waits.
    if (!this.inline) {
      this.armWallTimer('wall_time', limits.wall_time);
      this.armCpuWatchdog();
    }
    const input = {
      event: this.envelope.event,
      // Inline, the environment crosses only if the code reads it (see environment()): copying it
      // in was about a sixth of a hello call. Off the inline path a read would block the isolate's
      // thread on this one's event loop: it goes with the input.
      ...(this.inline ? {} : { environment: this.envelope.environment }),
      body: this.envelope.fetchBody ? ownBytes(this.envelope.fetchBody) : null,
      // Inline, random bytes come from the host when the guest needs them (see guest crypto.ts).
      ...(this.inline ? {} : { entropy: entropy() }),
      responseBodyLimit: limits.response_body,
      logLines: limits.log_lines,
      canonical: this.envelope.event.type === 'fetch' && isCanonicalRequest(this.envelope.event.request),
      toEvents: this.envelope.dispatch === 'events',
    };
    if (inst.disposed) this.died(inst.disposedFor ? 'broken' : 'memory', 'the isolate was disposed before the invocation started');
    // A canonical request without a body (the usual public request) crosses as JSON text: one string
    // copied in, where the tree of objects and arrays cost isolated-vm's serializer more than
    // JSON.stringify here and JSON.parse there. Canonical means strings only (see incoming.ts).
    else inst.dispatch(this.seq, input.canonical && !input.body ? JSON.stringify(input) : input);
    if (this.hasAnswer) return this.conclude(this.answerValue);
    if (this.breachInfo || this.death) return this.conclude('stopped');
    if (this.inline) this.armWallTimer('wall_time', limits.wall_time);
    return Promise.race([new Promise((r) => (this.answer = r)), this.stopped]).then((out) => this.conclude(out));
  }

  /** The answer (or 'stopped') is in: the invocation's result, and whether waitUntil work goes on. */
  private conclude(out: any): RunOutcome {
    const limits = this.limits;
    const inst = this.inst;
    // Console lines reach the host before the answer: both are callbacks queued in call order.
    if (!this.inline && !inst.disposed) this.cpuAtEnd = inst.cpuMs();
    const duration = () => performance.now() - this.started;
    const cpu = () => (this.inline ? this.inlineCpu : Math.max(0, (inst.disposed ? this.cpuAtEnd : inst.cpuMs()) - this.cpuStart));

    const fail = (result: InvocationResult): RunOutcome => {
      this.finish();
      return { result, done: Promise.resolve(), over: true };
    };
    if (out === 'stopped' || this.breachInfo || this.death) {
      const stopped = this.stoppedError();
      return fail(failure(stopped, { logs: this.logs, durationMs: duration(), cpuMs: cpu() }));
    }
    if (out?.limit === 'response_body') {
      this.breach('response_body');
      return fail(
        failure(
          { kind: 'limit', limit: 'response_body', message: describeLimit('response_body', limits) },
          { logs: this.logs, durationMs: duration(), cpuMs: cpu() },
        ),
      );
    }
    const problem = checkOutput(out, limits.response_body);
    if (problem) {
      inst.dispose('invalid output');
      return fail(failure({ kind: 'exception', message: problem }, { logs: this.logs, durationMs: duration(), cpuMs: cpu() }));
    }
    const result: InvocationResult = {
      status: out.status,
      headers: out.headers,
      body: out.body,
      logs: this.logs,
      durationMs: duration(),
      cpuMs: cpu(),
    };
    if (out.error) {
      result.error = { kind: 'exception', message: String(out.error.message), stack: typeof out.error.stack === 'string' ? out.error.stack : undefined };
      this.logs.push(logLine('error', `uncaught ${result.error.stack ?? result.error.message}`));
    }
    this.responded = true;
    const waits = out.waitUntil > 0;
    const done = waits ? this.drain() : Promise.resolve(this.finish());
    return { result: { ...result, logs: [...this.logs] }, done, over: !waits };
  }

  /** After the response: let waitUntil work finish within sandbox.wait_until (the CPU limit still applies). */
  private async drain(): Promise<void> {
    const limits = this.limits;
    clearTimeout(this.wallTimer);
    this.deadline = Date.now() + limits.wait_until;
    this.armWallTimer('wait_until', limits.wait_until);
    this.inst.drain(this.seq);
    await Promise.race([this.drained, this.stopped]);
    if (this.breachInfo || this.death) {
      const e = this.stoppedError();
      this.late(logLine('error', `limit ${e.limit ?? e.kind}: ${e.message}`));
    }
    this.finish();
  }

  /** The error for an invocation that was stopped or whose isolate died. */
  private stoppedError(): { kind: 'limit' | 'crash' | 'exception'; message: string; limit?: string } {
    const limits = this.limits;
    if (this.breachInfo) return { kind: 'limit', limit: this.breachInfo.limit, message: describeLimit(this.breachInfo.limit, limits, this.breachInfo.used) };
    // Why, as the instance found it (see Death), never the error's text: the guest can write that.
    const why = this.death?.why;
    const msg = this.death?.message ?? 'the isolate stopped';
    if (why === 'memory' || (this.inst.disposed && !this.inst.disposedFor)) {
      this.breachInfo = { limit: 'memory_mb' };
      return { kind: 'limit', limit: 'memory_mb', message: describeLimit('memory_mb', limits) };
    }
    if (why === 'timed-out') {
      this.inst.dispose('wall_time');
      return { kind: 'limit', limit: 'wall_time', message: describeLimit('wall_time', limits) };
    }
    this.inst.dispose('failed call');
    return { kind: 'exception', message: `the integration's answer could not be read: ${msg}` };
  }

  private armWallTimer(limit: 'wall_time' | 'wait_until', ms: number): void {
    clearTimeout(this.wallTimer);
    this.wallTimer = setTimeout(() => this.breach(limit, limit === 'wall_time' ? ms : undefined), ms);
  }

  private armCpuWatchdog(): void {
    const limit = this.limits.cpu_time;
    const check = () => {
      if (this.finished) return;
      if (this.inst.disposed) return;
      this.cpuAtEnd = this.inst.cpuMs();
      const used = this.cpuAtEnd - this.cpuStart;
      if (used > limit) return this.breach('cpu_time', used);
      // CPU time cannot grow faster than the clock: check again when the budget could be spent.
      this.cpuTimer = setTimeout(check, Math.max(1, Math.ceil(limit - used)));
    };
    this.cpuTimer = setTimeout(check, Math.max(1, limit));
  }

  /** End the invocation for a limit: dispose the isolate, which stops the guest wherever it is. */
  breach(limit: LimitName, used?: number): void {
    if (this.finished || this.breachInfo) return;
    this.breachInfo = { limit, used };
    if (!this.inst.disposed) this.cpuAtEnd = this.inst.cpuMs();
    this.inst.dispose(limit);
    this.stop();
  }

  /** The isolate died under us (out of memory while running a continuation), or a call ran out of time. */
  died(why: Death, message: string): void {
    if (this.finished) return;
    if (this.inline && why === 'timed-out') return this.breach(this.budgetLimit, this.budgetLimit === 'cpu_time' ? this.inlineCpu : undefined);
    this.death ??= { why, message };
    this.stop();
  }

  private finish(): void {
    if (this.finished) return;
    this.finished = true;
    clearTimeout(this.wallTimer);
    clearTimeout(this.cpuTimer);
    for (const op of this.ops.values()) {
      op.abort?.abort();
      if (op.timer) clearTimeout(op.timer);
    }
    this.ops.clear();
    // inst.hooks keeps pointing here until the next invocation: a rejection isolated-vm reports
    // just after the answer still reaches this invocation's logs (as a late line).
  }

  /** True when the instance can serve another invocation. */
  get reusable(): boolean {
    return !this.inst.disposed;
  }

  // ---- guest calls -------------------------------------------------------------------------

  respond(kind: 'dispatch' | 'drain', seq: number, value: unknown): void {
    if (seq !== this.seq || this.finished) return;
    if (kind === 'drain') return this.drainedResolve();
    if (this.hasAnswer) return;
    this.hasAnswer = true;
    this.answerValue = value;
    this.answer?.(value);
  }

  /**
   * What the guest reads as context.environment, copied in on its first read: this invocation's
   * own, never another's (a caller holding an older sequence number is refused), and not once it is
   * over.
   */
  environment(seq: number): unknown {
    if (seq !== this.seq || this.finished) throw new Error('this invocation is over: its environment is no longer available');
    return this.envelope.environment;
  }

  unhandled(message: string): void {
    const line = logLine('error', `Uncaught (in promise) ${message}`);
    if (this.finished) this.late(line);
    else if (++this.logCount <= this.limits.log_lines) this.record(line);
    // The call that left the rejection behind was charged without a check (see charge).
    if (this.inline && this.inlineCpu > this.limits.cpu_time) this.breach('cpu_time', this.inlineCpu);
  }

  log(level: string, message: string): void {
    if (this.finished) return;
    const cap = this.limits.log_lines;
    this.logCount++;
    if (this.logCount > cap) {
      if (this.logCount === cap + 1) this.record(logLine('warn', `log output truncated: more than sandbox.log_lines = ${cap} lines in this invocation`));
      return;
    }
    this.record(logLine(levels.has(level) ? (level as LogLine['level']) : 'log', message.length > 16_384 ? `${message.slice(0, 16_384)}...` : message));
  }

  private record(line: LogLine): void {
    if (this.responded) this.late(line);
    else this.logs.push(line);
  }

  /** A line about the invocation after it ended, for its record. */
  lateLine(level: LogLine['level'], message: string): void {
    this.late(logLine(level, message));
  }

  private late(line: LogLine): void {
    try {
      this.onLateLog(line);
    } catch {
      // a failing listener must not break the invocation
    }
  }

  cancel(id: number): void {
    const op = this.ops.get(id);
    if (!op) return;
    this.ops.delete(id);
    op.abort?.abort();
    if (op.timer) {
      clearTimeout(op.timer);
      this.timers--;
    }
  }

  start(op: string, id: number, arg: unknown): void {
    if (this.finished || this.ops.has(id) || ++this.opsStarted > MAX_OPS) return;
    switch (op) {
      case 'sleep': {
        if (this.timers >= MAX_PENDING_TIMERS) return this.fail(id, new OpError(`too many pending timers (at most ${MAX_PENDING_TIMERS})`, 'RangeError'));
        const ms = Math.min(Math.max(0, Number(arg) || 0), 2 ** 31 - 1);
        this.timers++;
        const timer = setTimeout(() => {
          this.timers--;
          this.succeed(id, null);
        }, ms);
        this.ops.set(id, { timer });
        return;
      }
      case 'fetch':
      case 'api': {
        this.subrequests++;
        if (this.subrequests > this.limits.subrequests) {
          this.ops.set(id, {});
          return this.breach('subrequests', this.subrequests);
        }
        const abort = new AbortController();
        this.ops.set(id, { abort });
        const environment = this.envelope.environment;
        this.tokens ??= new InvocationTokens(environment);
        const tokens = this.tokens;
        const work =
          op === 'fetch'
            ? Promise.resolve().then(async () => {
                const req = parseFetchArg(arg, this.limits);
                return (await fetchThroughApi(req, environment, this.limits, abort.signal, tokens)) ?? performFetch(req, this.settings_(), abort.signal);
              })
            : performApi(arg, environment, this.limits, abort.signal, tokens);
        work.then(
          (v) => this.succeed(id, v),
          (e) => this.fail(id, e),
        );
        return;
      }
      case 'digest':
      case 'hmac':
      case 'hmac-verify': {
        this.ops.set(id, {});
        try {
          const done = performCrypto(op, arg);
          if (done instanceof Promise)
            done.then(
              (v) => this.succeed(id, v),
              (e) => this.fail(id, e),
            );
          else this.succeed(id, done);
        } catch (e) {
          this.fail(id, e);
        }
        return;
      }
      default:
        this.ops.set(id, {});
        this.fail(id, new OpError(`unknown host operation ${JSON.stringify(op)}`));
    }
  }

  private settings_() {
    return { limits: this.limits, allowPrivateNetworks: this.settings.allowPrivateNetworks, serverOrigin: this.settings.serverOrigin };
  }

  private succeed(id: number, value: unknown): void {
    if (this.finished || !this.ops.delete(id)) return;
    this.inst.complete(id, true, value);
  }

  private fail(id: number, e: unknown): void {
    if (this.finished || !this.ops.delete(id)) return;
    const err = e as Error;
    this.inst.complete(id, false, {
      name: err?.name === 'TimeoutError' || err?.name === 'AbortError' ? err.name : 'TypeError',
      message: err?.message ?? String(e),
    });
  }
}

const MAX_RESPONSE_HEADERS = 1000;
const MAX_RESPONSE_HEADER_BYTES = 256 * 1024;
const headerName = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
// What Node's HTTP server accepts in a header value (anything else would fail the answer there).
const badHeaderValue = /[^\t\x20-\x7e\x80-\xff]/;

/** Check what the guest library answered (it runs next to untrusted code, so trust nothing). */
function checkOutput(out: any, responseLimit: number): string | null {
  if (!out || typeof out !== 'object') return 'the integration answered no response';
  if (!Number.isInteger(out.status) || out.status < 200 || out.status > 599) {
    return out.status === 0 ? 'the integration answered Response.error()' : `the integration answered an invalid status ${String(out.status)}`;
  }
  if (!Array.isArray(out.headers) || out.headers.length > MAX_RESPONSE_HEADERS) return `the integration answered more than ${MAX_RESPONSE_HEADERS} headers`;
  let headerBytes = 0;
  for (const h of out.headers as unknown[]) {
    if (!Array.isArray(h) || h.length !== 2 || typeof h[0] !== 'string' || typeof h[1] !== 'string' || !headerName.test(h[0]) || badHeaderValue.test(h[1])) {
      return 'the integration answered malformed headers';
    }
    headerBytes += h[0].length + h[1].length;
  }
  if (headerBytes > MAX_RESPONSE_HEADER_BYTES) return `the integration answered more than ${MAX_RESPONSE_HEADER_BYTES / 1024} kB of headers`;
  const body: unknown = out.body;
  // A string (the Response was made from one) is measured here, in bytes, whatever the guest said.
  const bytes = typeof body === 'string' ? (body.length * 3 <= responseLimit ? 0 : Buffer.byteLength(body)) : body instanceof Uint8Array ? body.byteLength : -1;
  if (bytes < 0) return 'the integration answered a malformed body';
  if (bytes > responseLimit) return `the response body is larger than sandbox.response_body = ${responseLimit} bytes`;
  return null;
}
