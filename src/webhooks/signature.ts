/**
 * X-Platform-Signature: `t=<unix seconds>,v1=<lowercase hex HMAC-SHA256(secret, "<t>.<raw body>")>`,
 * one `v1=` per live secret during a rotation (the format Stripe uses, so its libraries verify it).
 * Verification is constant-time, on the raw bytes, and checks the timestamp window (replay).
 */
import { createHmac, timingSafeEqual } from 'node:crypto';

export const SIGNATURE_HEADER = 'X-Platform-Signature';
export const DEFAULT_TOLERANCE_SEC = 300;

/** Lowercase hex HMAC-SHA256 of `${t}.${body}` keyed with `secret`. */
export function signPayload(secret: string, t: number, body: string | Uint8Array): string {
  const mac = createHmac('sha256', secret);
  mac.update(`${t}.`);
  mac.update(body);
  return mac.digest('hex');
}

/** The header value for `body` at time `t`: one `v1=` per secret, in the order given. */
export function signatureHeader(secrets: string[], t: number, body: string | Uint8Array): string {
  if (!secrets.length) throw new Error('signatureHeader needs at least one secret');
  return [`t=${t}`, ...secrets.map((s) => `v1=${signPayload(s, t, body)}`)].join(',');
}

/** `t` and every `v1` of a header; unknown schemes are ignored (forward compatible). */
export function parseSignatureHeader(header: string): { t?: number; v1: string[] } {
  let t: number | undefined;
  const v1: string[] = [];
  for (const part of header.split(',')) {
    const eq = part.indexOf('=');
    if (eq < 0) continue;
    const key = part.slice(0, eq).trim();
    const value = part.slice(eq + 1).trim();
    if (key === 't' && /^\d{1,12}$/.test(value)) t = Number(value);
    else if (key === 'v1' && value) v1.push(value);
  }
  return { t, v1 };
}

export type Verification = { ok: true; t: number } | { ok: false; reason: string };

/**
 * Check a signature header against the raw body. Fails closed: missing header, missing `t` or
 * `v1`, a timestamp outside `toleranceSec` (default 300) of `now` (unix seconds), or no `v1`
 * matching any of `secrets`. Every candidate is compared in constant time.
 */
export function verifySignature(
  header: string | null | undefined,
  rawBody: string | Uint8Array,
  secrets: string | string[],
  opts: { toleranceSec?: number; now?: number } = {},
): Verification {
  if (!header) return { ok: false, reason: `missing ${SIGNATURE_HEADER} header` };
  const { t, v1 } = parseSignatureHeader(header);
  if (t === undefined) return { ok: false, reason: 'signature header has no valid t= timestamp' };
  if (!v1.length) return { ok: false, reason: 'signature header has no v1= signature' };
  const tolerance = opts.toleranceSec ?? DEFAULT_TOLERANCE_SEC;
  const now = opts.now ?? Math.floor(Date.now() / 1000);
  if (tolerance > 0 && Math.abs(now - t) > tolerance)
    return { ok: false, reason: `timestamp ${t} is outside the tolerance window of ${tolerance} s (now ${now})` };
  const keys = (Array.isArray(secrets) ? secrets : [secrets]).filter(Boolean);
  if (!keys.length) return { ok: false, reason: 'no secret to verify with' };
  let matched = false;
  for (const key of keys) {
    const expected = Buffer.from(signPayload(key, t, rawBody), 'utf8');
    for (const candidate of v1) {
      const given = Buffer.from(candidate, 'utf8');
      // Same length first (timingSafeEqual requires it); the length of a hex digest is public.
      if (given.length === expected.length && timingSafeEqual(given, expected)) matched = true;
    }
  }
  return matched ? { ok: true, t } : { ok: false, reason: 'no signature matches the body' };
}
