/**
 * What a person asks of a delivery (the management API, the CLI): a manual attempt now (retry), or
 * finished deliveries back to the queue with a fresh schedule (replay). Both go where the
 * installation points today, and are refused when it points nowhere any more.
 */
import { SwitchyardError } from '../errors.ts';
import type { Logger } from '../log/index.ts';
import type { Deliveries } from './contracts.ts';
import type { Endpoints } from './endpoints.ts';
import type { Queue, ReplayRefusal } from './queue.ts';
import { attemptView } from './queue-rows.ts';
import type { Sender } from './sender.ts';

export type Replays = Pick<Deliveries, 'retry' | 'replay' | 'replayOne'>;

export interface ReplaysDeps {
  queue: Queue;
  sender: Pick<Sender, 'attemptNow'>;
  endpoints: Pick<Endpoints, 'currentUrl' | 'urlGone'>;
  log: Logger;
  /** Replayed deliveries are due: every serving process is told (due-signals.ts). */
  dueEverywhere(): void;
}

const noUrl = (id: string, installationId: string, what: string): never => {
  throw new SwitchyardError('conflict', `delivery ${id} cannot be ${what}: its installation ${installationId} has no webhook_url any more`, {
    hint: `set configuration.webhook_url of installation ${installationId} first`,
  });
};

const refused = (id: string, why: ReplayRefusal): never => {
  const messages = {
    not_found: [`no delivery ${id}`, 'list them with GET /api/v1/deliveries'],
    queued: [`delivery ${id} is still queued (pending, retrying or held): it will be sent`, 'retry it for an attempt now'],
    cancelled: [`delivery ${id} was cancelled (its installation was uninstalled)`, 'install the webhook again and send the event again'],
    uninstalled: [`delivery ${id} belongs to an installation that was uninstalled`, 'install the webhook again and send the event again'],
    busy: [`delivery ${id} has an attempt in flight`, 'wait for it to finish, then replay'],
  } as const;
  const [message, hint] = messages[why];
  throw new SwitchyardError(why === 'not_found' ? 'not_found' : 'conflict', message, { hint });
};

export function createReplays(deps: ReplaysDeps): Replays {
  const { queue, sender, endpoints, log } = deps;
  /** A replay's URL: where the installation points today, refused when it points nowhere. */
  const replayUrl = (d: { id?: string; eventType: string; installationId: string; url: string }) => {
    const url = endpoints.currentUrl(d);
    if (url === undefined && endpoints.urlGone(d.installationId)) noUrl(d.id ?? 'replayed', d.installationId, 'replayed');
    return url ?? d.url;
  };
  return {
    async retry(id) {
      const found = await queue.get(id);
      if (found && found.status !== 'cancelled' && endpoints.urlGone(found.installationId)) noUrl(id, found.installationId, 'retried');
      const record = await sender.attemptNow(id);
      if (record === 'busy') {
        const d = await queue.get(id);
        if (!d) throw new SwitchyardError('not_found', `no delivery ${id}`, { hint: 'list them with GET /api/v1/deliveries' });
        if (d.status === 'cancelled')
          throw new SwitchyardError('conflict', `delivery ${id} was cancelled (its installation was uninstalled)`, {
            hint: 'install the webhook again and replay',
          });
        throw new SwitchyardError('conflict', `delivery ${id} has an attempt in flight`, { hint: 'wait for it to finish, then retry' });
      }
      return attemptView(record, (await queue.get(id))!.attempts.length);
    },
    async replay(f) {
      const replayed = await queue.replay(f, Date.now(), replayUrl);
      if (replayed.length) {
        log.info(`${f.status} deliveries replayed`, { deliveries: replayed.length, held: replayed.filter((r) => r.held).length });
        deps.dueEverywhere();
      }
      return replayed;
    },
    async replayOne(id) {
      const r = await queue.replayOne(id, Date.now(), (d) => replayUrl({ ...d, id }));
      if (typeof r === 'string') refused(id, r);
      deps.dueEverywhere();
      return (await queue.get(id))!;
    },
  };
}
