/**
 * The webhooks service: signing secrets, the durable queue and the sender that sends from it,
 * built from the store and this process's share of the config. It answers as `WebhooksService`
 * (secrets and the installation lifecycle, called by the installations module) and `Deliveries`
 * (the queue, called by events ingest and the management API); see contracts.ts.
 */
import { SwitchyardError } from '../errors.ts';
import { oncePerTurn } from '../lib/batch.ts';
import { createObservers } from '../lib/observers.ts';
import { hideUrlCredentials, type Logger } from '../log/index.ts';
import type { Database, Tx } from '../store/contract.ts';
import type { Deliveries, InstallationLifecycle, Subscription, WebhooksService } from './contracts.ts';
import { createQueue, newDeliveryId, originOf, type Attempt, type AttemptRecord, type EnqueueInput, type ReplayRefusal } from './queue.ts';
import { deliveryBody } from './body.ts';
import { DEFAULT_SIGNATURE_SCHEME, type SignatureScheme } from './schemes.ts';
import { createSecrets } from './secrets.ts';
import { standardSecretProblem } from './standard-webhooks.ts';
import { deliveryStats } from './stats.ts';
import { createSender, type RecordedAttempt, type WebhooksConfig, type Sender } from './sender.ts';
import { leftoverLeases } from '../store/lease-owner.ts';

function attemptView(r: AttemptRecord, number: number): Attempt {
  return {
    number,
    manual: r.manual,
    startedAt: new Date(r.startedAt).toISOString(),
    durationMs: r.durationMs === null ? null : Math.round(r.durationMs * 100) / 100,
    url: hideUrlCredentials(r.url),
    signatureHeader: r.signatureHeader,
    status: r.status,
    outcome: r.outcome,
    error: r.error && hideUrlCredentials(r.error),
    errorCode: r.errorCode,
    responseExcerpt: r.responseExcerpt,
    responseTruncated: r.responseTruncated,
    nextAttemptAt: r.nextAttemptAt === null ? null : new Date(r.nextAttemptAt).toISOString(),
  };
}

/**
 * One serving process's share of the delivery concurrency: of N processes, process `index` takes
 * its part of `concurrency` (the remainder to the first ones), so the shares add up to the setting
 * exactly. The per-endpoint limit is shared per origin by the sender (slotsFor).
 */
export function shareOf(cfg: WebhooksConfig, processes: number, index: number): WebhooksConfig {
  return { ...cfg, concurrency: partOf(cfg.concurrency, processes, index) };
}

/** Process `index`'s part of `total` split over `count` processes, the remainder going to the first ones. */
function partOf(total: number, count: number, index: number): number {
  return Math.floor(total / count) + (index < total % count ? 1 : 0);
}

/**
 * One process's slots for an origin when `limit` slots are shared by `count` processes: each origin
 * starts at a process of its own (a hash of the origin), so with a limit under the process count
 * the origins still spread over every process, and the parts add up to the limit exactly (with
 * `per_endpoint_concurrency: 1` one process sends to that origin, and none other at the same time).
 */
export function slotsFor(origin: string, limit: number, share: { index: number; count: number }): number {
  let h = 2166136261;
  for (let i = 0; i < origin.length; i++) h = Math.imul(h ^ origin.charCodeAt(i), 16777619);
  const first = (h >>> 0) % share.count;
  return partOf(limit, share.count, (share.index - first + share.count) % share.count);
}

/** Where installations' webhooks point, and how they sign (attached by the installations module, possibly after this one starts). */
export type Subscriptions =
  | { forEventType(type: string): Subscription[]; urlOf?(installationId: string): string | undefined; schemeOf?(installationId: string): SignatureScheme }
  | undefined;

export interface WebhooksDeps {
  database: Database;
  log: Logger;
  /** The service's webhooks config, read at each use (it may be reloaded). */
  config: () => WebhooksConfig;
  subscriptions: () => Subscriptions;
  /** Set in a serving process beside others (process/serving.ts): concurrency is shared, due work announced. */
  processes?: { index: number; count: number; onDue(fn: () => void): void; announceDue(): void };
  /** Told when a write fails and when one commits again (store/health.ts). */
  health?: { failed(error: unknown): void; ok(): void };
}

/** Where other nodes are told of due work they may take (PostgreSQL's notifications). */
const DUE_CHANNEL = 'switchyard_due';

