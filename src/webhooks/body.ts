/**
 * What a delivery carries: its body, made once at enqueue and sent byte for byte at every attempt,
 * and the eventId that body names (also sent as X-Platform-Event-Id, or webhook-id).
 */

/**
 * The exact body of one delivery: the event with the subscriber's `installationId`, under the
 * delivery's own `eventId` (spec 6.2: each delivery has a unique one), the event's own id kept as
 * `sourceEventId`. The delivery's eventId is its id (`dlv_…`): unique per delivery, so a receiver
 * serving two installations processes both deliveries of one event; the same across the delivery's
 * retries and replays (one stored row, one stored body), so deduplication still catches those; and
 * what `switchyard deliveries show` takes. Common fields first: `eventId`, `type`, `installationId`,
 * `sourceEventId`, then the event's other fields (a `sourceEventId` of its own is replaced).
 */
export function deliveryBody(event: { eventId: string; type: string; [k: string]: unknown }, installationId: string, deliveryId: string): string {
  const { eventId, type, installationId: _installation, sourceEventId: _source, ...rest } = event;
  return JSON.stringify({ eventId: deliveryId, type, installationId, sourceEventId: eventId, ...rest });
}

/**
 * The eventId a stored delivery's body carries: its own id, or, for a delivery queued before
 * deliveries had their own (its body names the source event first), the source event's id. The
 * headers must say what the body says: a receiver may deduplicate on either.
 */
export function sentEventId(d: { id: string; eventId: string; body: string }): string {
  return d.body.startsWith(`{"eventId":${JSON.stringify(d.id)},`) ? d.id : d.eventId;
}
