/**
 * Which scope an integration needs to receive each event. The spec leaves this "not shown"; we
 * follow the principle of the hosted platform: content events need content read, site analytics
 * need views read, Git sync needs git sync, and lifecycle events need nothing.
 *
 * The one table every path in consults: event fan-out (targets), a handler run (emit) and the
 * runtime endpoint, whoever posts to it (the scope is the integration's grant, not the caller's).
 */
export const EVENT_SCOPES: Record<string, string | null> = {
  installation_setup: null,
  space_installation_setup: null,
  site_installation_setup: null,
  ui_render: null,
  space_view: 'space:metadata:read',
  space_content_updated: 'space:content:read',
  space_visibility_updated: 'space:metadata:read',
  space_gitsync_started: 'space:git:sync',
  space_gitsync_completed: 'space:git:sync',
  site_view: 'site:views:read',
  page_feedback: 'site:views:read',
};

/** The scope `eventType` needs that `scopes` lack, or undefined (unknown types need no scope). */
export function missingScope(scopes: readonly string[], eventType: string): string | undefined {
  const needed = Object.hasOwn(EVENT_SCOPES, eventType) ? EVENT_SCOPES[eventType] : null;
  return needed && !scopes.includes(needed) ? needed : undefined;
}

/** Whether `scopes` allow receiving `eventType` (unknown types need no scope). */
export function scopesAllow(scopes: readonly string[], eventType: string): boolean {
  return missingScope(scopes, eventType) === undefined;
}
