/**
 * The supervisor: `switchyard serve` with `server.processes` other than 1. It never serves a
 * request. It holds the data directory's lock, prepares the store (migrations, the leases a
 * previous run left), starts N serving processes that all accept on the same port (Node's cluster
 * module; each process accepts for itself, so a busy one takes fewer) and keeps them running.
 * `supervise` composes its parts, each a module with its own contract:
 *
 * - fork.ts: forking a serving process into its slot (slots.ts: what the supervisor knows of each);
 * - lease-recovery.ts: a serving process that dies is replaced at once; the leases it held are given
 *   back (its attempts recorded as interrupted and due again), so another process sends them;
 * - heartbeat.ts: one that stops answering the heartbeat (an isolate call that never returns holds
 *   its main thread) is killed and replaced;
 * - parking.ts: the integration to blame for a death (see crash-record.ts) is named in the log, and
 *   parked after PARK_AFTER deaths within PARK_WINDOW_MS: its invocations answer 503 until a new
 *   version of it loads or `switchyard integrations resume <name>`;
 * - metrics-relay.ts: a scrape's snapshots gathered from every serving process;
 * - readiness.ts: every serving process told whether all have loaded their integrations;
 * - drain.ts: SIGTERM (or SIGINT) drains every serving process, then the lock is released.
 *
 * Why several processes and not one: isolated-vm can abort or wedge its whole process on a V8
 * out-of-memory, and the isolates run in the process that took the request (no IPC hop).
 */
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { mkdirSync } from 'node:fs';
import type { LoadedConfig } from '../config/index.ts';
import type { Logger } from '../log/index.ts';
import { connectStore, type Store } from '../store/index.ts';
import { readCrashRecord } from './crash-record.ts';
import { crashRecordFile } from './paths.ts';
import { PORT_TAKEN_EXIT, type ToServing, type ToSupervisor } from './messages.ts';
import { forgetServingUrl } from '../http/announce.ts';
import { resolveAdminToken } from '../http/auth.ts';
import { allMigrations } from '../server/migrations.ts';
import { claimNodeId, type NodeIdClaim } from '../store/lease-owner.ts';
import { fileTlsSource } from '../http/tls.ts';
import { broadcast as broadcastTo, createSlots, send, type ServingProcess, type Slot } from './slots.ts';
import { startHeartbeat } from './heartbeat.ts';
import { createMetricsRelay } from './metrics-relay.ts';
import { blameFor, createParkingLot } from './parking.ts';
import { createLeaseRecovery } from './lease-recovery.ts';
import { createReadiness } from './readiness.ts';
import { createDrain } from './drain.ts';
import { createSupervisorLoans } from './slot-loans.ts';
import { forkServing, freePort, prepareForks } from './fork.ts';

/** How many times a port is picked for server.port 0 when each is taken before the first process listens. */
const PORT_PICKS = 5;

/**
 * `server.processes` as a count: 0 means one per core this process may run on (its CPU affinity
 * counts: `taskset -c 0` is one core). On one core that is one serving process, still supervised
 * (replaced when it dies, the socket kept meanwhile): two processes taking turns on one core cost
 * each request ~40 % more CPU than one (measured with scripts/bench/dataplane.ts), every hour, for
 * what the second one is worth only while the first is being replaced.
 */
export function processCount(configured: number): number {
  return configured > 0 ? configured : availableParallelism();
}

