/**
 * The composition root. Start and stop the whole server: store, modules, HTTP. Shutdown is graceful and bounded: stop
 * accepting, let in-flight requests and work finish up to `server.shutdown_timeout`, stop modules in
 * the reverse of their start order (startOrder: each starts after what it needs), close the database cleanly.
 */
import type { AddressInfo, Server } from 'node:net';
import { toNodeHandler } from 'h3/node';
import { sendNodeResponse } from 'srvx/node';
import { withPublicLane } from '../http/public-lane.ts';
import { publicUrlOf, type LoadedConfig } from '../config/index.ts';
import { SwitchyardError } from '../errors.ts';
import { createLogger, type Logger } from '../log/index.ts';
import { modules as defaultModules } from './modules.ts';
import type { Module, Services } from '../module/contract.ts';
import type { ProcessLink } from '../process/serving.ts';
import { connectStore, type Store } from '../store/index.ts';
import { resolveAdminToken } from '../http/auth.ts';
import { announceServing, forgetServingUrl, recordServingUrl } from '../http/announce.ts';
import { consoleUrl } from '../http/origins.ts';
import type { H3 } from 'h3';
import { createApp, errorAnswer } from '../http/app.ts';
import { authThrottleShare, createAuthThrottle } from '../http/throttle.ts';
import { allMigrations } from './migrations.ts';
import { checkNeeds, checkProvided, startOrder } from '../module/capabilities.ts';
import { claimNodeId, useNodeId, type NodeIdClaim } from '../store/lease-owner.ts';
import { answerClientErrors } from '../http/client-error.ts';
import { createListener, type Listener } from '../http/listener.ts';
import { fileTlsSource, type TlsSource } from '../http/tls.ts';

export interface RunningServer {
  url: string;
  port: number;
  services: Services;
  /** Resolves when the server stopped by itself, with why: another node took its id (it has closed). */
  halted: Promise<SwitchyardError>;
  close(): Promise<void>;
}

