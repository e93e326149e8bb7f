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
  | { t: 'tls'; pair: TlsPair };

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
  | { t: 'tls' };

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
