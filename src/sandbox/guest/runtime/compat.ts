/**
 * GitBook runtime functions for work this server does not do. They exist so a GitBook script loads
 * unchanged; what they declare is reported by `switchyard check` and answered 501 when invoked.
 */

/** GitBook's content sources compute content revisions; accepted and listed, never run here. */
export function createContentSource<T extends { sourceId: string }>(source: T): T {
  if (!source || typeof source !== 'object' || typeof source.sourceId !== 'string')
    throw new TypeError('createContentSource() expects an object { sourceId, getRevision, getPage }');
  return Object.freeze({ ...source });
}
