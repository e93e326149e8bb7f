/**
 * The installations' lifecycle, as the webhooks module follows it inside each step's transaction
 * (`tx`; subscribed at start, see index.ts): a webhook installation gets its signing secret, its
 * queued deliveries follow its URL, are held while it is paused or has no URL, and are cancelled
 * when it is uninstalled. The steps are `services.webhooks`' too (contracts.ts, WebhooksService).
 */
import type { Logger } from '../log/index.ts';
import type { Tx } from '../store/contract.ts';
import type { InstallationLifecycle, WebhooksService } from './contracts.ts';
import type { Queue } from './queue.ts';
import type { WebhookSecrets } from './secrets.ts';
import { checkGivenFor, checkSwitchToStandard } from './secrets-service.ts';

export type LifecycleSteps = Pick<WebhooksService, 'removeInstallation' | 'pauseInstallation' | 'resumeInstallation' | 'setEndpointUrl'>;

/** Told each lifecycle step in its transaction; may answer the webhook signing secret it made at install. */
export type Follow = (tx: Tx, change: InstallationLifecycle) => Promise<{ webhookSecret?: string } | void>;

export interface LifecycleDeps {
  queue: Queue;
  secrets: Pick<WebhookSecrets, 'createSecret' | 'forget' | 'setPaused' | 'describe'>;
  log: Logger;
  /** Held deliveries made due: every serving process is told once `tx` commits (due-signals.ts). */
  dueAfter(tx: Tx): void;
}

export function createLifecycle(deps: LifecycleDeps): { steps: LifecycleSteps; follow: Follow } {
  const { queue, secrets, log } = deps;
  const steps: LifecycleSteps = {
    async removeInstallation(tx, id) {
      const n = await queue.cancelInstallation(tx, id, Date.now());
      await secrets.forget(tx, id);
      if (n) log.info('queued deliveries cancelled: installation removed', { installation: id, deliveries: n });
    },
    async pauseInstallation(tx, id) {
      await secrets.setPaused(tx, id, true);
      const n = await queue.holdInstallation(tx, id, Date.now());
      if (n) log.info('queued deliveries held: installation paused', { installation: id, deliveries: n });
    },
    setEndpointUrl: (tx, id, url) => queue.setInstallationUrl(tx, id, url),
    async resumeInstallation(tx, id) {
      await secrets.setPaused(tx, id, false);
      const n = await queue.releaseHeld(tx, id, Date.now());
      if (!n) return;
      log.info('held deliveries due: installation resumed', { installation: id, deliveries: n });
      // After the caller's transaction commits: this process starts its share, the others theirs.
      deps.dueAfter(tx);
    },
  };

  async function follow(tx: Tx, change: InstallationLifecycle): Promise<{ webhookSecret?: string } | void> {
    const { endpoint } = change;
    const id = change.installation.id;
    if (!endpoint) return;
    switch (change.kind) {
      case 'installed':
        checkGivenFor(endpoint.scheme, change.webhookSecret, 'webhook_secret');
        return { webhookSecret: await secrets.createSecret(tx, id, change.webhookSecret) };
      case 'configured': {
        const { url, previousUrl } = endpoint;
        if (endpoint.scheme === 'standard-webhooks' && endpoint.previousScheme !== 'standard-webhooks') await checkSwitchToStandard(secrets, tx, id);
        if (url === undefined) {
          if (previousUrl === undefined) return;
          // No URL any more: nothing is sent to the old one; held until a URL is set again.
          const n = await queue.holdInstallation(tx, id, Date.now());
          if (n) log.info('queued deliveries held: the installation has no webhook URL', { installation: id, deliveries: n });
          return;
        }
        if (url !== previousUrl) await steps.setEndpointUrl(tx, id, url);
        if (previousUrl === undefined && change.installation.status !== 'paused' && (await queue.releaseHeld(tx, id, Date.now()))) deps.dueAfter(tx);
        return;
      }
      case 'paused':
        return steps.pauseInstallation(tx, id);
      case 'resumed':
        // Without a URL the held deliveries stay held: a URL set later releases them.
        if (endpoint.url === undefined) return secrets.setPaused(tx, id, false);
        return steps.resumeInstallation(tx, id);
      case 'uninstalled':
        return steps.removeInstallation(tx, id);
    }
  }

  return { steps, follow };
}
