import { defineCommand } from 'citty';
import cluster from 'node:cluster';
import type { RunningServer } from '../server/server.ts';
import { publicUrlOf, type LoadedConfig } from '../config/index.ts';
import { configArg, configFrom } from './common.ts';
import { PORT_ENV, PORT_TAKEN_EXIT } from '../process/messages.ts';

export default defineCommand({
  meta: { name: 'serve', description: 'Run the server: integrations, runtime endpoints, management API and webhook delivery' },
  args: {
    ...configArg,
    port: { type: 'string', description: 'override server.port' },
    processes: {
      type: 'string',
      description: 'override server.processes: serving processes under a supervisor (0: one per core; 1: one process, no supervisor, for debugging)',
    },
  },
  async run({ args }) {
    const config = configFrom(args);
    const { SwitchyardError } = await import('../errors.ts');
    if (args.port !== undefined) {
      const port = Number(args.port);
      if (!Number.isInteger(port) || port < 0 || port > 65535) {
        throw new SwitchyardError('bad_request', `--port must be a whole number from 0 to 65535, got "${args.port}"`);
      }
      config.server.port = port;
      if (!config.server.public_url) config.publicUrl = publicUrlOf(config);
    }
    if (args.processes !== undefined) {
      const n = Number(args.processes);
      if (!Number.isInteger(n) || n < 0 || n > 64)
        throw new SwitchyardError('bad_request', `--processes must be a whole number from 0 to 64, got "${args.processes}"`);
      config.server.processes = n;
    }
    const { servingPlace, createServingLink } = await import('../process/serving.ts');
    const place = cluster.isWorker ? servingPlace() : undefined;
    // This process serves (a serving process, or the only one): see process/serving-heap.ts.
    if (place || config.server.processes === 1) (await import('../process/serving-heap.ts')).tuneServingHeap();
    if (place) return onFullDisk(config.data_dir, () => serving(config, place, createServingLink));
    if (config.server.processes !== 1) {
      const { supervise } = await import('../process/supervisor.ts');
      const { createLogger } = await import('../log/index.ts');
      // citty does not hand back a subcommand's return value (see cli/run.ts).
      process.exitCode = await onFullDisk(config.data_dir, () => supervise(config, createLogger({ format: config.log.format, level: config.log.level })));
      return process.exitCode;
    }
    // One process, no supervisor: isolates run here, so a guest that takes V8 down takes the server.
    // (Imported here, not above: the supervisor never serves, and the server's modules are most of a start's CPU.)
    const { startServer } = await import('../server/server.ts');
    const server = await onFullDisk(config.data_dir, () => startServer(config, { sandbox: 'in-process' }));
    // Stopped by a signal (0), or by itself: another node took its id (1; it said why).
    const code = await Promise.race([untilSignal(server, true).then(() => 0), server.halted.then(() => 1)]);
    process.exitCode = code;
    return code;
  },
});

/**
 * A full disk met by a file the server writes as it starts (the lock's pid file, the admin token,
 * the node id, the serving URL...) ends it with storage_full and its hint rather than a stack. The
 * store names its own failures (store/health.ts storageStartError); other file system errors are
 * left as they are (an EACCES on the integrations folder is no storage fault).
 */
async function onFullDisk<T>(dataDir: string, start: () => Promise<T>): Promise<T> {
  try {
    return await start();
  } catch (e) {
    const { SwitchyardError } = await import('../errors.ts');
    const { storageStartError } = await import('../store/health.ts');
    const full = e instanceof SwitchyardError ? undefined : storageStartError(e, dataDir);
    throw full?.code === 'storage_full' ? full : e;
  }
}

/** A serving process under the supervisor: it stops when told (SIGTERM) or when the supervisor is gone. */
async function serving(
  config: LoadedConfig,
  place: { index: number; count: number; announces: boolean },
  createServingLink: typeof import('../process/serving.ts').createServingLink,
): Promise<number> {
  const port = Number(process.env[PORT_ENV]);
  if (port) {
    config.server.port = port;
    if (!config.server.public_url) config.publicUrl = publicUrlOf(config);
  }
  const link = createServingLink(config.data_dir, place);
  const tls = config.server.tls.cert ? await link.tls() : undefined;
  let server: RunningServer;
  try {
    server = await (await import('../server/server.ts')).startServer(config, { sandbox: 'in-process', link, tls });
  } catch (e) {
    // The supervisor picked this port for the first process and something took it since: it picks
    // another (quietly). A replacement keeps the port the others serve on, and says why it cannot.
    if (port && place.announces && (e as { code?: string }).code === 'port_in_use') process.exit(PORT_TAKEN_EXIT);
    throw e;
  }
  await untilSignal(server, false);
  link.close();
  // The cluster channel would keep the process alive.
  process.exit(0);
}

function untilSignal(server: RunningServer, alone: boolean): Promise<void> {
  return new Promise<void>((resolve) => {
    let signals = 0;
    const stop = (sig: string) => {
      signals++;
      if (signals > 1) {
        server.services.log.warn('second signal: exiting now', { signal: sig });
        process.exit(1);
      }
      if (alone) server.services.log.info('shutting down', { signal: sig });
      server.close().then(resolve, resolve);
    };
    process.on('SIGTERM', () => stop('SIGTERM'));
    if (alone) process.on('SIGINT', () => stop('SIGINT'));
    // Ctrl-C reaches the whole process group: the supervisor drains its processes with SIGTERM.
    else process.on('SIGINT', () => {});
    // The supervisor is gone (killed): nobody replaces this process or holds the lock; stop.
    if (!alone) process.on('disconnect', () => stop('supervisor gone'));
  });
}