export async function supervise(config: LoadedConfig, log: Logger): Promise<number> {
  const startedAt = Date.now();
  const count = processCount(config.server.processes);
  // The supervisor reads the certificate (a pair that cannot serve stops the start here, before any
  // process), watches its files, and hands each serving process the pair it accepted last.
  const tls = config.server.tls.cert ? fileTlsSource(config.server.tls, log) : undefined;
  let store: Store;
  try {
    store = await connectStore(config.data_dir, { lock: true, url: config.store || undefined, migrations: allMigrations(), log });
  } catch (e) {
    tls?.close();
    throw e;
  }
  resolveAdminToken(config, true); // made once here, before N processes race to create it
  mkdirSync(join(config.data_dir, 'run'), { recursive: true, mode: 0o700 });
  const leases = createLeaseRecovery(store, { maxAttempts: () => config.webhooks.max_retries + 1, log, due: () => broadcast({ t: 'due' }) });
  /** Another node took this node's id (its lock was lost with a database restart): nothing more is done as this id. */
  let idTaken = false;
  let nodeId: NodeIdClaim;
  try {
    nodeId = await claimNodeId(store, config.data_dir, {
      log,
      onLost(e) {
        idTaken = true;
        log.error(e.message, { code: e.code, hint: e.hint });
        exitCode = 1;
        stop('another node took this node id');
      },
    });
  } catch (e) {
    store.close();
    tls?.close();
    throw e;
  }
  // No serving process of this node runs yet: its leases left in the store belong to processes that are gone.
  await leases.recoverLeftovers();

  const slots = createSlots(count);
  const parking = createParkingLot(log, (parked) => broadcast({ t: 'parked', parked }));
  const metrics = createMetricsRelay();
  const loans = createSupervisorLoans(slots, () => config.webhooks.timeout);
  /** Per slot, when its last process died (not a clean exit): its exchanges may still be running for `timeout`. */
  const diedAt = new Map<number, number>();
  let port: number | undefined;
  /** Picks of a free port that were taken before the first process listened on them (server.port 0): at most PORT_PICKS. */
  let portsTaken = 0;
  let everReady = false;
  let startedOnce = false;
  /** Every serving process listened once: a start after that is a replacement. */
  let allStarted = false;
  let exitCode = 0;
  let finish!: () => void;
  const finished = new Promise<void>((r) => (finish = r));

  prepareForks();

  const broadcast = (msg: ToServing) => broadcastTo(slots, msg);
  /** Tell every process whether all of them have loaded their integrations, when that changes. */
  const readiness = createReadiness(slots, { log, startedAt });

  function start(slot: Slot): void {
    // The first process says the start line as soon as it listens, before its integrations load.
    const first = slot.index === 0 && !startedOnce;
    startedOnce = true;
    const w = forkServing(slot, { count, port, announce: first });
    w.on('listening', () => {
      slot.ready = true;
      slot.failedStarts = 0;
      slot.lastPong = Date.now();
      everReady = true;
      send(w, { t: 'parked', parked: parking.parked() });
      send(w, { t: 'readiness', ready: readiness.allLoaded });
      // The first process to listen shows the port and the config work; the others follow it.
      for (const s of slots) if (!s.serving && !drain.stopping && !allStarted) start(s);
      if (allStarted) log.info('serving process started', { process: slot.index, pid: w.process.pid });
      if (slots.every((s) => s.ready)) allStarted = true;
    });
    w.on('message', (msg: ToSupervisor) => onMessage(slot, w, msg));
    w.on('exit', (code, signal) => void onExit(slot, w, code, signal));
  }

  function onMessage(slot: Slot, w: ServingProcess, msg: ToSupervisor): void {
    switch (msg.t) {
      case 'pong':
        slot.lastPong = Date.now();
        return;
      case 'loaded':
        slot.loaded = true;
        readiness.changed();
        return;
      case 'resume':
        parking.resume(msg.name);
        return;
      case 'due':
        for (const s of slots) if (s.serving !== w) send(s.serving, msg); // as it came: deliveriesOnly with it
        return;
      case 'tls':
        if (tls) send(w, { t: 'tls', pair: tls.current });
        return;
      case 'collect': {
        // Metrics from every process, for the one answering GET /metrics.
        const live = slots.filter((s) => s.ready && s.serving?.isConnected()).map((s) => s.serving!);
        metrics.collect(w, msg.id, live);
        return;
      }
      case 'snapshot':
        metrics.snapshot(msg.id, msg.snapshot);
        return;
    }
    // Slots on loan are the slot's: what a process that is gone says no longer counts (its replacement asked already).
    if (slot.serving !== w) return;
    switch (msg.t) {
      case 'slots-held': {
        // A predecessor that died with exchanges in flight: they may still be running at their
        // endpoints for up to `timeout`, so its replacement sends nothing and lends nothing until then.
        const died = diedAt.get(slot.index);
        const waitMs = died === undefined ? 0 : Math.max(0, died + config.webhooks.timeout - Date.now());
        return send(w, { t: 'slots-held', held: loans.heldBy(slot.index), ...(waitMs ? { waitMs } : {}) });
      }
      case 'slots-want':
        return loans.want(slot, msg.pool);
      case 'slots-lent':
        return loans.lent(slot, msg.pool, msg.n);
      case 'slots-return':
        return loans.returned(slot, msg.pool, msg.n);
    }
  }

  async function onExit(slot: Slot, w: ServingProcess, code: number | null, signal: string | null): Promise<void> {
    if (slot.serving !== w) return;
    slot.serving = null;
    loans.exited(slot);
    if (code !== 0 || signal) diedAt.set(slot.index, Date.now());
    else diedAt.delete(slot.index);
    const wasReady = slot.ready;
    slot.ready = false;
    slot.loaded = false;
    readiness.changed();
    const record = readCrashRecord(crashRecordFile(config.data_dir, slot.index));
    const pid = w.process.pid;
    // Its leases go back now rather than when they run out: another process sends them. Not once
    // another node holds this id: its processes' leases may carry the same prefix (same pid).
    const released = idTaken ? 0 : await leases.giveBack(pid);
    if (released) broadcast({ t: 'due' });
    if (drain.stopping) {
      if (slots.every((s) => !s.serving)) finish();
      return;
    }
    if (!wasReady && !everReady && code === PORT_TAKEN_EXIT) {
      // The port picked for server.port 0 was taken before the first process listened: pick again.
      let picked: number | undefined;
      if (portsTaken < PORT_PICKS) {
        portsTaken++;
        log.debug('the port picked was taken before the first serving process listened; picking another', { port });
        picked = await freePort(config.server.host).catch((e: Error) => {
          log.error('cannot pick a free port', { host: config.server.host, error: e });
          return undefined;
        });
      } else
        log.error(`no port picked for server.port 0 was still free when the first serving process listened (${PORT_PICKS} picks)`, {
          host: config.server.host,
        });
      if (picked !== undefined) {
        port = picked;
        startedOnce = false;
        if (!drain.stopping) start(slot);
        return;
      }
      exitCode = 2;
      stop('no serving process could start');
      return;
    }
    if (!wasReady && !everReady) {
      // The first process cannot even start (port in use, bad config...): it said why; stop, and
      // say so in that order rather than announce a replacement that will not come.
      log.error('the first serving process exited before it listened (its error is above)', {
        process: slot.index,
        pid,
        ...(code !== null ? { code } : {}),
        ...(signal ? { signal } : {}),
      });
      exitCode = code || 1;
      stop('no serving process could start');
      return;
    }
    const { scores, blamed } = blameFor(record);
    log.error('a serving process died; starting another', {
      process: slot.index,
      pid,
      ...(code !== null ? { code } : {}),
      ...(signal ? { signal } : {}),
      ...(slot.unresponsive ? { cause: `stopped answering for ${config.server.heartbeat_timeout / 1000} s and was killed` } : {}),
      ...(blamed.length ? { integration: blamed.join(', ') } : {}),
      ...(scores.size > blamed.length ? { also_running: [...scores.keys()].filter((n) => !blamed.includes(n)).join(', ') } : {}),
      ...(released ? { leases_released: released } : {}),
    });
    parking.noteCrash(scores, record);
    slot.failedStarts = wasReady ? 0 : slot.failedStarts + 1;
    const delay = slot.failedStarts ? Math.min(10_000, 250 * 2 ** slot.failedStarts) : 0;
    setTimeout(() => {
      if (!drain.stopping && !slot.serving) start(slot);
    }, delay).unref();
  }

  tls?.onPair((pair) => broadcast({ t: 'tls', pair }));

  const stopHeartbeat = startHeartbeat(slots, config.server.heartbeat_timeout);
  const drain = createDrain(slots, { log, shutdownTimeoutMs: config.server.shutdown_timeout, onStop: stopHeartbeat, finish });
  /** Drain every serving process, then stop (once). */
  function stop(why: string): void {
    drain.stop(why);
  }
  drain.listen();

  // With port 0 each process would pick a port of its own (cluster shares a socket per address and
  // port asked for): pick one here, once, for all of them.
  if (!config.server.port) port = await freePort(config.server.host);
  if (!drain.stopping) start(slots[0]);
  await finished;
  tls?.close();
  forgetServingUrl(config.data_dir);
  await nodeId.release();
  await store.close();
  log.info('switchyard stopped');
  return exitCode;
}
