/**
 * A serving process's side of the supervisor (see supervisor.ts): heartbeat answers, the crash
 * record, the parked integrations, the "leases were given back" signal and metrics gathering.
 * The server's modules reach it as `services.processes` (absent when the process is alone).
 */
import type { SandboxHooks } from '../sandbox/in-process.ts';
import type { TlsPair, TlsSource } from '../http/tls.ts';
import { CrashRecord } from './crash-record.ts';
import { ANNOUNCE_ENV, SERVING_ENV, type Parking, type ToServing, type ToSupervisor } from './messages.ts';
import { crashRecordFile } from './paths.ts';
import type { LoansLink } from '../webhooks/slot-loans.ts';

export interface ProcessLink {
  /** Serving processes sharing the store and the port. */
  count: number;
  /** This one's place (0..count-1); process 0 runs the once-per-service jobs (retention). */
  index: number;
  /** This process says the start line once it listens (the first start of process 0). */
  announces?: boolean;
  sandboxHooks: SandboxHooks;
  /** Called when another process made work due (its leases given back, a resume, a replay); `deliveriesOnly` when only deliveries may be. */
  onDue(fn: (deliveriesOnly: boolean) => void): void;
  /** Tell the other processes that this one made deliveries due (they look at once, not at their next refresh); `deliveriesOnly`: nothing else. */
  announceDue(deliveriesOnly?: boolean): void;
  /** Integrations parked by the supervisor, for views. */
  parked(): Parking[];
  /** Ask the supervisor to run a parked integration again. */
  resume(name: string): void;
  /** What this process contributes to GET /metrics (called when any process is scraped). */
  setSnapshot(fn: () => unknown): void;
  /** Every live process's snapshot, this one's included. */
  collect(): Promise<unknown[]>;
  /** Tell the supervisor this process has loaded its integrations. */
  loaded(): void;
  /** Whether every serving process has loaded its integrations, as the supervisor last said. */
  allReady(): boolean;
  /**
   * The certificate of server.tls as the supervisor read it, then each new one it accepts: a
   * process started while the files on disk are broken still gets the pair that serves.
   */
  tls(): Promise<TlsSource>;
  /** Delivery slots lent between the serving processes (webhooks/slot-loans.ts). */
  loans: LoansLink;
  close(): void;
}

/** This process's place when the supervisor started it (`SWITCHYARD_SERVING=<index>/<count>`), else undefined. */
export function servingPlace(env = process.env): { index: number; count: number; announces: boolean } | undefined {
  const m = /^(\d+)\/(\d+)$/.exec(env[SERVING_ENV] ?? '');
  return m ? { index: Number(m[1]), count: Number(m[2]), announces: env[ANNOUNCE_ENV] === '1' } : undefined;
}

export function createServingLink(dataDir: string, place: { index: number; count: number; announces?: boolean }): ProcessLink {
  if (!process.send) throw new Error('a serving process is started by the supervisor (it talks over an IPC channel)');
  const send = (msg: ToSupervisor) => {
    if (process.connected) process.send!(msg, undefined, {}, () => {});
  };
  const record = new CrashRecord(crashRecordFile(dataDir, place.index));
  const parked = new Map<string, Parking>();
  const dueListeners: Array<(deliveriesOnly: boolean) => void> = [];
  const waiting = new Map<number, (snapshots: unknown[]) => void>();
  let snapshot: () => unknown = () => null;
  let nextId = 1;
  let allReady = false;
  let pair: TlsPair | undefined;
  const pairListeners: Array<(pair: TlsPair) => void> = [];
  const pairWaiters: Array<() => void> = [];
  const heldWaiters: Array<(held: Record<string, number>, waitMs?: number) => void> = [];
  const askListeners: Array<(pool: string) => void> = [];
  const grantListeners: Array<(pool: string, n: number) => void> = [];

  const onMessage = (msg: ToServing) => {
    switch (msg.t) {
      case 'ping':
        return send({ t: 'pong' });
      case 'parked':
        parked.clear();
        for (const p of msg.parked) parked.set(p.name, p);
        return;
      case 'due':
        for (const fn of dueListeners) fn(msg.deliveriesOnly === true);
        return;
      case 'collect': {
        let s: unknown = null;
        try {
          s = snapshot();
        } catch {
          /* a process that cannot say is left out */
        }
        return send({ t: 'snapshot', id: msg.id, snapshot: s });
      }
      case 'collected':
        waiting.get(msg.id)?.(msg.snapshots);
        waiting.delete(msg.id);
        return;
      case 'readiness':
        allReady = msg.ready;
        return;
      case 'tls':
        pair = msg.pair;
        for (const fn of pairWaiters.splice(0)) fn();
        for (const fn of pairListeners) fn(msg.pair);
        return;
      case 'slots-held':
        for (const fn of heldWaiters.splice(0)) fn(msg.held, msg.waitMs);
        return;
      case 'slots-ask':
        for (const fn of askListeners) fn(msg.pool);
        return;
      case 'slots-grant':
        for (const fn of grantListeners) fn(msg.pool, msg.n);
        return;
    }
  };
  process.on('message', onMessage);

  return {
    count: place.count,
    index: place.index,
    announces: place.announces,
    sandboxHooks: {
      started: (name, version) => record.started(name, version),
      ended: (name) => record.ended(name),
      dispatching: (name) => record.dispatching(name),
      culprit: (name) => record.culprit(name),
      parked(name, version) {
        const p = parked.get(name);
        return p && (p.version === version || !p.version) ? p.reason : undefined;
      },
    },
    onDue: (fn) => void dueListeners.push(fn),
    announceDue: (deliveriesOnly) => send({ t: 'due', ...(deliveriesOnly ? { deliveriesOnly: true } : {}) }),
    parked: () => [...parked.values()],
    resume(name) {
      parked.delete(name); // at once here; the supervisor tells the others
      send({ t: 'resume', name });
    },
    setSnapshot(fn) {
      snapshot = fn;
    },
    collect() {
      const id = nextId++;
      return new Promise((resolve) => {
        const timer = setTimeout(() => {
          waiting.delete(id);
          resolve([snapshot()]);
        }, 3_000);
        waiting.set(id, (s) => {
          clearTimeout(timer);
          resolve(s);
        });
        send({ t: 'collect', id });
      });
    },
    loaded() {
      send({ t: 'loaded' });
    },
    allReady: () => allReady,
    async tls() {
      if (!pair) {
        const answered = new Promise<void>((resolve) => pairWaiters.push(resolve));
        send({ t: 'tls' });
        await answered;
      }
      return {
        get current() {
          return pair!;
        },
        onPair: (fn) => void pairListeners.push(fn),
        close: () => void pairListeners.splice(0),
      };
    },
    loans: {
      held(fn) {
        heldWaiters.push(fn);
        send({ t: 'slots-held' });
      },
      want: (pool) => send({ t: 'slots-want', pool }),
      lent: (pool, n) => send({ t: 'slots-lent', pool, n }),
      returned: (pool, n) => send({ t: 'slots-return', pool, n }),
      onAsk: (fn) => void askListeners.push(fn),
      onGrant: (fn) => void grantListeners.push(fn),
    },
    close() {
      process.off('message', onMessage);
      record.close();
    },
  };
}
