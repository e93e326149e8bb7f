/**
 * Outbound networking with the safety every caller needs: the private-address guard (checked
 * after DNS resolution), deadlines, body caps, no redirects. Used by webhook delivery and by the
 * sandbox's guest fetch (its host side, sandbox/host/ops.ts).
 */
export { canonicalIP, isLoopbackAddress, isPrivateAddress, parseIPv4 } from './address.ts';
export { guardedLookup, refuseLiteral, refusedAhead, refusedAheadResolved, privateAddressError, NetError, PRIVATE_NETWORKS_HINT } from './lookup.ts';
export { httpRequest, type HttpResult, type HttpRequestOptions } from './request.ts';
export { pooledRequest } from './pooled.ts';
