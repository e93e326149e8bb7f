/**
 * A synchronous connection to PostgreSQL. The store's modules call it as they call better-sqlite3
 * (a statement runs and answers before the next line), so the modules keep one shape on both
 * engines. A thread owns the connection (bridge-worker.ts); this thread posts a request and waits
 * on a shared flag (Atomics.wait) for the answer, which it takes off the port at once
 * (receiveMessageOnPort). The wait blocks this thread for the statement's round trip: measured in
 * docs/postgres.md. Notifications (LISTEN) arrive as ordinary messages, between turns.
 *
 * A request that gets no answer in `timeoutMs` (a server gone silent, a dead thread) fails, and the
 * thread is replaced by a new one with new connections: the next statement tries again, and the
 * listeners are told to look again (what was notified meanwhile is unknown).
 */
import { MessageChannel, receiveMessageOnPort, Worker, type MessagePort } from 'node:worker_threads';
import { SwitchyardError } from '../../errors.ts';
import type { Answer, Request } from './bridge-worker.ts';

declare const SWITCHYARD_PG_WORKER: string | undefined;

export interface BridgeOptions {
  url: string;
  readonly?: boolean;
  applicationName?: string;
  /** How long one request may take before the store gives up on the server (ms). */
  timeoutMs?: number;
}

export interface Notification {
  channel: string;
  payload: string;
}

export class PgError extends Error {
  code?: string;
  detail?: string;
  constructor(message: string, code?: string, detail?: string) {
    super(message);
    this.name = 'PgError';
    this.code = code;
    this.detail = detail;
  }
}

/** The server must answer a statement within this (the thread's own timeouts are shorter, so it says why first). */
export const DEFAULT_TIMEOUT_MS = 20_000;

interface Thread {
  worker: Worker;
  port: MessagePort;
  flag: Int32Array;
  dead: boolean;
}

export class Bridge {
  private thread: Thread;
  private readonly opts: BridgeOptions;
  private readonly timeoutMs: number;
  private listeners = new Map<string, Set<(payload: string) => void>>();
  private reconnectHandlers = new Set<() => void>();
  private sent = new Set<string>();
  closed = false;
  /** The connection the last answer came from (a transaction is bound to one). */
  session = 0;
  /** Threads started so far (a replaced thread's sessions never match a new one's). */
  private generation = 0;

  constructor(opts: BridgeOptions) {
    this.opts = opts;
    this.timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.thread = this.start();
  }

  /** The connection string (it holds the password: never shown). */
  get url(): string {
    return this.opts.url;
  }

  private start(): Thread {
    this.generation++;
    const shared = new SharedArrayBuffer(4);
    const { port1, port2 } = new MessageChannel();
    const workerData = {
      url: this.opts.url,
      flag: shared,
      port: port2,
      applicationName: this.opts.applicationName ?? 'switchyard',
      readonly: this.opts.readonly ?? false,
      // The thread's own limits come first, so a failure says what it was.
      queryTimeoutMs: Math.max(1_000, this.timeoutMs - 2_000),
      connectTimeoutMs: Math.min(5_000, Math.max(1_000, this.timeoutMs - 2_000)),
    };
    // The thread needs none of this process's flags (--input-type, of a script given with -e, stops it loading).
    const execArgv: string[] = [];
    // The single executable has no file to start a thread from: its build hands the thread's bundle in.
    const worker =
      typeof SWITCHYARD_PG_WORKER !== 'undefined' && SWITCHYARD_PG_WORKER
        ? new Worker(SWITCHYARD_PG_WORKER, { eval: true, workerData, transferList: [port2], execArgv })
        : new Worker(new URL('./bridge-worker.ts', import.meta.url), { workerData, transferList: [port2], execArgv });
    const thread: Thread = { worker, port: port1, flag: new Int32Array(shared), dead: false };
    worker.on('message', (m: { notification?: Notification; reconnect?: boolean }) => {
      if (m.notification) for (const fn of this.listeners.get(m.notification.channel) ?? []) this.safely(() => fn(m.notification!.payload));
      if (m.reconnect) this.lost();
    });
    const died = () => {
      thread.dead = true;
    };
    worker.on('error', died);
    worker.on('exit', died);
    // After the listeners: adding a 'message' listener refs the worker again.
    this.holdProcess(thread);
    this.sent.clear();
    return thread;
  }

