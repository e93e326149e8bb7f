/**
 * What the webhooks module offers the other modules (`services.webhooks`, `services.deliveries`):
 * the contracts alone, so its routes and its callers can name them without importing the module.
 */
import type { Delivery, DeliveryDetail, DeliveryFilter, Attempt, EventsInsert, Queue, ReplayFilter } from './queue.ts';
import type { DeliveryStats, StatsFilter } from './stats.ts';
import type { SignatureScheme } from './schemes.ts';
import type { SecretsView } from './secrets.ts';
import type { Tx } from '../store/contract.ts';
import type { RecordedAttempt } from './sender-record.ts';

/**
 * `services.webhooks`: signing secrets and the lifecycle steps the installations module's change
 * hook tells (each inside that module's transaction, `tx`).
 */
export interface WebhooksService {
  createSecret(tx: Tx, installationId: string, given?: string): Promise<string>;
  rotateSecret(installationId: string, given?: string): Promise<{ secret: string; previousExpiresAt: string }>;
  liveSecrets(installationId: string): Promise<string[]>;
  describe(installationId: string): Promise<SecretsView | undefined>;
  /** Uninstall: queued deliveries become `cancelled`, secrets are deleted. */
  removeInstallation(tx: Tx, installationId: string): Promise<void>;
  /**
   * Pause: the installation's queued deliveries become `held`, and so does every delivery enqueued
   * for it until resume. Resume makes every held one due at once, in event order, on a fresh start
   * of its schedule.
   */
  pauseInstallation(tx: Tx, installationId: string): Promise<void>;
  resumeInstallation(tx: Tx, installationId: string): Promise<void>;
  /** The webhook URL was edited: queued deliveries (pending, retrying) go to the new URL. Returns how many moved. */
  setEndpointUrl(tx: Tx, installationId: string, url: string): Promise<number>;
}

/**
 * A step of an installation's lifecycle, as the installations module tells it (its
 * InstallationChange, named here by shape so this module imports nothing of it). `endpoint` is set
 * for webhook installations only: where deliveries go now (undefined: no URL any more) and before,
 * and how they are signed now and before.
 */
export interface InstallationLifecycle {
  kind: 'installed' | 'configured' | 'paused' | 'resumed' | 'uninstalled';
  installation: { id: string; status: string };
  endpoint?: { url: string | undefined; previousUrl?: string | undefined; scheme?: SignatureScheme; previousScheme?: SignatureScheme };
  /** On install: the signing secret the caller gave. */
  webhookSecret?: string;
}

export interface Subscription {
  installationId: string;
  url: string;
}

/** `services.deliveries`: the queue. */
export interface Deliveries {
  /**
   * One delivery per subscription of each event, inside the caller's transaction, in one INSERT: the
   * payload is the event with that installation's `installationId`, under the delivery's own
   * eventId (body.ts); its exact bytes are stored now and signed at each attempt. For events the
   * caller stores itself, or not at all (the sender's tests); ingest uses enqueueWithEvents.
   * With `startAtCommit` (the default), a delivery whose endpoint has a free slot (and is not
   * paused) is stored already leased, and its first attempt starts as soon as the transaction
   * commits, without going through the scheduler. The queue hears about the commit or the rollback
   * from the store (afterCommit/onRollback, store/transactions.ts): the caller tells nothing
   * afterwards.
   */
  enqueueEvents(
    tx: Tx,
    events: Array<{ event: { eventId: string; type: string; [k: string]: unknown }; subscriptions: Subscription[] }>,
    now?: number,
    opts?: { startAtCommit?: boolean },
  ): Promise<Array<Array<{ id: string; installationId: string }>>>;
  /**
   * As enqueueEvents, for events stored by the same call with their own module's INSERT
   * (`eventsInsert` over `eventRows`): an event's deliveries are stored only if the event was stored
   * now, not seen before (on PostgreSQL in one statement with it: one round trip fewer an ingest).
   * The ids of the events stored, and each event's deliveries (none for one not stored).
   */
  enqueueWithEvents<E>(
    tx: Tx,
    eventsInsert: EventsInsert<E>,
    eventRows: readonly E[],
    events: Array<{ event: { eventId: string; type: string; [k: string]: unknown }; subscriptions: Subscription[] }>,
    now?: number,
    opts?: { startAtCommit?: boolean },
  ): Promise<{ stored: Set<string>; deliveries: Array<Array<{ id: string; installationId: string }>> }>;
  /** The scheduler looks for due work now. */
  wake(): void;
  list(filter: DeliveryFilter): Promise<{ deliveries: Delivery[]; nextCursor: string | null }>;
  get(id: string): Promise<DeliveryDetail | undefined>;
  /** A manual attempt now (whatever the state, except cancelled); resolves with the recorded attempt. */
  retry(id: string): Promise<Attempt>;
  /**
   * Deliveries of `status` (failed or delivered) created in the window go back to the queue with a
   * fresh schedule (held when their installation is paused); the ids replayed, in event order.
   */
  replay(f: ReplayFilter): Promise<Array<{ id: string; held: boolean }>>;
  /** The ids `replay(f)` would take now, changing nothing (a dry run, for a confirmation). */
  replayable(f: ReplayFilter): Promise<string[]>;
  /** One failed or delivered delivery back to the queue with a fresh schedule (409 otherwise). */
  replayOne(id: string): Promise<DeliveryDetail>;
  /** Per endpoint origin and time bucket: deliveries by status, delivery latency and response times (see stats.ts). */
  stats(f: StatsFilter): Promise<DeliveryStats>;
  counts(): Promise<Record<string, number>>;
  inFlight(): number;
  /** Delivery slots this process holds beyond its share, lent by the serving processes beside it (slot-loans.ts); 0 alone. */
  slotsBorrowed(): number;
  /** Observe every recorded attempt (live tail, metrics); returns the unsubscribe function. */
  onAttempt(listener: (e: RecordedAttempt) => void): () => void;
  /** Attempts after a cursor, oldest first (the live tail's read; see AttemptFeedItem). */
  attemptsAfter: Queue['attemptsAfter'];
  lastAttemptId(): Promise<number>;
  retriesDue(now?: number): Promise<number>;
  /** Retention: delete up to `limit` delivered/cancelled deliveries completed before `before`, with their attempts. */
  purgeFinished(before: number, limit: number): Promise<number>;
  /** Retention: the same for failed deliveries (kept longer: `retention.keep_failed`, for replays). */
  purgeFailed(before: number, limit: number): Promise<number>;
}
