/**
 * One delivery attempt: sign the stored body with the installation's live secrets, in the scheme
 * it chose (X-Platform-Signature, or the Standard Webhooks headers), POST it, and
 * decide from the answer (or the error) what the delivery becomes: delivered, retried when, or
 * failed. Writes nothing: the sender records the outcome (sender-record.ts).
 */
import type { Config } from '../config/index.ts';
import type { httpRequest, HttpResult } from '../net/index.ts';
import { USER_AGENT } from '../version.ts';
import { classifyOutcome, nextAttemptDelay, parseRetryAfter, type Outcome } from './policy.ts';
import type { AttemptRecord, Claimed, NextState } from './queue.ts';
import type { WebhookSecrets } from './secrets.ts';
import { sentEventId } from './body.ts';
import { DEFAULT_SIGNATURE_SCHEME, type SignatureScheme } from './schemes.ts';
import { signatureHeader } from './signature.ts';
import { STANDARD_HEADERS, standardSignatureHeader } from './standard-webhooks.ts';
import { storableText } from '../store/text.ts';

export interface AttemptContext {
  config: () => Config['webhooks'];
  secrets: Pick<WebhookSecrets, 'liveSecrets'>;
  /** The installation's signature scheme now (its `signature_scheme`; the platform's when not told). */
  schemeOf?: (installationId: string) => SignatureScheme;
  clock: () => number;
  send: typeof httpRequest;
  random?: () => number;
  /** Aborted when the sender gives up on attempts in flight (stop). */
  signal: AbortSignal;
  stopped: () => boolean;
}

/** The attempt's record, the delivery's next state, and when it ended. */
export interface AttemptMade {
  record: AttemptRecord;
  next: NextState;
  ended: number;
}

/** The most of a receiver's header value an attempt's error quotes (a receiver chooses its length). */
const QUOTED_HEADER_MAX = 200;

/** ` (Name: value)` for a header the receiver sent, its value cut to QUOTED_HEADER_MAX; empty when absent. */
function quotedHeader(r: HttpResult, name: string): string {
  const value = r.headers[name.toLowerCase()];
  if (!value) return '';
  return ` (${name}: ${value.length > QUOTED_HEADER_MAX ? `${value.slice(0, QUOTED_HEADER_MAX)}…` : value})`;
}

function describeStatus(r: HttpResult, outcome: Outcome): string | null {
  if (outcome === 'success') return null;
  if (r.status >= 300 && r.status < 400) return `HTTP ${r.status}: redirects are not followed${quotedHeader(r, 'Location')}`;
  if (r.status === 429) return `HTTP 429: rate limited${quotedHeader(r, 'Retry-After')}`;
  if (r.status >= 500) return `HTTP ${r.status}: server error`;
  return `HTTP ${r.status}: client error, not retried`;
}

/**
 * The signature headers of one attempt at unix time `t`, and the value recorded with the attempt
 * (the header that carries the signatures). Undefined when no live secret can sign in `scheme`.
 */
function sign(scheme: SignatureScheme, secrets: string[], c: Claimed, t: number, body: Buffer): { headers: Record<string, string>; value: string } | undefined {
  switch (scheme) {
    case 'platform': {
      const value = signatureHeader(secrets, t, body);
      return { headers: { 'x-platform-signature': value }, value };
    }
    case 'standard-webhooks': {
      // The id is the body's eventId: the same on every retry, which is what receivers deduplicate on.
      const id = sentEventId(c);
      const value = standardSignatureHeader(secrets, id, t, body);
      if (!value) return undefined;
      return { headers: { [STANDARD_HEADERS.id]: id, [STANDARD_HEADERS.timestamp]: String(t), [STANDARD_HEADERS.signature]: value }, value };
    }
    default:
      return scheme satisfies never;
  }
}

