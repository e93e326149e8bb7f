/**
 * A synchronous connection to PostgreSQL. The store's modules call it as they call better-sqlite3
 * (a statement runs and answers before the next line), so the modules keep one shape on both
 * engines. A thread owns the connection (bridge-worker.ts); this thread posts a request and waits
 * on a shared flag (Atomics.wait) for the answer, which it takes off the port at once
 * (receiveMessageOnPort). The wait blocks this thread for the statement's round trip: measured in
 * docs/postgres.md. Notifications (LISTEN) arrive as ordinary messages, between turns.
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

export class Bridge {
  private worker: Worker;
  private port: MessagePort;
  private flag: Int32Array;
  private timeoutMs: number;
  private listeners = new Map<string, Set<(payload: string) => void>>();
  private reconnectHandlers = new Set<() => void>();
  closed = false;
  /** The connection the last answer came from (a transaction is bound to one). */
  session = 0;

  constructor(opts: BridgeOptions) {
    const shared = new SharedArrayBuffer(4);
    this.flag = new Int32Array(shared);
    this.timeoutMs = opts.timeoutMs ?? 60_000;
    const { port1, port2 } = new MessageChannel();
    this.port = port1;
    const workerData = { url: opts.url, flag: shared, port: port2, applicationName: opts.applicationName ?? 'switchyard', readonly: opts.readonly ?? false };
    // The thread needs none of this process's flags (--input-type, of a script given with -e, stops it loading).
    const execArgv: string[] = [];
    // The single executable has no file to start a thread from: its build hands the thread's bundle in.
    this.worker =
      typeof SWITCHYARD_PG_WORKER !== 'undefined' && SWITCHYARD_PG_WORKER
        ? new Worker(SWITCHYARD_PG_WORKER, { eval: true, workerData, transferList: [port2], execArgv })
        : new Worker(new URL('./bridge-worker.ts', import.meta.url), { workerData, transferList: [port2], execArgv });
    this.worker.unref();
    this.worker.on('message', (m: { notification?: Notification; reconnect?: boolean }) => {
      const run = (fn: () => void) => {
        try {
          fn();
        } catch (e) {
          // A listener's failure is its own (it reports to the store's health); the others still run.
          process.stderr.write(`store: a PostgreSQL notification listener failed: ${(e as Error)?.stack ?? String(e)}\n`);
        }
      };
      if (m.notification) for (const fn of this.listeners.get(m.notification.channel) ?? []) run(() => fn(m.notification!.payload));
      if (m.reconnect) for (const fn of this.reconnectHandlers) run(fn);
    });
    this.worker.on('error', () => {
      this.closed = true;
    });
  }

  private call(req: Request): Extract<Answer, { ok: true }> {
    if (this.closed) throw new PgError('the PostgreSQL connection is closed', '08003');
    Atomics.store(this.flag, 0, 0);
    this.port.postMessage(req);
    const deadline = Date.now() + this.timeoutMs;
    for (;;) {
      const waited = Atomics.wait(this.flag, 0, 0, Math.max(1, deadline - Date.now()));
      const got = receiveMessageOnPort(this.port);
      if (got) {
        const a = got.message as Answer;
        if (!a.ok) {
          if (process.env.SWITCHYARD_PG_DEBUG) process.stderr.write(`PG ERROR ${a.message}\n  in: ${(req as { text?: string }).text}\n`);
          throw new PgError(a.message, a.code, a.detail);
        }
        this.session = a.session;
        return a;
      }
      if (waited === 'timed-out' || Date.now() >= deadline) {
        // The thread may still answer later; nothing can tell which request that answer was for.
        this.closed = true;
        void this.worker.terminate();
        throw new SwitchyardError('storage_failed', `PostgreSQL did not answer within ${this.timeoutMs / 1000}s`);
      }
    }
  }

  private sent = new Set<string>();

  query(text: string, params?: unknown[], name?: string, session?: number): { rows: Record<string, unknown>[]; rowCount: number } {
    if (name && this.sent.has(name)) return this.call({ op: 'query', params, name, session });
    const answer = this.call({ op: 'query', text, params, name, session });
    if (name) this.sent.add(name);
    return answer;
  }

  /** Several statements in one text, no parameters (migrations). */
  exec(text: string, session?: number): void {
    this.call({ op: 'query', text, simple: true, session });
  }

  /** `fn` runs, between turns, for every NOTIFY on `channel` by any connection (this one's too). */
  listen(channel: string, fn: (payload: string) => void): () => void {
    let set = this.listeners.get(channel);
    if (!set) {
      this.listeners.set(channel, (set = new Set()));
      this.call({ op: 'listen', channel });
    }
    set.add(fn);
    // Held while something listens: a server waits for notifications with nothing else to do.
    this.worker.ref();
    return () => {
      set.delete(fn);
      if (![...this.listeners.values()].some((s) => s.size)) this.worker.unref();
    };
  }

  /** `fn` runs when the listening connection came back after a loss (notifications in between are gone). */
  onReconnect(fn: () => void): void {
    this.reconnectHandlers.add(fn);
  }

  close(): void {
    if (this.closed) return;
    try {
      this.call({ op: 'close' });
    } catch {
      /* closing anyway */
    }
    this.closed = true;
    void this.worker.terminate();
  }
}
