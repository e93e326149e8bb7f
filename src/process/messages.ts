/** What the supervisor and its serving processes say to each other (cluster IPC, JSON). */
import type { TlsPair } from '../http/tls.ts';

export interface Parking {
  name: string;
  /** The version that crashed; a new version runs again. */
  version: string;
  reason: string;
  at: number;
}

export type ToServing =
  | { t: 'ping' }
  | { t: 'parked'; parked: Parking[] }
  /** Another process's leases were given back: deliveries and handler runs are due (deliveries alone: only they may be). */
  | { t: 'due'; deliveriesOnly?: boolean }
  | { t: 'collect'; id: number }
  | { t: 'collected'; id: number; snapshots: unknown[] }
  /** Whether every serving process has loaded its integrations (sent whenever that changes). */
  | { t: 'readiness'; ready: boolean }
  /** The certificate to serve (server.tls): the answer to `tls`, and again whenever the supervisor accepts a new one. */
  | { t: 'tls'; pair: TlsPair }
  /** What this process's slot holds of each pool beyond or short of its share (the answer to `slots-held`; process/slot-loans.ts). */
  | { t: 'slots-held'; held: Record<string, number>; waitMs?: number }
  /** Another process wants more of `pool`: lend what is not in use (answered with `slots-lent`). */
  | { t: 'slots-ask'; pool: string }
  /** `n` more slots of `pool` are this process's. */
  | { t: 'slots-grant'; pool: string; n: number };

export type ToSupervisor =
  | { t: 'pong' }
  | { t: 'resume'; name: string }
  /** This process made deliveries due (a resume, a replay; stored due at ingest: deliveries alone): the others should look now. */
  | { t: 'due'; deliveriesOnly?: boolean }
  /** Gather every process's metrics snapshot (answered with `collected`). */
  | { t: 'collect'; id: number }
  | { t: 'snapshot'; id: number; snapshot: unknown }
  /** This process has loaded its integrations (the start-up pass is over). */
  | { t: 'loaded' }
  /** Which certificate to serve (server.tls): the supervisor read the files, and watches them. */
  | { t: 'tls' }
  /** What this process's slot holds of each pool beyond or short of its share (asked once, before it delivers). */
  | { t: 'slots-held' }
  /** Deliveries wait here for more of `pool` than this process holds. */
  | { t: 'slots-want'; pool: string }
  /** `n` slots of `pool` are lent, already off this process's share. */
  | { t: 'slots-lent'; pool: string; n: number }
  /** `n` slots of `pool` borrowed earlier go back (already off this process's holding) to those that lent them. */
  | { t: 'slots-return'; pool: string; n: number };

export const SERVING_ENV = 'SWITCHYARD_SERVING';
/** The port the first serving process listens on, for the others (when server.port is 0). */
export const PORT_ENV = 'SWITCHYARD_SERVING_PORT';
/**
 * A serving process's exit code when the port the supervisor picked for it (server.port 0) was
 * taken before it listened: anything on the machine may bind it, or use it as an outgoing
 * connection's own port, between the pick and the listen. The supervisor picks again.
 */
export const PORT_TAKEN_EXIT = 75;
/** Set for the first start of serving process 0: it says the start line (see src/http/announce.ts). */
export const ANNOUNCE_ENV = 'SWITCHYARD_SERVING_ANNOUNCE';