/** Sign and send; decide the next state. No database writes here. Undefined when the attempt was cut short by a stop. */
export async function makeAttempt(c: Claimed, manual: boolean, ctx: AttemptContext): Promise<AttemptMade | undefined> {
  const { clock, send } = ctx;
  const cfg = ctx.config();
  const body = Buffer.from(c.body, 'utf8');
  const secrets = await ctx.secrets.liveSecrets(c.installationId);
  let header: string | null = null;
  let result: HttpResult | undefined;
  let error: { code?: string; message: string } | undefined;
  // The attempt starts once its secrets are read (a read of the store on a cache miss): its start
  // plus its duration is when it ended, which the retry's schedule counts from.
  const startedAt = clock();
  const t0 = performance.now();
  const signed = secrets.length
    ? sign(ctx.schemeOf?.(c.installationId) ?? DEFAULT_SIGNATURE_SCHEME, secrets, c, Math.floor(startedAt / 1000), body)
    : undefined;
  if (!secrets.length) {
    error = { code: 'ENOSECRET', message: `installation ${c.installationId} has no signing secret (was it uninstalled?)` };
  } else if (!signed) {
    error = {
      code: 'ENOSECRET',
      message: `installation ${c.installationId} signs with standard-webhooks but none of its secrets is in that form (whsec_ and base64): rotate its secret`,
    };
  } else {
    header = signed.value;
    try {
      result = await send(c.url, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'user-agent': USER_AGENT,
          ...signed.headers,
          'x-platform-event-id': sentEventId(c),
          'x-platform-delivery-id': c.id,
        },
        body,
        timeoutMs: cfg.timeout,
        maxBodyBytes: cfg.response_excerpt,
        allowPrivate: cfg.allow_private_networks,
        signal: ctx.signal,
      });
    } catch (e) {
      error = { code: (e as { code?: string }).code, message: (e as Error).message };
    }
  }
  // Shut down mid-attempt: leave the lease; the next start records it as interrupted and resends.
  if (ctx.stopped() && error?.code === 'ABORT_ERR') return undefined;

  const endedAt = clock();
  // Taken with endedAt, not after the decision below: the retry is scheduled from endedAt, and the
  // record's start plus duration must say the same end (a collection here made them 12 ms apart).
  const durationMs = performance.now() - t0;
  const verdict = classifyOutcome(result ?? error ?? { code: 'EUNKNOWN' });
  let next: NextState;
  let retryAt: number | null = null;
  if (manual) {
    next =
      verdict === 'success'
        ? { status: 'delivered', attempts: c.attempts, nextAttemptAt: null, completedAt: endedAt }
        : { status: c.status, attempts: c.attempts, nextAttemptAt: c.nextAttemptAt, completedAt: null };
  } else {
    const made = c.attempts + 1;
    const retryAfter = result ? parseRetryAfter(result.headers['retry-after'], endedAt) : undefined;
    const delay = nextAttemptDelay(made, verdict, cfg, retryAfter, ctx.random);
    if (verdict === 'success') next = { status: 'delivered', attempts: made, nextAttemptAt: null, completedAt: endedAt };
    else if (delay === null) next = { status: 'failed', attempts: made, nextAttemptAt: null, completedAt: endedAt };
    else {
      retryAt = Math.round(endedAt + delay);
      next = { status: 'retrying', attempts: made, nextAttemptAt: retryAt, completedAt: null };
    }
  }
  // One vocabulary (policy.ts): a failure that schedules no retry is recorded `failed`, whether
  // its answer was permanent, the retries ran out, or it was a manual attempt.
  const outcome: Outcome = verdict === 'retry' && retryAt === null ? 'failed' : verdict;
  const record: AttemptRecord = {
    manual,
    startedAt,
    durationMs,
    url: c.url,
    signatureHeader: header,
    status: result?.status ?? null,
    outcome,
    error: result ? describeStatus(result, verdict) : error ? storableText(error.message) : null,
    errorCode: result ? null : (error?.code ?? null),
    // The receiver's text as both engines store it (a NUL becomes U+FFFD: store/text.ts), so the
    // API, the live tail and the store all show the same answer.
    responseExcerpt: result ? storableText(result.body.toString('utf8')) : null,
    responseTruncated: result?.truncated ?? false,
    nextAttemptAt: retryAt,
  };
  return { record, next, ended: endedAt };
}
