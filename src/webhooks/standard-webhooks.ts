/**
 * Standard Webhooks signatures, for installations whose `signature_scheme` is `standard-webhooks`
 * (receivers written against that specification verify them with its libraries):
 *
 *   webhook-id: <the delivery's eventId>          the same on every retry
 *   webhook-timestamp: <unix seconds>             fresh at every attempt
 *   webhook-signature: v1,<base64 HMAC-SHA256(key, "<id>.<timestamp>.<raw body>")>
 *
 * one `v1,` entry per live secret (newest first), separated by spaces, during a rotation. The key
 * is the base64-decoded part of a `whsec_<base64>` secret. Verification is constant-time, on the
 * raw bytes, with the same timestamp window as X-Platform-Signature (signature.ts).
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { DEFAULT_TOLERANCE_SEC, type Verification } from './signature.ts';

export const STANDARD_HEADERS = { id: 'webhook-id', timestamp: 'webhook-timestamp', signature: 'webhook-signature' } as const;
export const SECRET_PREFIX = 'whsec_';
/** Key sizes the specification asks of a secret: 24 to 64 bytes. */
export const STANDARD_KEY_BYTES = { min: 24, max: 64 } as const;

const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/**
 * The HMAC key of a secret: the base64 after `whsec_` (the prefix may be left off, as the
 * specification's libraries allow). Undefined when that is not base64 (standard alphabet, padded):
 * the receiving libraries could not read the secret either.
 */
export function standardKey(secret: string): Buffer | undefined {
  const encoded = secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret;
  if (!encoded || !BASE64.test(encoded)) return undefined;
  return Buffer.from(encoded, 'base64');
}

/** Why `secret` cannot be an installation's secret under this scheme (undefined: it can). Says nothing of the secret itself. */
export function standardSecretProblem(secret: string): string | undefined {
  const key = secret.startsWith(SECRET_PREFIX) ? standardKey(secret) : undefined;
  if (!key) return `a standard-webhooks secret is ${SECRET_PREFIX} followed by base64 (A-Z a-z 0-9 + /, padded with =)`;
  if (key.length < STANDARD_KEY_BYTES.min || key.length > STANDARD_KEY_BYTES.max)
    return `a standard-webhooks secret's key is ${STANDARD_KEY_BYTES.min} to ${STANDARD_KEY_BYTES.max} bytes once base64-decoded (this one has ${key.length})`;
  return undefined;
}

/** Base64 HMAC-SHA256 of `${id}.${t}.${body}`. */
export function signStandard(key: Uint8Array, id: string, t: number, body: string | Uint8Array): string {
  const mac = createHmac('sha256', key);
  mac.update(`${id}.${t}.`);
  mac.update(body);
  return mac.digest('base64');
}

/**
 * The webhook-signature value: `v1,<signature>` per secret that has a key, in the order given,
 * space-separated. Empty when none has (the caller decides what that means).
 */
export function standardSignatureHeader(secrets: string[], id: string, t: number, body: string | Uint8Array): string {
  const keys = secrets.map(standardKey).filter((k): k is Buffer => k !== undefined);
  return keys.map((k) => `v1,${signStandard(k, id, t, body)}`).join(' ');
}

/**
 * Check the three headers against the raw body. Fails closed: a header missing, a timestamp that
 * is not unix seconds or is outside `toleranceSec` (default 300; 0 turns it off) of `now`, no
 * `v1,` entry, or none matching a key of `secrets`. Every candidate is compared in constant time.
 */
export function verifyStandardSignature(
  headers: { id?: string | null; timestamp?: string | null; signature?: string | null },
  rawBody: string | Uint8Array,
  secrets: string | string[],
  opts: { toleranceSec?: number; now?: number } = {},
): Verification {
  const { id, timestamp, signature } = headers;
  for (const [name, value] of [
    [STANDARD_HEADERS.id, id],
    [STANDARD_HEADERS.timestamp, timestamp],
    [STANDARD_HEADERS.signature, signature],
  ] as const)
    if (!value) return { ok: false, reason: `missing ${name} header` };
  if (!/^\d{1,12}$/.test(timestamp!)) return { ok: false, reason: `${STANDARD_HEADERS.timestamp} is not unix seconds` };
  const t = Number(timestamp);
  const tolerance = opts.toleranceSec ?? DEFAULT_TOLERANCE_SEC;
  const now = opts.now ?? Math.floor(Date.now() / 1000);
  if (tolerance > 0 && Math.abs(now - t) > tolerance)
    return { ok: false, reason: `timestamp ${t} is outside the tolerance window of ${tolerance} s (now ${now})` };
  const given = signature!
    .split(' ')
    .filter((s) => s.startsWith('v1,'))
    .map((s) => Buffer.from(s.slice(3), 'utf8'));
  if (!given.length) return { ok: false, reason: `${STANDARD_HEADERS.signature} has no v1, signature` };
  const keys = (Array.isArray(secrets) ? secrets : [secrets]).map(standardKey).filter((k): k is Buffer => k !== undefined);
  if (!keys.length) return { ok: false, reason: `no secret to verify with (a standard-webhooks secret is ${SECRET_PREFIX} followed by base64)` };
  let matched = false;
  for (const key of keys) {
    const expected = Buffer.from(signStandard(key, id!, t, rawBody), 'utf8');
    for (const candidate of given) if (candidate.length === expected.length && timingSafeEqual(candidate, expected)) matched = true;
  }
  return matched ? { ok: true, t } : { ok: false, reason: 'no signature matches the body' };
}
