/**
 * The webhooks service: signing secrets, the durable queue and the sender that sends from it,
 * built from the store and this process's share of the config. It answers as `WebhooksService`
 * (secrets and the installation lifecycle, called by the installations module) and `Deliveries`
 * (the queue, called by events ingest and the management API); see contracts.ts.
 * `createWebhooks` composes its parts, each a module with its own contract:
 *
 * - concurrency-share.ts: this serving process's share of the delivery concurrency;
 * - endpoints.ts: where installations' webhooks point now, and how they sign;
 * - sender.ts: the sender (and its own parts);
 * - enqueue.ts: an event's deliveries in the caller's transaction, leased to a free slot when there is one;
 * - replays.ts: manual attempts (retry) and replays;
 * - secrets-service.ts: the secrets API, and the form a standard-webhooks secret must have;
 * - lifecycle.ts: the installations' lifecycle steps, followed in their transactions;
 * - due-signals.ts: due work announced to the processes and nodes beside this one, and what they
 *   made due looked up when told and every second;
 * - stats.ts: the delivery statistics.
 *
 * Here: the start steps (leases a previous run left, the queue's hints), the wiring, and the
 * service's surface.
 */
import { createObservers } from '../lib/observers.ts';
import type { Logger } from '../log/index.ts';
import type { Database } from '../store/contract.ts';
import type { Deliveries, WebhooksService } from './contracts.ts';
import { createQueue } from './queue.ts';
import { createSecrets } from './secrets.ts';
import { deliveryStats } from './stats.ts';
import { createSender, type RecordedAttempt, type WebhooksConfig, type Sender } from './sender.ts';
import { leftoverLeases } from '../store/lease-owner.ts';
import { sharedConfig, slotsFor } from './concurrency-share.ts';
import { ALL, createSlotLoans, type LoansLink, type SlotLoans } from './slot-loans.ts';
import { endpointsOf, type Subscriptions } from './endpoints.ts';
import { createDueSignals } from './due-signals.ts';
import { secretsService } from './secrets-service.ts';
import { createLifecycle } from './lifecycle.ts';
import { createEnqueue } from './enqueue.ts';
import { createReplays } from './replays.ts';

export { shareOf, slotsFor } from './concurrency-share.ts';
export type { Subscriptions } from './endpoints.ts';

export interface WebhooksDeps {
  database: Database;
  log: Logger;
  /** The service's webhooks config, read at each use (it may be reloaded). */
  config: () => WebhooksConfig;
  subscriptions: () => Subscriptions;
  /** Set in a serving process beside others (process/serving.ts): concurrency is shared, due work announced. */
  processes?: { index: number; count: number; onDue(fn: () => void): void; announceDue(deliveriesOnly?: boolean): void; loans?: LoansLink };
  /** Told when a write fails and when one commits again (store/health.ts). */
  health?: { failed(error: unknown): void; ok(): void };
}

