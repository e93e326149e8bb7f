/**
 * Events' deliveries, enqueued in the caller's transaction (Deliveries.enqueueWithEvents, which
 * stores the events in the same statement on PostgreSQL, and enqueueEvents; see contracts.ts): a
 * delivery whose endpoint has a free slot here, or room in this process's line for it
 * (sender-ahead.ts), is stored already leased: its first attempt starts once the transaction
 * commits, or it waits in the line; the others are stored due, for the sender's scheduler, woken
 * after the commit.
 */
import type { Tx } from '../store/contract.ts';
import type { Deliveries } from './contracts.ts';
import { deliveryBody } from './body.ts';
import { newDeliveryId, originOf, type Claimed, type EnqueueInput, type Queue } from './queue.ts';
import type { WebhookSecrets } from './secrets.ts';
import type { Reservation, Sender } from './sender.ts';

export type EnqueueEvents = Deliveries['enqueueEvents'];
export type EnqueueWithEvents = Deliveries['enqueueWithEvents'];

export interface EnqueueDeps {
  queue: Pick<Queue, 'enqueueMany' | 'enqueueUnder'>;
  secrets: Pick<WebhookSecrets, 'ensureSecrets'>;
  sender: Pick<Sender, 'reserve' | 'startReserved' | 'cancelReserved'>;
  /** After an enqueue's commit: the scheduler looks for what was not started at commit (one hook per transaction). */
  wakeSender: () => void;
  /** Deliveries were stored due in `tx`: the serving processes beside this one are told once it commits (due-signals.ts). */
  storedDueAfter?: (tx: Tx) => void;
}

export function createEnqueue(deps: EnqueueDeps): { enqueueEvents: EnqueueEvents; enqueueWithEvents: EnqueueWithEvents } {
  const { queue, secrets, sender, wakeSender, storedDueAfter } = deps;
  type Batch = Parameters<EnqueueEvents>[1];
  type Input = EnqueueInput & { origin: string; lease?: Reservation };

  /**
   * A batch's deliveries in the caller's transaction: their secrets ensured, and one INSERT
   * (`store`), which reads whether each installation is paused itself (the copy in memory may be
   * behind the store: a pause whose transaction rolled back is still in it, and on PostgreSQL
   * another node may pause this instant; there a pause waits for this transaction, then holds what
   * it stored). A slot reserved for a delivery that was stored held, or not stored, is given back.
   */
  async function enqueue<R>(
    tx: Tx,
    events: Batch,
    now: number,
    opts: { startAtCommit?: boolean },
    store: (inputs: Input[]) => Promise<{ claimed: Array<Claimed | null> } & R>,
  ): Promise<{ out: Array<Array<{ id: string; installationId: string }>> } & R> {
    const installations = [...new Set(events.flatMap((e) => e.subscriptions.map((s) => s.installationId)))];
    if (installations.length) await secrets.ensureSecrets(tx, installations);
    const inputs: Input[] = [];
    const storedDue = new Set<string>();
    let stored;
    try {
      for (const { event, subscriptions } of events)
        for (const s of subscriptions) {
          const url = s.url;
          const origin = originOf(url);
          const id = newDeliveryId(now);
          const body = deliveryBody(event, s.installationId, id);
          // Once one of an origin's deliveries is stored due, the later ones of the batch are too (in event order).
          const lease = opts.startAtCommit !== false && !storedDue.has(origin) ? sender.reserve(origin, body.length) : undefined;
          if (!lease) storedDue.add(origin);
          inputs.push({ id, eventId: event.eventId, eventType: event.type, installationId: s.installationId, url, origin, body, now, lease });
        }
      stored = await store(inputs);
    } catch (e) {
      // Nothing stored: the reservations taken so far are given back.
      for (const input of inputs) if (input.lease) sender.cancelReserved(input.lease);
      throw e;
    }
    const claimed = stored.claimed;
    const out = events.map(() => [] as Array<{ id: string; installationId: string }>);
    let i = 0;
    events.forEach(({ subscriptions }, e) => {
      for (const s of subscriptions) {
        const input = inputs[i];
        const c = claimed[i++];
        const lease = input.lease;
        if (lease) {
          if (c && c.status !== 'held') {
            // Leased in the caller's transaction: its first attempt starts (or waits for its slot)
            // once that commits, and the reservation is given back if it (or the savepoint it is in) rolls back.
            tx.afterCommit(() => sender.startReserved(c, lease));
            tx.onRollback(() => sender.cancelReserved(lease));
          } else sender.cancelReserved(lease);
        }
        if (c) out[e].push({ id: c.id, installationId: s.installationId });
      }
    });
    if (out.some((o) => o.length)) tx.afterCommit(wakeSender);
    // Stored due (not leased here): another process's slots of the endpoint may be free now.
    if (storedDue.size && claimed.some((c, k) => c && !inputs[k].lease && c.status !== 'held')) storedDueAfter?.(tx);
    return { ...stored, out };
  }

  return {
    async enqueueEvents(tx, events, now = Date.now(), opts = {}) {
      if (!events.some((e) => e.subscriptions.length)) return events.map(() => []);
      return (await enqueue(tx, events, now, opts, async (inputs) => ({ claimed: await queue.enqueueMany(tx, inputs) }))).out;
    },
    async enqueueWithEvents(tx, eventsInsert, eventRows, events, now = Date.now(), opts = {}) {
      const r = await enqueue(tx, events, now, opts, (inputs) => queue.enqueueUnder(tx, eventsInsert, eventRows, inputs));
      return { stored: r.stored, deliveries: r.out };
    },
  };
}