export async function startServer(
  config: LoadedConfig,
  opts: {
    log?: Logger;
    modules?: Module[];
    /**
     * Where isolates run: in a sandbox worker process of this server ('worker', the default: a
     * guest that takes V8 down costs only that process), or in this process ('in-process': the
     * serving processes of the supervisor, and `--processes 1`).
     */
    sandbox?: 'worker' | 'in-process';
    /** This process serves beside others under the supervisor, which holds the lock (src/process/). */
    link?: ProcessLink;
    /**
     * The certificate with server.tls: under the supervisor it hands it over (it reads and watches
     * the files); without, the server reads and watches them itself.
     */
    tls?: TlsSource;
  } = {},
): Promise<RunningServer> {
  const listed = opts.modules ?? defaultModules;
  checkNeeds(listed, defaultModules);
  // Each module after the providers of what it needs or uses; a cycle stops the start here, before anything opens.
  const modules = startOrder(listed);
  const log = opts.log ?? createLogger({ format: config.log.format, level: config.log.level });
  // Before anything is opened: a pair that cannot serve stops the start with the file and the reason.
  const tls = opts.tls ?? (config.server.tls.cert ? fileTlsSource(config.server.tls, log) : undefined);
  let store: Store;
  try {
    store = await connectStore(config.data_dir, {
      ...(opts.link ? { shared: true } : { lock: true }),
      url: config.store || undefined,
      migrations: allMigrations(),
      log,
    });
  } catch (e) {
    tls?.close();
    throw e;
  }
  useNodeId(config.data_dir);
  // A server alone is its node (under the supervisor, the supervisor claimed the id). Should another
  // node take the id (this one's lock lost with a database restart), it stops serving (fail closed).
  let halt!: (e: SwitchyardError) => void;
  const halted = new Promise<SwitchyardError>((resolve) => (halt = resolve));
  let nodeId: NodeIdClaim | undefined;
  let lost: SwitchyardError | undefined;
  let running: RunningServer | undefined;
  if (!opts.link) {
    try {
      nodeId = await claimNodeId(store, config.data_dir, {
        log,
        onLost(e) {
          log.error(e.message, { code: e.code, hint: e.hint });
          lost = e;
          if (running) void running.close().then(() => halt(e));
        },
      });
    } catch (e) {
      store.close();
      tls?.close();
      throw e;
    }
  }
  const adminToken = resolveAdminToken(config, true)!;
  const services: Services = {
    config,
    log,
    store,
    adminToken,
    startedAt: Date.now(),
    closing: false,
    // Each serving process counts the guesses it sees: a guesser whose connections spread over N
    // processes gets the one budget's rate at most, never N times it (one process may block it sooner).
    authThrottle: createAuthThrottle(authThrottleShare(opts.link?.count ?? 1)),
    sandboxInProcess: opts.sandbox === 'in-process',
    processes: opts.link,
  };
  let listened!: () => void;
  services.listening = new Promise<void>((resolve) => (listened = resolve));
  const stops: Array<() => Promise<void> | void> = [];
  let listener: Listener | undefined;

  const stopModules = async () => {
    for (const stop of stops.reverse()) {
      try {
        await stop();
      } catch (e) {
        log.error('module failed to stop cleanly', { error: e as Error });
      }
    }
  };

  try {
    for (const m of modules) {
      const stop = await m.start?.(services);
      if (typeof stop === 'function') stops.push(stop);
      checkProvided(m, services);
    }
    const app = composeApp(services, modules);
    // A renewed certificate is served to new connections from then on (those open keep theirs).
    // Heard before the listener is made from the current one: none arrives in between unseen.
    tls?.onPair((pair) => {
      try {
        listener?.setPair(pair);
        log.debug('TLS certificate served from now on', { subject: pair.subject, valid_to: pair.validTo, ...(opts.link ? { process: opts.link.index } : {}) });
      } catch (e) {
        log.error('the new TLS certificate cannot be served; the previous one still is', { code: 'tls_invalid', error: (e as Error).message });
      }
    });
    // The public endpoints' HTTP/1.1 requests go through the lane in front of the app (http/public-lane.ts).
    const handler = withPublicLane(toNodeHandler(app), {
      lane: () => services.publicLane,
      errorAnswer: (error, method, url) => errorAnswer(error, services, method, url),
      onResponse: (method, route, status) => services.onHttpResponse?.(method, route, status),
      send: sendNodeResponse,
    });
    listener = createListener(handler, tls?.current, {
      // A quiet answer (an invocation waiting) lasts up to the sandbox's wall time: HTTP/2 streams may stay silent that long.
      silentMs: Math.max(120_000, config.sandbox.wall_time + 30_000),
      clientErrors: answerClientErrors,
    });
    await listen(listener.server, config.server.host, config.server.port);
  } catch (e) {
    listener?.server.close();
    tls?.close();
    await stopModules();
    await nodeId?.release();
    store.close();
    throw e;
  }
  const served = listener;
  const port = (listener.server.address() as AddressInfo).port;
  // With port 0 the public URL learns the real port.
  const publicUrl = config.server.public_url ? config.publicUrl : publicUrlOf(config, port);
  services.config = { ...config, publicUrl, server: { ...config.server, port } };
  const console = consoleUrl(services);
  if (new URL(console).origin === new URL(publicUrl).origin) {
    listener.server.close();
    tls?.close();
    await stopModules();
    await nodeId?.release();
    store.close();
    throw new SwitchyardError('config_invalid', `server.console_url ${console} is the public endpoints' origin (${publicUrl})`, {
      hint: "integration pages served there would run with the console's authority: give the console its own host name",
    });
  }
  // The first line a person reads, before the integrations' (they start loading now). Under the
  // supervisor, process 0 says it once for all of them.
  const announces = !opts.link || opts.link.announces;
  if (announces) {
    announceServing(log, config, { url: publicUrl, console: `${console}/console/`, processes: opts.link?.count, tls: tls?.current });
    recordServingUrl(config.data_dir, publicUrl);
  } else log.debug('switchyard serving', { url: publicUrl, process: opts.link?.index });
  listened();

  let closing: Promise<void> | undefined;
  running = {
    url: publicUrl,
    port,
    services,
    halted,
    close() {
      closing ??= (async () => {
        services.closing = true;
        tls?.close();
        await served.close(Date.now() + config.server.shutdown_timeout);
        await stopModules();
        await nodeId?.release();
        await store.close();
        // Under the supervisor the URL stays while it serves: it forgets it when it stops.
        if (!opts.link) forgetServingUrl(config.data_dir);
        (opts.link ? log.debug : log.info).call(log, 'switchyard stopped');
      })();
      return closing;
    },
  };
  // Lost while starting: it stops now that it can.
  if (lost) void running.close().then(() => halt(lost!));
  return running;
}

/** The HTTP app with every module's routes. */
export function composeApp(services: Services, modules: Module[]): H3 {
  return createApp(services, {
    routes: (app) => {
      for (const m of modules) m.routes?.(app, services);
    },
  });
}

function listen(server: Server, host: string, port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const onError = (e: NodeJS.ErrnoException) => {
      server.off('listening', onListening);
      if (e.code === 'EADDRINUSE')
        reject(
          new SwitchyardError('port_in_use', `port ${port} on ${host} is already in use`, {
            hint: 'stop whatever holds it, or start on another port: `switchyard serve --port <port>` (0 picks a free one), or server.port in config.yaml',
          }),
        );
      else
        reject(
          new SwitchyardError('listen_failed', `cannot listen on ${host}:${port} (${e.code ?? e.message})`, {
            hint: 'check server.host and server.port in config.yaml',
          }),
        );
    };
    const onListening = () => {
      server.off('error', onError);
      resolve();
    };
    server.once('error', onError);
    server.once('listening', onListening);
    server.listen(port, host);
  });
}
