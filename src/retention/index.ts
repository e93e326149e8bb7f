/**
 * Retention: a croner job on `retention.schedule` (server local time) that purges history older
 * than `retention.keep`, `retention.batch_size` rows per batch (see retention.ts). Attaches
 * `services.retention`; `POST /api/v1/retention/run` and `switchyard retention run` run it now.
 */
import { Cron } from 'croner';
import type { H3 } from 'h3';
import { SwitchyardError } from '../errors.ts';
import { CRON_HINT } from '../config/index.ts';
import { route } from '../http/route.ts';
import { retentionReportSchema, retentionStatusSchema } from './api.ts';
import { defineModule, type Services, type ServicesWith } from '../module/contract.ts';
import { createRetention, type Purger, type Retention } from './retention.ts';
import { tryStoreWideLock, type StoreWideLock } from '../store/lock.ts';

/** The store-wide lock of the scheduled retention run (the nodes on one PostgreSQL store share it). */
const RETENTION_LOCK = 'retention';

declare module '../module/contract.ts' {
  interface Capabilities {
    retention?: Retention;
    /** The scheduled job (its next run is shown); absent while no schedule runs. */
    retentionCron?: Cron;
  }
}

export { createRetention, type Retention, type RetentionReport, type RetentionDeps, type Purger, type RetentionSettings } from './retention.ts';

/** The purgers of the modules this server runs, in order (deliveries and handler runs first: events wait for theirs to go). */
export function serverPurgers(services: Services): Purger[] {
  const out: Purger[] = [];
  const { deliveries, events, invocations, handlerRuns } = services;
  if (deliveries) {
    out.push({ name: 'deliveries', purge: (before, limit) => deliveries.purgeFinished(before, limit) });
    out.push({ name: 'failedDeliveries', keep: 'keep_failed', purge: (before, limit) => deliveries.purgeFailed(before, limit) });
  }
  if (handlerRuns) {
    out.push({ name: 'handlerRuns', purge: (before, limit) => handlerRuns.purgeFinished(before, limit) });
    out.push({ name: 'failedHandlerRuns', keep: 'keep_failed', purge: (before, limit) => handlerRuns.purgeFailed(before, limit) });
  }
  if (events) out.push({ name: 'events', purge: (before, limit) => events.purgeOrphans(before, limit) });
  if (invocations) out.push({ name: 'invocations', purge: (before, limit) => invocations.purgeBefore(before, limit) });
  return out;
}

/** A cron pattern croner accepts, or a config error naming the key. */
function schedule(pattern: string, run: () => void): Cron {
  try {
    return new Cron(pattern, { unref: true, protect: true, catch: true }, run);
  } catch (e) {
    throw new SwitchyardError('config_invalid', `retention.schedule "${pattern}" is not a cron expression: ${(e as Error).message}`, {
      where: 'retention.schedule',
      hint: CRON_HINT,
    });
  }
}

export function retentionRoutes(app: H3, services: ServicesWith<'retention'>): void {
  const retention = () => services.retention;
  const cron = () => services.retentionCron;

  route(
    app,
    {
      method: 'GET',
      path: '/api/v1/retention',
      summary: 'Retention settings, next scheduled run and the last run report',
      auth: 'admin',
      response: retentionStatusSchema,
    },
    () => {
      const cfg = services.config.retention;
      return {
        schedule: cfg.schedule,
        keepMs: cfg.keep,
        keepFailedMs: cfg.keep_failed,
        batchSize: cfg.batch_size,
        nextRunAt: cron()?.nextRun()?.toISOString() ?? null,
        running: retention().running,
        lastRun: retention().lastRun,
      };
    },
  );

  route(
    app,
    {
      method: 'POST',
      path: '/api/v1/retention/run',
      summary: 'Purge history older than retention.keep now (joins a run in progress)',
      auth: 'admin',
      response: retentionReportSchema,
    },
    () => retention().run(),
  );
}

export const retentionModule = defineModule({
  name: 'retention',
  provides: ['retention', 'retentionCron'],
  // Purges the history of the modules the server runs (serverPurgers, read at each run).
  uses: ['deliveries', 'handlerRuns', 'events', 'invocations'],
  async start(services) {
    const log = services.log.child({ module: 'retention' });
    const retention = createRetention({
      purgers: () => serverPurgers(services),
      settings: () => services.config.retention,
      log,
      stopping: () => services.closing,
      checkpoint: () => services.store.checkpointPassive(),
    });
    services.retention = retention;
    // Every serving process knows the schedule (GET /api/v1/retention answers it); the first one runs it.
    // On PostgreSQL the first process of every node gets here: one of them runs it, the others skip.
    const job = schedule(services.config.retention.schedule, () => {
      if (services.processes?.index) return;
      void (async () => {
        let lock: StoreWideLock | undefined;
        try {
          lock = await tryStoreWideLock(services.store.database, RETENTION_LOCK);
        } catch (e) {
          return log.error('retention run failed', { error: e as Error });
        }
        if (!lock) return log.debug('retention: another node is running it');
        try {
          await retention.run();
        } catch (e) {
          log.error('retention run failed', { error: e as Error });
        } finally {
          await lock.release();
        }
      })();
    });
    services.retentionCron = job;
    return () => job.stop();
  },
  routes(app, services) {
    retentionRoutes(app, services);
  },
});
