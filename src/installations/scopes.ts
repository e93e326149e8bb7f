/**
 * Which scope an integration needs to receive each event. The spec leaves this "not shown"; we
 * follow the principle of the hosted platform: content events need content read, site analytics
 * need views read, Git sync needs git sync, and lifecycle events need nothing.
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

/** Whether `scopes` allow receiving `eventType` (unknown types need no scope). */
export function scopesAllow(scopes: readonly string[], eventType: string): boolean {
  const needed = EVENT_SCOPES[eventType];
  return !needed || scopes.includes(needed);
}
