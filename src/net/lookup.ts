/**
 * The SSRF guard at the only place it cannot be fooled: after DNS resolution, on the very
 * addresses the socket will connect to (so DNS rebinding between a check and the connect is
 * impossible). Node's net.connect skips `lookup` for IP literals, so callers that build their
 * own requests must also call `refuseLiteral` on the URL's host; httpRequest does both.
 *
 * Failure policy: fail closed. If any resolved address is private the host is refused, because
 * the connection may pick any of them.
 */
import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { isIP, type LookupFunction } from 'node:net';
import { isPrivateAddress } from './address.ts';

/** An outbound request failure with a stable `code` (ETIMEDOUT, ECONNREFUSED, EPRIVATEADDR...). */
export class NetError extends Error {
  readonly code: string;
  readonly host?: string;
  readonly address?: string;
  constructor(code: string, message: string, extra: { host?: string; address?: string; cause?: unknown } = {}) {
    super(message, extra.cause === undefined ? undefined : { cause: extra.cause });
    this.name = 'NetError';
    this.code = code;
    this.host = extra.host;
    this.address = extra.address;
  }
}

/** Every refusal names the setting that lifts it. */
export const PRIVATE_NETWORKS_HINT =
  'private networks are not allowed; set webhooks.allow_private_networks: true in config.yaml for a receiver on this machine or your network';

/**
 * Without DNS: is this URL's host one the guard will refuse (a private IP literal in any spelling,
 * `localhost`)? For warnings ahead of time; the guard itself decides on the resolved addresses.
 */
export function refusedAhead(url: string, allowPrivate: boolean): string | undefined {
  if (allowPrivate) return undefined;
  let host: string;
  try {
    host = new URL(url).hostname;
  } catch {
    return undefined;
  }
  const bare = host.startsWith('[') ? host.slice(1, -1) : host;
  if (bare === 'localhost' || bare.endsWith('.localhost') || (isIP(bare) && isPrivateAddress(bare)))
    return `${host} is a private or loopback address: deliveries to it will be refused (${PRIVATE_NETWORKS_HINT})`;
  return undefined;
}

/**
 * refusedAhead, and for a host name also what the delivery guard will see: the name resolved now
 * by the guard's own lookup (guardedLookup), refused as a send would be (a name in /etc/hosts for
 * 127.0.0.1, a private DNS record). A name that does not resolve within `timeoutMs` says nothing
 * (it may resolve later, and the guard decides then).
 */
export async function refusedAheadResolved(url: string, allowPrivate: boolean, timeoutMs = 1000): Promise<string | undefined> {
  const named = refusedAhead(url, allowPrivate);
  if (named || allowPrivate) return named;
  let host: string;
  try {
    host = new URL(url).hostname;
  } catch {
    return undefined;
  }
  if (!host || isIP(host.startsWith('[') ? host.slice(1, -1) : host)) return undefined;
  const refused = await new Promise<NetError | undefined>((resolve) => {
    const timer = setTimeout(() => resolve(undefined), timeoutMs);
    guardedLookup(false)(host, { all: true }, (err) => {
      clearTimeout(timer);
      resolve(err instanceof NetError && err.code === 'EPRIVATEADDR' ? err : undefined);
    });
  });
  return refused && `${host} resolves to ${refused.address}, a private or loopback address: deliveries to it will be refused (${PRIVATE_NETWORKS_HINT})`;
}

export function privateAddressError(host: string, address: string): NetError {
  const resolved = host === address ? `${address} is` : `${host} resolves to ${address},`;
  return new NetError('EPRIVATEADDR', `refused: ${resolved} a private, loopback, link-local or reserved address (${PRIVATE_NETWORKS_HINT})`, {
    host,
    address,
  });
}

/** For IP-literal hosts (which never reach `lookup`): the refusal, or null when allowed. */
export function refuseLiteral(hostname: string, allowPrivate: boolean): NetError | null {
  const bare = hostname.startsWith('[') ? hostname.slice(1, -1) : hostname;
  if (allowPrivate || !isIP(bare)) return null;
  return isPrivateAddress(bare) ? privateAddressError(bare, bare) : null;
}

/** A `lookup` for http.request / http.Agent / net.connect that refuses private addresses. */
export function guardedLookup(allowPrivate: boolean): LookupFunction {
  return (hostname, options, callback) => {
    dnsLookup(hostname, { ...options, all: true }, (err, addresses: LookupAddress[]) => {
      if (err) return (callback as any)(err);
      if (!allowPrivate) {
        const bad = addresses.find((a) => isPrivateAddress(a.address));
        if (bad) return (callback as any)(privateAddressError(hostname, bad.address));
      }
      if (addresses.length === 0) {
        return (callback as any)(new NetError('ENOTFOUND', `${hostname} did not resolve to any address`, { host: hostname }));
      }
      if (options.all) (callback as any)(null, addresses);
      else (callback as any)(null, addresses[0].address, addresses[0].family);
    });
  };
}
