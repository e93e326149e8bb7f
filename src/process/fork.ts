/**
 * Forking serving processes: every one runs this same program with SERVING_ENV set (Node's cluster
 * module), all accepting on the same port. The supervisor (supervisor.ts) decides when, and wires
 * what each says.
 */
import cluster from 'node:cluster';
import { createServer, type AddressInfo } from 'node:net';
import { isExecutable } from '../native/index.ts';
import { NO_SNAPSHOT, snapshotOff } from '../sandbox/node-snapshot.ts';
import { ANNOUNCE_ENV, PORT_ENV, SERVING_ENV } from './messages.ts';
import type { ServingProcess, Slot } from './slots.ts';

/**
 * V8's pool of background threads (its collector's helpers) for a serving process: one, not Node's
 * four. A serving process is one core's worth of work beside the others (one per core), and on a
 * core of its own four helpers take turns with the main thread: a young-generation collection that
 * shares out its work waits for helpers the scheduler has not run yet. Measured on one pinned core
 * (hello public endpoint at 7,500 req/s, half the peak, open loop, three 5 s runs each, alternated):
 * collector pauses 5.4-6.5 ms at the median with four (2.4 with one), p99 7.2-23.6 ms with four and
 * 3.4-4.5 ms with one (one noisy run: 7.5-16.9), the peak unchanged (15,300-16,600 req/s both);
 * two processes on two cores: the same req/s and CPU a request within the noise. The single
 * executable carries the same option for every process (scripts/build.ts; it takes no Node options
 * from outside). Run from source with --v8-pool-size given (in NODE_OPTIONS or on the command
 * line), the user's is kept.
 */
export const V8_POOL_OPTION = '--v8-pool-size=1';

/** The Node options of a serving process forked from this one (not the executable: it carries its own). */
export function servingExecArgv(execArgv = process.execArgv, nodeOptions = process.env.NODE_OPTIONS ?? ''): string[] {
  const given = [...execArgv, ...nodeOptions.split(/\s+/)].some((a) => /^--v8[-_]pool[-_]size\b/.test(a));
  // Serving processes run isolates: without Node's snapshot, however the supervisor was started.
  const withoutSnapshot = snapshotOff(execArgv, nodeOptions) ? execArgv : [NO_SNAPSHOT, ...execArgv];
  return given ? withoutSnapshot : [...withoutSnapshot, V8_POOL_OPTION];
}

/** Set the cluster module up for serving processes, once, before the first fork. */
export function prepareForks(): void {
  // The serving processes accept from the shared socket themselves: a process whose main thread
  // is held takes no new connection (with round-robin, the supervisor would hand it one, and a
  // connection handed to a process that then dies is never answered nor closed).
  cluster.schedulingPolicy = cluster.SCHED_NONE;
  // The single executable carries its Node options inside (and takes every argument as its own).
  cluster.setupPrimary({ serialization: 'json', ...(isExecutable() ? { exec: process.execPath, execArgv: [] } : { execArgv: servingExecArgv() }) });
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