/** Builds the service; its start steps (reading the store) are awaited here. */
export async function createWebhooks(deps: WebhooksDeps) {
  const { database, log } = deps;
  const link = deps.processes;
  // Concurrency is the service's: each of N serving processes takes its share, and lends what it
  // does not use to the others (slot-loans.ts; set up below, before the sender).
  let loans: SlotLoans | undefined;
  /** The sender once built: an ask or a grant can come between the loans' answer and its build. */
  let built: Sender | undefined;
  const cfg = sharedConfig(deps.config, link, () => loans?.held(ALL) ?? 0);
  const secrets = createSecrets({ database }, { overlapMs: () => cfg().secret_rotation_overlap });
  const queue = createQueue(database, { maxAttempts: () => cfg().max_retries + 1 });
  const endpoints = endpointsOf(deps.subscriptions);

  if (cfg().lease < cfg().timeout + 5_000)
    log.warn('webhooks.lease is shorter than webhooks.timeout + 5 s; using the longer value so an attempt cannot be taken twice', {
      lease_ms: cfg().lease,
      timeout_ms: cfg().timeout,
    });
  // Under the supervisor, it recovers leases (at its start, and of each process that dies).
  const interrupted = link ? 0 : await database.transaction((tx) => queue.recoverInterrupted(tx, Date.now(), leftoverLeases(database)));
  await queue.refreshDue(database);
  if (interrupted) log.warn('attempts interrupted by the last stop are sent again', { deliveries: interrupted });

  // What this process's slot holds of each pool is known before it sends anything (a replacement's
  // predecessor may have lent or borrowed); from then on the sender below answers the asks.
  if (link?.loans)
    loans = await createSlotLoans(link.loans, {
      spare: (pool) => built?.spare(pool === ALL ? undefined : pool) ?? 0,
      granted: () => built?.wake(),
    });
  const attempts = createObservers<[RecordedAttempt]>(log, 'attempt listener failed');
  // The sender is built next; due work is signalled to it once it is.
  const due = createDueSignals({ database, queue, link, wake: () => sender.wake(), health: deps.health });
  const sender: Sender = createSender({
    queue,
    database,
    secrets,
    schemeOf: endpoints.schemeOf,
    config: cfg,
    log,
    currentUrl: endpoints.currentUrl,
    onAttempt: attempts.notify,
    health: deps.health,
    gaveBack: due.gaveBack,
    slotsFor: link ? (origin, limit) => (loans?.holdingBack() ? 0 : Math.max(0, slotsFor(origin, limit, link) + (loans?.held(origin) ?? 0))) : undefined,
    sendable: endpoints.sendable,
    short: loans ? (origin, all) => wantSlots(origin, all) : undefined,
  });
  /** Ask the processes beside for slots of `origin` (or in all), unless this one holds the whole limit already. */
  function wantSlots(origin: string, all: boolean): void {
    const c = deps.config();
    const limit = all ? c.concurrency : c.per_endpoint_concurrency;
    const pool = all ? ALL : origin;
    const mine = all ? cfg().concurrency : slotsFor(origin, limit, link!) + loans!.held(pool);
    if (mine < limit) loans!.want(pool);
  }
  built = sender;
  /** After an enqueue's commit: the scheduler looks for what was not started at commit (one hook per transaction). */
  const wakeSender = () => sender.wake();

  const lifecycle = createLifecycle({ queue, secrets, log, dueAfter: due.everywhereAfter });
  const webhooks: WebhooksService = { ...secretsService(secrets, endpoints.schemeOf), ...lifecycle.steps };
  const { enqueueEvents, enqueueWithEvents } = createEnqueue({ queue, secrets, sender, wakeSender, storedDueAfter: due.storedDueAfter });

  const deliveries: Deliveries = {
    enqueueEvents,
    enqueueWithEvents,
    wake: wakeSender,
    list: (f) => queue.list(f),
    get: (id) => queue.get(id),
    ...createReplays({ queue, sender, endpoints, log, dueEverywhere: due.everywhere }),
    replayable: (f) => queue.replayable(f),
    stats: (f) => deliveryStats(database, f),
    counts: () => queue.counts(),
    inFlight: () => sender.inFlight(),
    slotsBorrowed: () => loans?.borrowed() ?? 0,
    onAttempt: (listener) => attempts.add(listener),
    attemptsAfter: (after, limit, f) => queue.attemptsAfter(after, limit, f),
    lastAttemptId: () => queue.lastAttemptId(),
    retriesDue: (now = Date.now()) => queue.retriesDue(now),
    purgeFinished: (before, limit) => queue.purgeFinished(before, limit),
    purgeFailed: (before, limit) => queue.purgeFailed(before, limit),
  };

  return {
    webhooks,
    deliveries,
    /** The installations' lifecycle, told inside each step's transaction (see lifecycle.ts). */
    follow: lifecycle.follow,
    /** Overdue work (retries due while the server was down) goes out now, and what other processes make due. */
    start(): void {
      sender.wake();
      due.listen();
    },
    /** Stop taking work; attempts in flight get up to `graceMs` (at most the attempt time-out). */
    stop(graceMs: number): Promise<void> {
      due.stop();
      loans?.stop();
      return sender.stop(Math.min(graceMs, cfg().timeout));
    },
  };
}