  /** Held while something listens (a server waits for notifications); otherwise the process may end. */
  private holdProcess(thread = this.thread): void {
    if ([...this.listeners.values()].some((s) => s.size)) thread.worker.ref();
    else thread.worker.unref();
  }

  private safely(fn: () => void): void {
    try {
      fn();
    } catch (e) {
      // A listener's failure is its own (it reports to the store's health); the others still run.
      process.stderr.write(`store: a PostgreSQL notification listener failed: ${(e as Error)?.stack ?? String(e)}\n`);
    }
  }

  /** Notifications may have been missed: every listener looks again. */
  private lost(): void {
    for (const fn of this.reconnectHandlers) this.safely(fn);
  }

  /** A new thread (new connections) in place of one that died or stopped answering. */
  private restart(): void {
    const old = this.thread;
    old.dead = true;
    void old.worker.terminate();
    old.port.close();
    this.thread = this.start();
    for (const channel of this.listeners.keys()) this.send({ op: 'listen', channel });
    // Between turns: the caller of the failed request is still on the stack.
    setImmediate(() => this.lost());
  }

  private send(req: Request): Extract<Answer, { ok: true }> {
    const t = this.thread;
    Atomics.store(t.flag, 0, 0);
    t.port.postMessage(req);
    const deadline = Date.now() + this.timeoutMs;
    for (;;) {
      const waited = Atomics.wait(t.flag, 0, 0, Math.max(1, deadline - Date.now()));
      const got = receiveMessageOnPort(t.port);
      if (got) {
        const a = got.message as Answer;
        if (!a.ok) {
          if (process.env.SWITCHYARD_PG_DEBUG) process.stderr.write(`PG ERROR ${a.message}\n  in: ${(req as { text?: string }).text ?? (req as { name?: string }).name}\n`);
          throw new PgError(a.message, a.code, a.detail);
        }
        this.session = this.generation * 1_000_000 + a.session;
        return a;
      }
      if (waited === 'timed-out' || Date.now() >= deadline) {
        // Whatever the old thread answers later dies with its port: no answer can reach the wrong request.
        this.restart();
        throw new PgError(`PostgreSQL did not answer within ${this.timeoutMs / 1000}s`, '08006');
      }
    }
  }

  private call(req: Request): Extract<Answer, { ok: true }> {
    if (this.closed) throw new PgError('the PostgreSQL connection is closed', '08003');
    if (this.thread.dead) this.restart();
    return this.send(req);
  }

  query(text: string, params?: unknown[], name?: string, session?: number): { rows: Record<string, unknown>[]; rowCount: number } {
    const s = this.threadSession(session);
    if (name && this.sent.has(name)) return this.call({ op: 'query', params, name, session: s });
    const answer = this.call({ op: 'query', text, params, name, session: s });
    if (name) this.sent.add(name);
    return answer;
  }

  /** Several statements in one text, no parameters (migrations). */
  exec(text: string, session?: number): void {
    this.call({ op: 'query', text, simple: true, session: this.threadSession(session) });
  }

  /**
   * A transaction's session as the thread knows it; one begun on a replaced thread matches no
   * connection of the new one, so its next statement fails instead of autocommitting.
   */
  private threadSession(session: number | undefined): number | undefined {
    if (session === undefined) return undefined;
    return Math.floor(session / 1_000_000) === this.generation ? session % 1_000_000 : -1;
  }

  /** `fn` runs, between turns, for every NOTIFY on `channel` by any connection (this one's too). */
  listen(channel: string, fn: (payload: string) => void): () => void {
    let set = this.listeners.get(channel);
    if (!set) {
      this.listeners.set(channel, (set = new Set()));
      this.call({ op: 'listen', channel });
    }
    set.add(fn);
    this.holdProcess();
    return () => {
      set.delete(fn);
      this.holdProcess();
    };
  }

  /** `fn` runs when notifications may have been missed (the listening connection or the thread was replaced). */
  onReconnect(fn: () => void): void {
    this.reconnectHandlers.add(fn);
  }

  close(): void {
    if (this.closed) return;
    try {
      if (!this.thread.dead) this.send({ op: 'close' });
    } catch {
      /* closing anyway */
    }
    this.closed = true;
    void this.thread.worker.terminate();
    this.thread.port.close();
  }
}