/** Builds the service; its start steps (reading the store) are awaited here. */
export async function createWebhooks(deps: WebhooksDeps) {
  const { database, log } = deps;
  const link = deps.processes;
  // Concurrency is the service's: each of N serving processes takes its share.
  let shared: [WebhooksConfig, WebhooksConfig] | undefined;
  const cfg = (): WebhooksConfig => {
    const c = deps.config();
    if (!link) return c;
    if (shared?.[0] !== c) shared = [c, shareOf(c, link.count, link.index)];
    return shared[1];
  };
  const secrets = createSecrets({ database }, { overlapMs: () => cfg().secret_rotation_overlap });
  const queue = createQueue(database, { maxAttempts: () => cfg().max_retries + 1 });
  // The installation's URL now, whether or not it still takes this event type: a replay or a
  // manual retry the person asked for goes where the installation points today.
  const currentUrl = (d: { eventType: string; installationId: string }) => {
    const subs = deps.subscriptions();
    return subs?.urlOf?.(d.installationId) ?? subs?.forEventType(d.eventType).find((s) => s.installationId === d.installationId)?.url;
  };

  if (cfg().lease < cfg().timeout + 5_000)
    log.warn('webhooks.lease is shorter than webhooks.timeout + 5 s; using the longer value so an attempt cannot be taken twice', {
      lease_ms: cfg().lease,
      timeout_ms: cfg().timeout,
    });
  // Under the supervisor, it recovers leases (at its start, and of each process that dies).
  const interrupted = link ? 0 : await database.transaction((tx) => queue.recoverInterrupted(tx, Date.now(), leftoverLeases(database)));
  await queue.refreshDue(database);
  if (interrupted) log.warn('attempts interrupted by the last stop are sent again', { deliveries: interrupted });

  const attempts = createObservers<[RecordedAttempt]>(log, 'attempt listener failed');
  // Deliveries claimed ahead and given back (their origin's slots here were stuck): the processes
  // and nodes beside this one take them.
  const gaveBack = () => {
    link?.announceDue();
    others?.get();
  };
  /** How the installation signs now: read at each attempt, so a change of scheme applies from the next one. */
  const schemeOf = (installationId: string) => deps.subscriptions()?.schemeOf?.(installationId) ?? DEFAULT_SIGNATURE_SCHEME;
  /**
   * A secret given to an installation that signs with standard-webhooks must be one its receivers'
   * libraries can read (`whsec_` and base64 of a 24- to 64-byte key). Fails closed: nothing is stored.
   */
  const checkGivenFor = (scheme: SignatureScheme | undefined, given: string | undefined, where: string) => {
    if (scheme !== 'standard-webhooks' || given === undefined) return;
    const problem = standardSecretProblem(given);
    if (problem)
      throw new SwitchyardError('bad_request', `this installation signs with standard-webhooks: ${problem}`, {
        where,
        hint: 'leave the secret out to have one generated in that form (whsec_ and 24 random bytes in base64)',
      });
  };
  const sender: Sender = createSender({
    queue,
    database,
    secrets,
    schemeOf,
    config: cfg,
    log,
    currentUrl,
    onAttempt: attempts.notify,
    health: deps.health,
    gaveBack,
    slotsFor: link ? (origin, limit) => slotsFor(origin, limit, link) : undefined,
  });
  /** Due work was made here that every serving process may take (a resume, a replay). */
  // On PostgreSQL the other nodes are told too.
  const nodes = database.notifications;
  const others = nodes ? { get: () => void nodes.notify(database, DUE_CHANNEL).catch((e: unknown) => deps.health?.failed(e)) } : undefined;
  const dueEverywhere = () => {
    sender.wake();
    link?.announceDue();
    others?.get();
  };
  /** The same, once the caller's transaction (`tx`) has committed (once a turn, however many resumes). */
  const dueEverywhereSoon = oncePerTurn(dueEverywhere);
  const dueEverywhereAfter = (tx: Tx) => tx.afterCommit(dueEverywhereSoon);
  /** After an enqueue's commit: the scheduler looks for what was not started at commit (one hook per transaction). */
  const wakeSender = () => sender.wake();

  const webhooks: WebhooksService = {
    async createSecret(tx, id, given) {
      return secrets.createSecret(tx, id, given);
    },
    async rotateSecret(id, given) {
      checkGivenFor(schemeOf(id), given, 'secret');
      return secrets.rotateSecret(id, given);
    },
    liveSecrets: (id) => secrets.liveSecrets(id),
    describe: (id) => secrets.describe(id),
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
      dueEverywhereAfter(tx);
    },
  };
  /**
   * The installations' lifecycle, told inside each step's transaction (`tx`; subscribed at start,
   * see index.ts): a webhook installation gets its signing secret, its queued deliveries follow its
   * URL, are held while it is paused or has no URL, and are cancelled when it is uninstalled.
   */
  async function follow(tx: Tx, change: InstallationLifecycle): Promise<{ webhookSecret?: string } | void> {
    const { endpoint } = change;
    const id = change.installation.id;
    if (!endpoint) return;
    switch (change.kind) {
      case 'installed':
        checkGivenFor(endpoint.scheme, change.webhookSecret, 'webhook_secret');
        return { webhookSecret: await webhooks.createSecret(tx, id, change.webhookSecret) };
      case 'configured': {
        const { url, previousUrl } = endpoint;
        if (endpoint.scheme === 'standard-webhooks' && endpoint.previousScheme !== 'standard-webhooks') {
          // Refused in the edit's transaction: a receiver could not verify with a secret it cannot read.
          const current = (await secrets.describe(id, tx))?.secret;
          const problem = current === undefined ? undefined : standardSecretProblem(current);
          if (problem)
            throw new SwitchyardError(
              'validation_failed',
              `installation ${id} cannot sign with standard-webhooks: its signing secret is not in that form; nothing was stored`,
              {
                where: 'configuration.signature_scheme',
                problems: [{ where: 'configuration.signature_scheme', message: problem }],
                hint: `rotate the secret first (\`switchyard installations secret ${id} --rotate\` makes one in that form), then set signature_scheme again`,
              },
            );
        }
        if (url === undefined) {
          if (previousUrl === undefined) return;
          // No URL any more: nothing is sent to the old one; held until a URL is set again.
          const n = await queue.holdInstallation(tx, id, Date.now());
          if (n) log.info('queued deliveries held: the installation has no webhook URL', { installation: id, deliveries: n });
          return;
        }
        if (url !== previousUrl) await webhooks.setEndpointUrl(tx, id, url);
        if (previousUrl === undefined && change.installation.status !== 'paused' && (await queue.releaseHeld(tx, id, Date.now()))) dueEverywhereAfter(tx);
        return;
      }
      case 'paused':
        return webhooks.pauseInstallation(tx, id);
      case 'resumed':
        // Without a URL the held deliveries stay held: a URL set later releases them.
        if (endpoint.url === undefined) return secrets.setPaused(tx, id, false);
        return webhooks.resumeInstallation(tx, id);
      case 'uninstalled':
        return webhooks.removeInstallation(tx, id);
    }
  }
  /** Whether the installation has no URL any more (the installations module knows; without it, nothing is refused). */
  const urlGone = (installationId: string) => {
    const subs = deps.subscriptions();
    return subs?.urlOf !== undefined && subs.urlOf(installationId) === undefined;
  };
  const noUrl = (id: string, installationId: string, what: string): never => {
    throw new SwitchyardError('conflict', `delivery ${id} cannot be ${what}: its installation ${installationId} has no webhook_url any more`, {
      hint: `set configuration.webhook_url of installation ${installationId} first`,
    });
  };
  /** A replay's URL: where the installation points today, refused when it points nowhere. */
  const replayUrl = (d: { id?: string; eventType: string; installationId: string; url: string }) => {
    const url = currentUrl(d);
    if (url === undefined && urlGone(d.installationId)) noUrl(d.id ?? 'replayed', d.installationId, 'replayed');
    return url ?? d.url;
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

  /**
   * A batch's deliveries in the caller's transaction: their secrets ensured, and one INSERT, which
   * reads whether each installation is paused itself (the copy in memory may be behind the store: a
   * pause whose transaction rolled back is still in it, and on PostgreSQL another node may pause this
   * instant; there a pause waits for this transaction, then holds what it stored). A slot reserved
   * for a delivery that was stored held is given back.
   */
  async function enqueueEvents(
    tx: Tx,
    events: Array<{ event: { eventId: string; type: string; [k: string]: unknown }; subscriptions: Array<{ installationId: string; url: string }> }>,
    now = Date.now(),
    opts: { startAtCommit?: boolean } = {},
  ): Promise<Array<Array<{ id: string; installationId: string }>>> {
    const installations = [...new Set(events.flatMap((e) => e.subscriptions.map((s) => s.installationId)))];
    if (!installations.length) return events.map(() => []);
    await secrets.ensureSecrets(tx, installations);
    const inputs: Array<EnqueueInput & { origin: string }> = [];
    let claimed;
    try {
      for (const { event, subscriptions } of events)
        for (const s of subscriptions) {
          const url = s.url;
          const origin = originOf(url);
          const id = newDeliveryId(now);
          const body = deliveryBody(event, s.installationId, id);
          const lease = opts.startAtCommit !== false ? sender.reserve(origin) : undefined;
          inputs.push({ id, eventId: event.eventId, eventType: event.type, installationId: s.installationId, url, origin, body, now, lease });
        }
      claimed = await queue.enqueueMany(tx, inputs);
    } catch (e) {
      // Nothing stored: the slots reserved so far are given back.
      for (const input of inputs) if (input.lease) sender.cancelReserved(input.origin);
      throw e;
    }
    const out = events.map(() => [] as Array<{ id: string; installationId: string }>);
    let i = 0;
    events.forEach(({ subscriptions }, e) => {
      for (const s of subscriptions) {
        const input = inputs[i];
        const c = claimed[i++];
        if (input.lease) {
          if (c && c.status !== 'held') {
            // Leased in the caller's transaction: its first attempt starts once that commits, and
            // the slot is given back if it (or the savepoint it is in) rolls back.
            tx.afterCommit(() => sender.startReserved(c));
            tx.onRollback(() => sender.cancelReserved(c.origin));
          } else sender.cancelReserved(input.origin);
        }
        if (c) out[e].push({ id: c.id, installationId: s.installationId });
      }
    });
    if (out.some((o) => o.length)) tx.afterCommit(wakeSender);
    return out;
  }

  const deliveries: Deliveries = {
    enqueueEvents,
    async enqueueEvent(tx, event, subscriptions, now, opts) {
      return (await enqueueEvents(tx, [{ event, subscriptions }], now, opts))[0];
    },
    wake: wakeSender,
    list: (f) => queue.list(f),
    get: (id) => queue.get(id),
    async retry(id) {
      const found = await queue.get(id);
      if (found && found.status !== 'cancelled' && urlGone(found.installationId)) noUrl(id, found.installationId, 'retried');
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
        dueEverywhere();
      }
      return replayed;
    },
    async replayOne(id) {
      const r = await queue.replayOne(id, Date.now(), (d) => replayUrl({ ...d, id }));
      if (typeof r === 'string') refused(id, r);
      dueEverywhere();
      return (await queue.get(id))!;
    },
    replayable: (f) => queue.replayable(f),
    stats: (f) => deliveryStats(database, f),
    counts: () => queue.counts(),
    inFlight: () => sender.inFlight(),
    onAttempt: (listener) => attempts.add(listener),
    attemptsAfter: (after, limit, f) => queue.attemptsAfter(after, limit, f),
    lastAttemptId: () => queue.lastAttemptId(),
    retriesDue: (now = Date.now()) => queue.retriesDue(now),
    purgeFinished: (before, limit) => queue.purgeFinished(before, limit),
    purgeFailed: (before, limit) => queue.purgeFailed(before, limit),
  };

  let refresh: NodeJS.Timeout | undefined;
  return {
    webhooks,
    deliveries,
    follow,
    /** Overdue work (retries due while the server was down) goes out now, and what other processes make due. */
    start(): void {
      sender.wake();
      if (!link && !nodes) return;
      // Deliveries other processes (or nodes) made due (retries they scheduled, a dead process's
      // leases) are not in this process's per-origin hints: look them up when told, and every second.
      let refreshing = false;
      const dueSafely = () => {
        if (refreshing) return; // one look at a time: a slow store does not pile them up
        refreshing = true;
        queue
          .refreshDue(database)
          .then(
            () => sender.wake(),
            (e: unknown) => deps.health?.failed(e),
          )
          .finally(() => (refreshing = false));
      };
      link?.onDue(dueSafely);
      nodes?.listen(DUE_CHANNEL, dueSafely);
      refresh = setInterval(dueSafely, 1_000);
      refresh.unref();
    },
    /** Stop taking work; attempts in flight get up to `graceMs` (at most the attempt time-out). */
    stop(graceMs: number): Promise<void> {
      clearInterval(refresh);
      return sender.stop(Math.min(graceMs, cfg().timeout));
    },
  };
}
