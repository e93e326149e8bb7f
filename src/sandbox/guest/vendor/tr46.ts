/**
 * Stand-in for the tr46 package inside the guest bundle. UTS #46 processing of an all-ASCII domain
 * with no punycode label (the URL standard's settings: no STD3 rules, no hyphen checks) is just
 * lower-casing, so that common case is answered here; anything else loads the full tr46 tables
 * (about 240 kB) into the isolate on first use.
 */
import { loadExtra } from '../bridge.ts';

interface Tr46 {
  toASCII(domain: string, opts?: unknown): string | null;
  toUnicode(domain: string, opts?: unknown): { domain: string; error: boolean };
}

const asciiOnly = /^[\x00-\x7f]*$/;
const punycodeLabel = /(^|\.)xn--/i;

export function toASCII(domain: string, opts?: unknown): string | null {
  if (asciiOnly.test(domain) && !punycodeLabel.test(domain)) return domain.toLowerCase();
  return loadExtra<Tr46>('idna').toASCII(domain, opts);
}

export function toUnicode(domain: string, opts?: unknown): { domain: string; error: boolean } {
  return loadExtra<Tr46>('idna').toUnicode(domain, opts);
}
