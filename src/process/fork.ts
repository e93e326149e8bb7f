/**
 * Forking serving processes: every one runs this same program with SERVING_ENV set (Node's cluster
 * module), all accepting on the same port. The supervisor (supervisor.ts) decides when, and wires
 * what each says.
 */
import cluster from 'node:cluster';
import { createServer, type AddressInfo } from 'node:net';
import { isExecutable } from '../native/index.ts';
import { ANNOUNCE_ENV, PORT_ENV, SERVING_ENV } from './messages.ts';
import type { ServingProcess, Slot } from './slots.ts';

/** Set the cluster module up for serving processes, once, before the first fork. */
export function prepareForks(): void {
  // The serving processes accept from the shared socket themselves: a process whose main thread
  // is held takes no new connection (with round-robin, the supervisor would hand it one, and a
  // connection handed to a process that then dies is never answered nor closed).
  cluster.schedulingPolicy = cluster.SCHED_NONE;
  // The single executable carries its Node options inside (and takes every argument as its own).
  cluster.setupPrimary({ serialization: 'json', ...(isExecutable() ? { exec: process.execPath, execArgv: [] } : {}) });
}

/**
 * Start the serving process of `slot` (one of `count`) and make it the slot's, not yet listening.
 * `port`: the one every process listens on, when the supervisor picked it; `announce`: this one
 * says the start line (src/http/announce.ts).
 */
export function forkServing(slot: Slot, opts: { count: number; port: number | undefined; announce: boolean }): ServingProcess {
  const w = cluster.fork({
    [SERVING_ENV]: `${slot.index}/${opts.count}`,
    ...(opts.port ? { [PORT_ENV]: String(opts.port) } : {}),
    ...(opts.announce ? { [ANNOUNCE_ENV]: '1' } : {}),
  });
  slot.serving = w;
  slot.ready = false;
  slot.loaded = false;
  slot.unresponsive = false;
  slot.lastPong = Date.now();
  return w;
}

/**
 * A free port on `host`. With port 0 each process would pick a port of its own (cluster shares a
 * socket per address and port asked for): the supervisor picks one, once, for all of them.
 */
export function freePort(host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, host, () => {
      const { port } = probe.address() as AddressInfo;
      probe.close(() => resolve(port));
    });
  });
}
