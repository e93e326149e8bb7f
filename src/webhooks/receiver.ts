/**
 * The reference receiver (spec 4.2 and 7), as a Node request handler users can mount or run with
 * `switchyard receive`: verify the signature on the raw body (constant-time, with a timestamp
 * window) in the installation's scheme, answer 200 `{"received": true}` at once, process after the
 * answer, and deduplicate by eventId for 2 minutes, unless processing failed, in which case a
 * redelivery is processed again.
 */
import type { IncomingMessage, IncomingHttpHeaders, ServerResponse } from 'node:http';
import { DEFAULT_SIGNATURE_SCHEME, type SignatureScheme } from './schemes.ts';
import { DEFAULT_TOLERANCE_SEC, verifySignature, type Verification } from './signature.ts';
import { STANDARD_HEADERS, verifyStandardSignature } from './standard-webhooks.ts';

export interface ReceivedEvent {
  eventId?: string;
  type?: string;
  payload: unknown;
  /** The exact bytes received. */
  raw: Buffer;
  /** The signature's timestamp (unix seconds). */
  t: number;
}

export interface ReceiverOptions {
  secrets: string | string[];
  /**
   * The signature scheme of the installations sending here: `platform` (X-Platform-Signature, the
   * default) or `standard-webhooks` (webhook-id, webhook-timestamp, webhook-signature; then the
   * webhook-id is the deduplication key, as that specification asks).
   */
  scheme?: SignatureScheme;
  /** Accepted clock difference, seconds (default 300). */
  toleranceSec?: number;
  /** How long an eventId is remembered, ms (default 2 minutes). */
  dedupMs?: number;
  /** Largest body read (default 1 MiB); larger gets 413. */
  maxBodyBytes?: number;
  /** Processing, after the 200 answer. Throw (or reject) to let a redelivery be processed again. */
  onEvent?: (event: ReceivedEvent) => void | Promise<void>;
  /** A redelivery of an event already processed (or being processed): answered 200, not processed. */
  onDuplicate?: (event: ReceivedEvent) => void;
  /** A request refused (405, 401, 400, 413), with the reason. */
  onReject?: (status: number, reason: string, req: IncomingMessage) => void;
  /**
   * Rehearse failures: answer `status` instead of 200 to a fraction `rate` (0 to 1) of the verified
   * events, which are then not processed and not remembered (a redelivery is processed normally).
   */
  fail?: { status: number; rate: number; random?: () => number };
  /** A verified event answered with a rehearsed failure. */
  onFail?: (status: number, event: ReceivedEvent) => void;
  now?: () => number;
}

type Seen = { state: 'processing' | 'done' | 'failed'; at: number };

const one = (h: string | string[] | undefined): string | undefined => (Array.isArray(h) ? h[0] : h);

/** Verify a request's signature headers in `scheme`. */
function verifyIn(
  scheme: SignatureScheme,
  headers: IncomingHttpHeaders,
  raw: Buffer,
  secrets: string | string[],
  opts: { toleranceSec: number; now: number },
): Verification {
  switch (scheme) {
    case 'platform':
      return verifySignature(one(headers['x-platform-signature']), raw, secrets, opts);
    case 'standard-webhooks':
      return verifyStandardSignature(
        { id: one(headers[STANDARD_HEADERS.id]), timestamp: one(headers[STANDARD_HEADERS.timestamp]), signature: one(headers[STANDARD_HEADERS.signature]) },
        raw,
        secrets,
        opts,
      );
    default:
      return scheme satisfies never;
  }
}

export function createReceiver(opts: ReceiverOptions): (req: IncomingMessage, res: ServerResponse) => void {
  const now = opts.now ?? Date.now;
  const dedupMs = opts.dedupMs ?? 120_000;
  const maxBody = opts.maxBodyBytes ?? 1024 * 1024;
  const scheme = opts.scheme ?? DEFAULT_SIGNATURE_SCHEME;
  const seen = new Map<string, Seen>();

  function prune(t: number): void {
    // Entries are in arrival order, so expired ones are at the front.
    for (const [id, s] of seen) {
      if (t - s.at < dedupMs) break;
      seen.delete(id);
    }
  }

  const json = (res: ServerResponse, status: number, body: unknown) => {
    res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
  };

  return (req, res) => {
    if (req.method !== 'POST') {
      opts.onReject?.(405, `method ${req.method} not allowed`, req);
      res.writeHead(405, { 'content-type': 'text/plain; charset=utf-8', allow: 'POST' }).end('Method not allowed');
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    let tooBig = false;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > maxBody) tooBig = true;
      else chunks.push(c);
    });
    req.on('end', () => {
      if (tooBig) {
        opts.onReject?.(413, `body larger than ${maxBody} bytes`, req);
        return json(res, 413, { error: `body larger than ${maxBody} bytes` });
      }
      const raw = Buffer.concat(chunks);
      const v = verifyIn(scheme, req.headers, raw, opts.secrets, {
        toleranceSec: opts.toleranceSec ?? DEFAULT_TOLERANCE_SEC,
        now: Math.floor(now() / 1000),
      });
      if (!v.ok) {
        opts.onReject?.(401, v.reason, req);
        return json(res, 401, { error: v.reason });
      }
      let payload: any;
      try {
        payload = JSON.parse(raw.toString('utf8'));
      } catch {
        opts.onReject?.(400, 'the body is not JSON', req);
        return json(res, 400, { error: 'the body is not JSON' });
      }
      // Under standard-webhooks the signed webhook-id is the key (it is the body's eventId, for our deliveries).
      const eventId =
        scheme === 'standard-webhooks' ? one(req.headers[STANDARD_HEADERS.id]) : typeof payload?.eventId === 'string' ? payload.eventId : undefined;
      const event: ReceivedEvent = { eventId, type: typeof payload?.type === 'string' ? payload.type : undefined, payload, raw, t: v.t };
      if (opts.fail && (opts.fail.random ?? Math.random)() < opts.fail.rate) {
        json(res, opts.fail.status, { error: `rehearsed failure (${opts.fail.status})` });
        opts.onFail?.(opts.fail.status, event);
        return;
      }
      const t = now();
      prune(t);
      const prior = eventId === undefined ? undefined : seen.get(eventId);
      if (prior && prior.state !== 'failed') {
        json(res, 200, { received: true, duplicate: true });
        opts.onDuplicate?.(event);
        return;
      }
      if (eventId !== undefined) {
        seen.delete(eventId); // re-insert at the back: arrival order
        seen.set(eventId, { state: 'processing', at: t });
      }
      json(res, 200, { received: true });
      // Process after answering: the sender's time-out never waits on our work.
      setImmediate(async () => {
        try {
          await opts.onEvent?.(event);
          const s = eventId === undefined ? undefined : seen.get(eventId);
          if (s) s.state = 'done';
        } catch {
          const s = eventId === undefined ? undefined : seen.get(eventId);
          if (s) s.state = 'failed';
        }
      });
    });
  };
}
