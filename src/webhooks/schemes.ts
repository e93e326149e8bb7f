/**
 * The signature schemes a webhook installation chooses from (its `signature_scheme` setting): the
 * spec's `platform` (X-Platform-Signature, the default) or `standard-webhooks` (webhook-id,
 * webhook-timestamp, webhook-signature: standard-webhooks.ts). Free of Node imports: the web
 * console shares them.
 */

export const SIGNATURE_SCHEMES = ['platform', 'standard-webhooks'] as const;
export type SignatureScheme = (typeof SIGNATURE_SCHEMES)[number];
export const DEFAULT_SIGNATURE_SCHEME: SignatureScheme = 'platform';

/** A configuration's `signature_scheme`, the default when it has none (installed before there was a choice). */
export function signatureSchemeOf(value: unknown): SignatureScheme {
  return (SIGNATURE_SCHEMES as readonly unknown[]).includes(value) ? (value as SignatureScheme) : DEFAULT_SIGNATURE_SCHEME;
}

/**
 * The header an attempt's stored signature was sent in, told by its form: `t=<unix>,v1=<hex>` is
 * the platform's X-Platform-Signature, `v1,<base64>[ v1,<base64>…]` is webhook-signature.
 */
export function signatureHeaderName(value: string): 'X-Platform-Signature' | 'webhook-signature' {
  return value.startsWith('v1,') ? 'webhook-signature' : 'X-Platform-Signature';
}
