/**
 * The host's answer to a guest fetch (host/ops.ts performFetch): one declaration for both sides
 * of the bridge. A leaf that imports nothing, so the host's type-check does not take in the guest
 * library and the guest's does not take in the host's Node modules.
 */
export interface FetchResult {
  status: number;
  statusText: string;
  headers: Array<[string, string]>;
  body: Uint8Array;
  url: string;
  redirected: boolean;
}
